// Command embed is noderun embedded in a Go program, with exported API only
// (the README's Embedding section, compiled and run by `go test ./...`):
//
//  1. a 3-node graph built in code on the in-process simulator, whose
//     scripted fault cuts one node's chat stream; the run recovers it, and
//     the outputs are byte-identical to an undisturbed run's;
//  2. a custom provider kind on an httptest server that cuts its stream;
//     the runner re-attaches through the kind's provider.Resumer, and the
//     output is byte-identical to the server's undisturbed text;
//  3. a run cancelled mid-stream (with a cause) returns
//     runner.ErrInterrupted and the cause with its result, and runner.Resume
//     finishes it byte-identical to an undisturbed run;
//  4. a nil graph, one filled in by hand and never built, and an unknown
//     kind are errors (sentinels), not panics.
//
// It prints one line per fact and exits 1 if one does not hold.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// run does the three parts in a temporary directory, writing what it found
// to w.
func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "noderun-embed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	j, err := journal.Open(ctx, filepath.Join(dir, "noderun.db"))
	if err != nil {
		return err
	}
	defer j.Close()
	for _, part := range []func(context.Context, io.Writer, *journal.Journal) error{simulated, custom, cancelled, misuse} {
		if err := part(ctx, w, j); err != nil {
			return err
		}
	}
	return nil
}

// simGraph is the 3-node graph on the simulator; faults are its scripted
// failures.
func simGraph(faults []sim.Fault) (*graph.Graph, error) {
	return graph.Build(&graph.Graph{
		Name:    "embedded",
		Profile: "ci", // millisecond backoff
		Providers: map[string]*graph.ProviderSpec{"sim": {Kind: graph.ProviderKindSim,
			Sim: &sim.Config{Seed: 42, Tokens: 120, Faults: faults}}},
		Nodes: []*graph.Node{
			{ID: "research", Prompt: "Why do long streams drop?"},
			{ID: "outline", Needs: []string{"research"}, Prompt: `Outline a fix for: {{ output "research" }}`},
			{ID: "summary", Needs: []string{"research", "outline"}, Prompt: `Summarize {{ output "outline" }} for {{ output "research" }}`},
		},
	}, graph.Options{})
}

func simulated(ctx context.Context, w io.Writer, j *journal.Journal) error {
	clean, err := simGraph(nil)
	if err != nil {
		return err
	}
	want, err := runner.Run(ctx, clean, runner.Options{Journal: j})
	if err != nil {
		return err
	}
	cut, err := simGraph([]sim.Fault{{Endpoint: sim.EndpointChat, Node: "outline", Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 30}})
	if err != nil {
		return err
	}
	got, err := runner.Run(ctx, cut, runner.Options{Journal: j})
	if err != nil {
		return err
	}
	if got.Failed() || got.Status != journal.RunCompleted {
		return fmt.Errorf("simulated run: %s", got.Status)
	}
	for i, n := range got.Nodes {
		if n.Output != want.Nodes[i].Output {
			return fmt.Errorf("simulated run: node %s's output differs from the undisturbed run's", n.ID)
		}
		var faults, steps []string
		for _, d := range n.Diagnostics {
			switch d.Record.Code.Role {
			case diagnostics.RoleFault:
				faults = append(faults, d.Record.Code.Name)
			case diagnostics.RoleStep:
				steps = append(steps, d.Record.Code.Name)
			}
		}
		fmt.Fprintf(w, "sim %s: %s, %d attempt(s), faults %v, steps %v, %d bytes identical\n",
			n.ID, n.State, len(n.Attempts), faults, steps, len(n.Output))
	}
	return nil
}

// lines is what the custom kind's server streams, one numbered line at a
// time.
var lines = []string{"sockets close;", "gateways cut idle streams;", "the work goes on at the provider;", "nothing is generated twice."}

// lineServer serves lines as "SEQ TEXT" after a first line "REF ID", and
// the lines after ?after=SEQ of a response on ?ref=ID: a resumable
// protocol. cut, when above 0, cuts the connection of the next stream
// after that many lines (and is reset): the program cuts its first stream
// after two; its test (providertest) cuts where it likes.
func lineServer(cut *atomic.Int32) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, n := -1, int(cut.Swap(0))
		if ref := r.URL.Query().Get("ref"); ref == "" {
			fmt.Fprintln(w, "REF resp_1")
		} else {
			after, _ = strconv.Atoi(r.URL.Query().Get("after"))
		}
		for i, sent := after+1, 0; i < len(lines); i, sent = i+1, sent+1 {
			if n > 0 && sent == n {
				panic(http.ErrAbortHandler) // the connection is cut mid-body
			}
			fmt.Fprintf(w, "%d %s\n", i, lines[i])
			w.(http.Flusher).Flush()
		}
		fmt.Fprintln(w, "[DONE]")
	}))
}

// lineProvider is the custom kind: it streams lineServer's protocol, and
// can re-attach to a response (provider.Resumer, Capabilities.Resume).
// Like every adapter it reports a stream that ended without its terminal
// line as diagnostics.ErrDisconnected and leaves recovery to the runner.
type lineProvider struct {
	url    string
	client *http.Client
}

func (p *lineProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Resume: true}
}

func (p *lineProvider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	return p.get(ctx, p.url, emit)
}

func (p *lineProvider) Resume(ctx context.Context, req provider.Request, cur provider.Cursor, emit provider.Emit) error {
	return p.get(ctx, fmt.Sprintf("%s?ref=%s&after=%d", p.url, cur.Ref, cur.Seq), emit)
}

func (p *lineProvider) get(ctx context.Context, url string, emit provider.Emit) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := provider.Send(p.client, hr)
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
		seq, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: line %q", diagnostics.ErrProtocol, line)
		}
		if err := emit(provider.Event{Kind: provider.KindDelta, Text: text + "\n", Seq: seq}); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %v", diagnostics.ErrDisconnected, sc.Err())
}

func custom(ctx context.Context, w io.Writer, j *journal.Journal) error {
	var cut atomic.Int32
	cut.Store(2)
	srv := lineServer(&cut)
	defer srv.Close()
	kinds := map[string]runner.ProviderFunc{
		"lines": func(*graph.ProviderSpec) (provider.Provider, error) {
			return &lineProvider{url: srv.URL, client: srv.Client()}, nil
		},
	}
	g, err := graph.Build(&graph.Graph{Name: "custom", Profile: "ci",
		Providers: map[string]*graph.ProviderSpec{"text": {Kind: "lines"}},
		Nodes:     []*graph.Node{{ID: "essay", Prompt: "Why do streams drop?"}},
	}, graph.Options{Kinds: runner.KindNames(kinds)})
	if err != nil {
		return err
	}
	var means []string
	res, err := runner.Run(ctx, g, runner.Options{Journal: j, Kinds: kinds, OnProgress: func(p runner.Progress) {
		if p.State == runner.ProgressRecovering {
			means = append(means, p.Step.Code.Means.String())
		}
	}})
	if err != nil {
		return err
	}
	n := res.Nodes[0]
	if n.State != journal.NodeCompleted || n.Output != strings.Join(lines, "\n")+"\n" {
		return fmt.Errorf("custom kind: %s, output %q", n.State, n.Output)
	}
	fmt.Fprintf(w, "custom %s: %s, %d attempt(s) on %s, recovered by %v, %d bytes identical\n",
		n.ID, n.State, len(n.Attempts), n.Attempts[0].Ref, means, len(n.Output))
	return nil
}

func cancelled(ctx context.Context, w io.Writer, j *journal.Journal) error {
	g, err := graph.Build(&graph.Graph{Name: "slow", Profile: "ci",
		Providers: map[string]*graph.ProviderSpec{"sim": {Kind: graph.ProviderKindSim, Sim: &sim.Config{Tokens: 200, TokensPerSecond: 400}}},
		Nodes:     []*graph.Node{{ID: "long", Prompt: "Take your time."}},
	}, graph.Options{})
	if err != nil {
		return err
	}
	// Cancelled with a cause, as a program that stops a run for its own
	// reason would: the cause comes back with the interruption.
	cause := errors.New("the operator went home")
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res, err := runner.Run(cctx, g, runner.Options{Journal: j, OnProgress: func(p runner.Progress) {
		if p.State == runner.ProgressData && p.Bytes > 0 {
			cancel(cause)
		}
	}})
	if !errors.Is(err, runner.ErrInterrupted) || !errors.Is(err, cause) {
		return fmt.Errorf("cancelled run: err %v, want runner.ErrInterrupted and the cause", err)
	}
	fmt.Fprintf(w, "cancel: run %s, node %s, errors.Is(err, cause) %t\n", res.Status, res.Nodes[0].State, errors.Is(err, cause))
	res, err = runner.Resume(ctx, res.RunID, nil, runner.Options{Journal: j})
	if err != nil {
		return err
	}
	want := strings.Join(sim.Text("sim", "Take your time.", 0, 200), "")
	fmt.Fprintf(w, "resume: run %s, node %s, identical to an undisturbed run %t\n", res.Status, res.Nodes[0].State, res.Nodes[0].Output == want)
	return nil
}

// misuse gives runner.Run what a program should not: errors, not panics.
func misuse(ctx context.Context, w io.Writer, j *journal.Journal) error {
	_, errNil := runner.Run(ctx, nil, runner.Options{Journal: j})
	unbuilt := &graph.Graph{Name: "by hand", Providers: map[string]*graph.ProviderSpec{"s": {Name: "s", Kind: graph.ProviderKindSim}},
		Nodes: []*graph.Node{{ID: "a", Provider: "s", Prompt: "hi"}}}
	_, errUnbuilt := runner.Run(ctx, unbuilt, runner.Options{Journal: j})
	_, errKind := graph.Build(&graph.Graph{Name: "mine", Providers: map[string]*graph.ProviderSpec{"s": {Kind: "mine"}},
		Nodes: []*graph.Node{{ID: "a", Prompt: "hi"}}}, graph.Options{})
	fmt.Fprintf(w, "misuse: nil graph %t, unbuilt graph %t, unknown kind %t\n", errors.Is(errNil, runner.ErrNoGraph),
		errors.Is(errUnbuilt, runner.ErrUnbuiltGraph), errors.Is(errKind, graph.ErrUnknownKind))
	return nil
}
