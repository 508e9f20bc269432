package temporal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner"
)

// What runner.RunNode does with a lost machine's cursor, per kind of node,
// on real simulators over sockets (no Temporal involved: the cursor is the
// one the first "machine" reported through its heartbeat hook).

func nodeGraph(t *testing.T, chatURL, respURL string) *runner.Graph {
	t.Helper()
	src := fmt.Sprintf(`name: nodes
profile: ci
providers:
  chat: {kind: openai, base_url: %s, model: sim}
  resp: {kind: responses, base_url: %s, model: sim}
nodes:
  - {id: r, provider: resp, prompt: reason at length}
  - {id: c, provider: chat, prompt: chat a while}
  - {id: u, provider: chat, prompt: deploy it, side_effects: unsafe}
`, chatURL, respURL)
	return loadGraph(t, t.TempDir(), "nodes.yaml", src)
}

func machine(t *testing.T) *journal.Journal {
	t.Helper()
	return testkit.TempJournal(t, "machine.db")
}

// lose runs node on a first machine until its cursor shows work under way
// (a response id, or output), then stops it, as a lost worker stops, and
// returns the last cursor it reported.
func lose(t *testing.T, g *runner.Graph, node string) runner.NodeCursor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last runner.NodeCursor
	_, err := runner.RunNode(ctx, g, node, runner.NodeOptions{
		Options: runner.Options{Journal: machine(t), RunID: "run-1"},
		Heartbeat: func(c runner.NodeCursor, step bool) {
			last = c
			if c.Bytes > 200 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if last.Bytes == 0 || last.Attempt != 1 {
		t.Fatalf("first machine's last cursor: %+v", last)
	}
	return last
}

// resumeOn picks node up on a second machine with an empty journal.
func resumeOn(t *testing.T, g *runner.Graph, node string, from runner.NodeCursor, force bool) (*runner.NodeResult, []journal.Event, runner.NodeCursor) {
	t.Helper()
	j := machine(t)
	var last runner.NodeCursor
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := runner.RunNode(ctx, g, node, runner.NodeOptions{
		Options: runner.Options{Journal: j, RunID: "run-1"}, From: &from, Force: force,
		Heartbeat: func(c runner.NodeCursor, _ bool) { last = c },
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := j.Events(context.Background(), "run-1", journal.EventFilter{Node: node, Kinds: []string{"diagnostic"}})
	if err != nil {
		t.Fatal(err)
	}
	return res, evs, last
}

func hasCode(evs []journal.Event, code string) bool {
	for _, ev := range evs {
		if ev.Code == code {
			return true
		}
	}
	return false
}

func TestRunNodeFromLostMachine(t *testing.T) {
	t.Parallel() // waits on heartbeats and processes, not the CPU: overlapped with the others
	cc := sim.Config{Seed: 9, Tokens: 400, TokensPerSecond: 1000}
	rc := sim.Config{Seed: 9, Tokens: 600, TokensPerSecond: 400}
	ref := func() map[string]string { // undisturbed outputs
		chat, resp := simtest.Start(t, cc), simtest.Start(t, sim.Config{Seed: 9, Tokens: 600, TokensPerSecond: 50000})
		g := nodeGraph(t, chat.BaseURL(), resp.BaseURL())
		out := map[string]string{}
		for _, id := range []string{"r", "c", "u"} {
			res, err := runner.RunNode(context.Background(), g, id, runner.NodeOptions{Options: runner.Options{Journal: machine(t), RunID: "ref"}})
			if err != nil || res.State != journal.NodeCompleted {
				t.Fatalf("reference %s: %v %+v", id, err, res)
			}
			out[id] = res.Output
		}
		return out
	}()

	t.Run("responses node re-attaches, regenerating nothing", func(t *testing.T) {
		resp := simtest.Start(t, rc)
		g := nodeGraph(t, "http://127.0.0.1:1/v1", resp.BaseURL())
		from := lose(t, g, "r")
		if from.Ref == "" {
			t.Fatalf("no response id in the cursor: %+v", from)
		}
		res, evs, last := resumeOn(t, g, "r", from, false)
		if res.State != journal.NodeCompleted || res.Output != ref["r"] {
			t.Fatalf("r: %s, %d bytes, want %d", res.State, len(res.Output), len(ref["r"]))
		}
		if !hasCode(evs, "NR210") {
			t.Fatal("no NR210 journaled")
		}
		if st := resp.Stats(); st.ResponsesCreated != 1 || st.TokensGenerated != int64(rc.Tokens) {
			t.Fatalf("sim: %d responses, %d tokens", st.ResponsesCreated, st.TokensGenerated)
		}
		if last.Attempt != 1 || last.Ref != from.Ref {
			t.Fatalf("the re-attach continues attempt 1 of %s: cursor %+v", from.Ref, last)
		}
	})
	t.Run("chat node is retried within its budget", func(t *testing.T) {
		chat := simtest.Start(t, cc)
		g := nodeGraph(t, chat.BaseURL(), "http://127.0.0.1:1/v1")
		from := lose(t, g, "c")
		res, evs, last := resumeOn(t, g, "c", from, false)
		if res.State != journal.NodeCompleted || res.Output != ref["c"] || !hasCode(evs, "NR210") {
			t.Fatalf("c: %s %q, NR210 %v", res.State, res.Reason, hasCode(evs, "NR210"))
		}
		if last.Attempt != 2 || last.RetriesUsed != 1 {
			t.Fatalf("the retry is attempt 2 and spends one retry: cursor %+v", last)
		}
	})
	t.Run("chat node with its budget spent needs attention", func(t *testing.T) {
		g := nodeGraph(t, "http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1")
		res, evs, _ := resumeOn(t, g, "c", runner.NodeCursor{Seq: -1, Attempt: 4, RetriesUsed: 3, Bytes: 10}, false)
		if res.State != journal.NodeAttention || !hasCode(evs, "NR903") {
			t.Fatalf("c: %s %q", res.State, res.Reason)
		}
	})
	t.Run("unsafe node is held, and replayed when forced", func(t *testing.T) {
		chat := simtest.Start(t, cc)
		g := nodeGraph(t, chat.BaseURL(), "http://127.0.0.1:1/v1")
		from := lose(t, g, "u")
		res, evs, _ := resumeOn(t, g, "u", from, false)
		if res.State != journal.NodeAttention || !hasCode(evs, "NR905") {
			t.Fatalf("u: %s %q", res.State, res.Reason)
		}
		res, _, _ = resumeOn(t, g, "u", from, true)
		if res.State != journal.NodeCompleted || res.Output != ref["u"] {
			t.Fatalf("forced u: %s %q", res.State, res.Reason)
		}
	})
}
