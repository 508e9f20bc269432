package runner_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/graph"
)

// lineProvider is a custom provider: it streams a text, one line at a time,
// from an HTTP endpoint that ends it with the line "[DONE]". Like every
// adapter it translates its protocol into events and reports a stream that
// ended without the terminal line as diagnostics.ErrDisconnected; it does
// not retry by itself.
type lineProvider struct{ url string }

func (p *lineProvider) Capabilities() provider.Capabilities { return provider.Capabilities{} }

func (p *lineProvider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"?prompt="+url.QueryEscape(req.Prompt), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err // classified by diagnostics.Classify: refused, reset, ...
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "[DONE]" {
			return emit(provider.Event{Kind: provider.KindDone, Seq: -1})
		}
		if err := emit(provider.Event{Kind: provider.KindDelta, Text: sc.Text() + "\n", Seq: -1}); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %v", diagnostics.ErrDisconnected, sc.Err())
}

// lineServer serves a three-line text on 127.0.0.1, and cuts the TCP
// connection of its first response after two lines.
func lineServer() (addr string, stop func()) {
	var requests atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		for i, line := range []string{"sockets close;", "streams drop;", "noderun " + r.URL.Query().Get("prompt")} {
			if n == 1 && i == 2 {
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.Close() // mid-body: the client sees an unexpected EOF
				return
			}
			fmt.Fprintln(w, line)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintln(w, "[DONE]")
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }
}

// A program embeds noderun: it registers its own provider kind, builds a
// graph in code, and runs it with a journal. The provider's first stream is
// cut mid-way by its server; the runner's recovery loop (not the provider)
// detects it, retries within the profile's budget, and the node completes
// with the undisturbed output. The progress callback sees each diagnostic
// with its code, and each recovery step as data.
func Example_customProvider() {
	addr, stop := lineServer()
	defer stop()
	dir, _ := os.MkdirTemp("", "noderun-example-")
	defer os.RemoveAll(dir)

	kinds := map[string]runner.ProviderFunc{
		"lines": func(spec *graph.ProviderSpec) (provider.Provider, error) { return &lineProvider{url: addr}, nil },
	}
	g, err := graph.Build(&graph.Graph{
		Name:      "embedded",
		Profile:   "ci", // millisecond backoff, for the example
		Inputs:    []*graph.Input{{Name: "verb", Default: "recovers.", HasDefault: true}},
		Providers: map[string]*graph.ProviderSpec{"text": {Kind: "lines"}},
		Nodes:     []*graph.Node{{ID: "essay", Prompt: `{{ input "verb" }}`}},
	}, graph.Options{Kinds: runner.KindNames(kinds)})
	if err != nil {
		fmt.Println(err)
		return
	}
	j, err := journal.Open(context.Background(), filepath.Join(dir, "noderun.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Close()

	res, err := runner.Run(context.Background(), g, runner.Options{
		Journal: j,
		Kinds:   kinds,
		OnProgress: func(p runner.Progress) {
			switch p.State {
			case runner.ProgressDiagnostic:
				fmt.Printf("%s %s (%d bytes so far)\n", p.Node, p.Code, p.Bytes)
			case runner.ProgressRecovering: // the step as data: its code says how, N of Of its budget
				fmt.Printf("%s %s %d of %d\n", p.Node, p.Step.Code.Means, p.Step.N, p.Step.Of)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status)
	fmt.Print(strings.TrimSpace(res.Nodes[0].Output))
	// Output:
	// essay NR101 disconnect_detected (29 bytes so far)
	// essay NR103 retry_started (29 bytes so far)
	// essay retry 1 of 3
	// essay NR108 recovered (47 bytes so far)
	// completed
	// sockets close;
	// streams drop;
	// noderun recovers.
}
