package runner_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/graph"
)

// Issue 44: cancellation by any means a caller has, through the exported
// API only (a cancel with a cause, its deadline), leaves the node
// interrupted and resumable, the cause in its record; Resume completes it
// byte for byte as an undisturbed run.
func TestCancellationByAnyMeansInterrupts(t *testing.T) {
	const src = "name: t\nprofile: ci\nproviders:\n  s:\n    kind: sim\n    sim: {tokens: 400, tokens_per_second: 200}\nnodes:\n  - {id: a, prompt: say a lot}\n"
	g, err := runner.ParseGraph(filepath.Join(t.TempDir(), "g.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// The reference is the same answer at a pace of no consequence: the
	// simulator's text does not depend on it.
	fast, err := runner.ParseGraph(filepath.Join(t.TempDir(), "g.yaml"), []byte(strings.Replace(src, "tokens_per_second: 200", "tokens_per_second: 100000", 1)))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := runner.Run(context.Background(), fast, runner.Options{Journal: testkit.TempJournal(t, "ref.db")})
	if err != nil || ref.Status != journal.RunCompleted || len(ref.Nodes[0].Output) == 0 {
		t.Fatalf("reference: %v %+v", err, ref)
	}
	cause := errors.New("the operator went home")
	for _, how := range []string{"cancel with a cause", "the caller's deadline"} {
		t.Run(how, func(t *testing.T) {
			// Side by side, each with its own journal; the test itself stays
			// serial (beside the package's other tests under -race, a stream
			// has outrun the deadline it is cancelled at).
			t.Parallel()
			j := testkit.TempJournal(t, "j.db")
			ctx, stop := context.Background(), func() {}
			if how == "cancel with a cause" {
				c, cancel := context.WithCancelCause(context.Background())
				ctx, stop = c, func() { cancel(cause) }
			} else {
				// The stream takes 2 s: the deadline strikes in its middle
				// (or, on a slow machine, before it began: interrupted too).
				c, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
				defer cancel()
				ctx = c
			}
			var once bool
			res, err := runner.Run(ctx, g, runner.Options{Journal: j, OnProgress: func(p runner.Progress) {
				if p.State == runner.ProgressData && p.Bytes > 0 && !once {
					once = true
					stop()
				}
			}})
			if !errors.Is(err, runner.ErrInterrupted) {
				t.Fatalf("err = %v; want ErrInterrupted", err)
			}
			if how == "cancel with a cause" && !errors.Is(err, cause) {
				t.Errorf("err = %v; want the cause too", err)
			}
			if res.Status != journal.RunInterrupted || res.Nodes[0].State != journal.NodeCanceled {
				t.Fatalf("run %s, node %s (%v); want interrupted", res.Status, res.Nodes[0].State, res.Nodes[0].Err)
			}
			if how == "cancel with a cause" && !strings.Contains(res.Nodes[0].Err.Error(), cause.Error()) {
				t.Errorf("the node's error %q does not keep the cause", res.Nodes[0].Err)
			}
			evs, err := j.Events(context.Background(), res.RunID, journal.EventFilter{Node: "a", Kinds: []string{journal.KindDiagnostic}})
			if err != nil {
				t.Fatal(err)
			}
			var recs strings.Builder
			for _, e := range evs {
				recs.Write(e.Payload)
			}
			if how == "cancel with a cause" && !strings.Contains(recs.String(), cause.Error()) {
				t.Errorf("no diagnostic of the node keeps the cause:\n%s", recs.String())
			}
			again, err := runner.Resume(context.Background(), res.RunID, nil, runner.Options{Journal: j})
			if err != nil || again.Status != journal.RunCompleted || again.Nodes[0].Output != ref.Nodes[0].Output {
				t.Fatalf("resume: %v, %s; output equal: %v", err, again.Status, again.Nodes[0].Output == ref.Nodes[0].Output)
			}
		})
	}
}

// A nil graph, or one filled in by hand and never built, is an error, not a
// panic in a scheduler goroutine.
func TestUnbuiltGraphsAreErrors(t *testing.T) {
	j := testkit.TempJournal(t, "j.db")
	if _, err := runner.Run(context.Background(), nil, runner.Options{Journal: j}); !errors.Is(err, runner.ErrNoGraph) {
		t.Errorf("nil graph: %v", err)
	}
	g := &graph.Graph{Name: "by hand", Providers: map[string]*graph.ProviderSpec{"s": {Name: "s", Kind: "sim"}},
		Nodes: []*graph.Node{{ID: "a", Provider: "s", Prompt: "hi"}}}
	if _, err := runner.Run(context.Background(), g, runner.Options{Journal: j}); !errors.Is(err, runner.ErrUnbuiltGraph) {
		t.Errorf("unbuilt graph: %v", err)
	}
	if _, err := runner.RunNode(context.Background(), g, "a", runner.NodeOptions{Options: runner.Options{Journal: j, RunID: "r"}}); !errors.Is(err, runner.ErrUnbuiltGraph) {
		t.Errorf("RunNode of an unbuilt graph: %v", err)
	}
	built, err := graph.Build(g, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := runner.Run(context.Background(), built, runner.Options{Journal: j}); err != nil || res.Status != journal.RunCompleted {
		t.Errorf("the built graph: %v", err)
	}
}
