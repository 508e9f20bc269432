package runner_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/graph"
	"github.com/noderun/noderun/runner/ledger"
)

// tempJournal opens a journal in a fresh directory; done closes it and
// removes the directory.
func tempJournal() (j *journal.Journal, done func()) {
	dir, err := os.MkdirTemp("", "noderun-example-")
	if err != nil {
		log.Fatal(err)
	}
	j, err = journal.Open(context.Background(), filepath.Join(dir, "noderun.db"))
	if err != nil {
		log.Fatal(err)
	}
	return j, func() { j.Close(); os.RemoveAll(dir) }
}

// A graph built in code on the in-process simulator, configured with a
// typed sim.Config whose first chat request for node "draft" is cut after 10
// events. The result holds each node's attempts and diagnostics; package
// ledger gives the summary `noderun run` prints.
func Example_simulatorInCode() {
	j, done := tempJournal()
	defer done()
	g, err := graph.Build(&graph.Graph{
		Name:    "in-code",
		Profile: "ci",
		Providers: map[string]*graph.ProviderSpec{"sim": {Kind: graph.ProviderKindSim, Sim: &sim.Config{
			Seed: 7, Tokens: 40,
			Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Node: "draft", Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 10}},
		}}},
		Nodes: []*graph.Node{
			{ID: "outline", Prompt: "Outline a note on dropped streams."},
			{ID: "draft", Needs: []string{"outline"}, Prompt: `Draft it from: {{ output "outline" }}`},
		},
	}, graph.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := runner.Run(context.Background(), g, runner.Options{Journal: j})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status)
	for _, n := range res.Nodes {
		for _, a := range n.Attempts {
			fmt.Printf("%s attempt %d: %s %s %s\n", n.ID, a.N, a.Provider, a.Mode, a.Outcome)
		}
		for _, d := range n.Diagnostics {
			if d.Record.Code == diagnostics.Recovered {
				steps, _ := diagnostics.KeyRecoverySteps.Of(d.Record)
				fmt.Printf("%s %s after %d step\n", n.ID, d.Record.Code, steps)
			}
		}
	}

	run, err := ledger.Load(context.Background(), j, res.RunID, ledger.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range ledger.AccountOf(run, nil).Nodes {
		// The verdict's kind is for code, its sentence for people.
		fmt.Printf("%s: %s, faults %v\n", n.ID, n.Verdict.Kind, n.Faults)
	}
	// Output:
	// completed
	// outline attempt 1: sim start ok
	// draft attempt 1: sim start error
	// draft attempt 2: sim retry ok
	// draft NR108 recovered after 1 step
	// outline: clean, faults map[]
	// draft: recovered, faults map[disconnect_detected:1]
}

// seqServer streams a text by numbered lines ("SEQ TEXT", after a first
// line "REF r1"), and serves the lines after ?after=SEQ of a response
// again: a resumable protocol. It cuts its first stream after two lines.
func seqServer() *httptest.Server {
	lines := []string{"sockets close;", "streams drop;", "the work goes on;", "nothing is generated twice."}
	var cut atomic.Bool // the first stream is cut; handlers run on goroutines of their own
	cut.Store(true)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		if r.URL.Query().Get("ref") == "" {
			after = -1
			fmt.Fprintln(w, "REF r1")
		}
		for i := after + 1; i < len(lines); i++ {
			if i == 2 && cut.CompareAndSwap(true, false) {
				panic(http.ErrAbortHandler) // the connection is cut mid-body
			}
			fmt.Fprintf(w, "%d %s\n", i, lines[i])
			w.(http.Flusher).Flush()
		}
		fmt.Fprintln(w, "[DONE]")
	}))
}

// seqProvider is a custom kind that can re-attach to its work: it
// implements provider.Resumer and says so in its Capabilities.
type seqProvider struct {
	url string
	c   *http.Client
}

func (p *seqProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Resume: true}
}

func (p *seqProvider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	return p.get(ctx, p.url, emit)
}

// Resume emits only what follows the cursor: the runner journaled every
// event up to cur.Seq.
func (p *seqProvider) Resume(ctx context.Context, req provider.Request, cur provider.Cursor, emit provider.Emit) error {
	return p.get(ctx, fmt.Sprintf("%s?ref=%s&after=%d", p.url, cur.Ref, cur.Seq), emit)
}

func (p *seqProvider) get(ctx context.Context, url string, emit provider.Emit) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := provider.Send(p.c, hr) // marks the node, shows the response to the pacer
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ref, ok := strings.CutPrefix(line, "REF "); ok {
			if err := emit(provider.Event{Kind: provider.KindRef, Ref: ref, Seq: -1}); err != nil {
				return err
			}
			continue
		}
		if line == "[DONE]" {
			return emit(provider.Event{Kind: provider.KindDone, Seq: -1})
		}
		n, text, _ := strings.Cut(line, " ")
		seq, _ := strconv.ParseInt(n, 10, 64)
		if err := emit(provider.Event{Kind: provider.KindDelta, Text: text + "\n", Seq: seq}); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %v", diagnostics.ErrDisconnected, sc.Err())
}

// A custom provider kind with resume: its server cuts the first stream,
// and the runner re-attaches to the response from the last line it
// journaled (NR102, within the same attempt), regenerating nothing.
func Example_customKindWithResume() {
	srv := seqServer()
	defer srv.Close()
	j, done := tempJournal()
	defer done()
	kinds := map[string]runner.ProviderFunc{
		"seq": func(*graph.ProviderSpec) (provider.Provider, error) {
			return &seqProvider{url: srv.URL, c: srv.Client()}, nil
		},
	}
	g, err := graph.Build(&graph.Graph{Name: "custom", Profile: "ci",
		Providers: map[string]*graph.ProviderSpec{"lines": {Kind: "seq"}},
		Nodes:     []*graph.Node{{ID: "essay", Prompt: "x"}},
	}, graph.Options{Kinds: runner.KindNames(kinds)})
	if err != nil {
		log.Fatal(err)
	}
	res, err := runner.Run(context.Background(), g, runner.Options{Journal: j, Kinds: kinds,
		OnProgress: func(p runner.Progress) {
			if p.State == runner.ProgressDiagnostic && p.Code == diagnostics.ReconnectScheduled {
				fmt.Println("re-attaching after", p.Bytes, "bytes")
			}
		}})
	if err != nil {
		log.Fatal(err)
	}
	n := res.Nodes[0]
	for _, a := range n.Attempts {
		fmt.Printf("attempt %d: %s %s %s\n", a.N, a.Mode, a.Ref, a.Outcome)
	}
	fmt.Print(n.Output)
	// Output:
	// re-attaching after 29 bytes
	// attempt 1: start r1 ok
	// sockets close;
	// streams drop;
	// the work goes on;
	// nothing is generated twice.
}

// Cancelling a run: Run returns its result with an error that matches
// runner.ErrInterrupted (and context.Canceled); Resume continues it and
// the completed node keeps its output.
func Example_cancelAndResume() {
	j, done := tempJournal()
	defer done()
	g, err := graph.Build(&graph.Graph{Name: "slow", Profile: "ci",
		Providers: map[string]*graph.ProviderSpec{"sim": {Kind: graph.ProviderKindSim, Sim: &sim.Config{Tokens: 200, TokensPerSecond: 400}}},
		Nodes:     []*graph.Node{{ID: "a", Prompt: "x"}, {ID: "b", Needs: []string{"a"}, Prompt: `{{ output "a" }}`}},
	}, graph.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := runner.Run(ctx, g, runner.Options{Journal: j, OnProgress: func(p runner.Progress) {
		if p.Node == "b" && p.State == runner.ProgressData && p.Bytes > 0 {
			cancel() // Ctrl-C, while b streams
		}
	}})
	switch {
	case errors.Is(err, runner.ErrInterrupted):
		fmt.Println(res.Status, errors.Is(err, context.Canceled))
	case err != nil:
		log.Fatal(err)
	}
	for _, n := range res.Nodes {
		fmt.Println(n.ID, n.State)
	}

	res, err = runner.Resume(context.Background(), res.RunID, nil, runner.Options{Journal: j})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status)
	for _, n := range res.Nodes {
		fmt.Println(n.ID, n.State, len(n.Attempts), "attempts")
	}
	// Output:
	// interrupted true
	// a completed
	// b canceled
	// completed
	// a completed 1 attempts
	// b completed 2 attempts
}
