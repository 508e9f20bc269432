package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// A Codex node whose worker is lost after its thread started continues on
// another worker by resuming the thread, when the two share CODEX_HOME; on a
// worker with a CODEX_HOME of its own, the node fails saying so. Real Codex
// CLI against the simulator.
func TestRunNodeHarnessThreadFromLostWorker(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{TokensPerSecond: 200, Tokens: 400})
	rig := codexGraph(t, srv.BaseURL(), harnessProfile{reconnects: 3, deadline: 60 * time.Second}, "", "")

	// Worker A: lost once the thread is known (its heartbeat names it).
	ctx, cancel := context.WithCancel(context.Background())
	var lost NodeCursor
	res, err := RunNode(ctx, rig.g, "agent", NodeOptions{Options: Options{Journal: openJournal(t), RunID: "run-h"},
		Heartbeat: func(c NodeCursor, _ bool) {
			if c.Ref != "" && lost.Ref == "" {
				lost = c
				time.AfterFunc(300*time.Millisecond, cancel) // mid-turn, after the rollout is written
			}
		}})
	cancel()
	if err != nil || res.State != journal.NodeCanceled || lost.Ref == "" {
		t.Fatalf("worker A: %v, %+v, cursor %+v", err, res, lost)
	}

	t.Run("shared CODEX_HOME", func(t *testing.T) {
		j := openJournal(t)
		res, err := RunNode(context.Background(), rig.g, "agent", NodeOptions{Options: Options{Journal: j, RunID: "run-h"}, From: &lost})
		if err != nil || res.State != journal.NodeCompleted {
			t.Fatalf("worker B: %v, %+v", err, res)
		}
		if want := strings.Join(sim.Text("sim", codexContinuePrompt(t), 0, 400), ""); res.Output != want {
			t.Errorf("output %q, want the answer to the continue prompt %q", res.Output, want)
		}
		ds := diagRecs(t, j, "run-h", "agent")
		if len(withCode(ds, diagnostics.CrossWorkerResume)) != 1 || len(withCode(ds, diagnostics.ThreadResumed)) != 1 {
			t.Fatalf("want NR210 and NR303 once\n%s", dumpDiags(ds))
		}
		atts, err := j.Attempts(context.Background(), "run-h", "agent")
		if err != nil || len(atts) != 1 || atts[0].Mode != journal.ModeResume || atts[0].Ref != lost.Ref {
			t.Fatalf("attempts %+v %v, want one resume of thread %s", atts, err, lost.Ref)
		}
	})
	t.Run("CODEX_HOME of its own", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "other-home")
		if err := os.Mkdir(home, 0o755); err != nil {
			t.Fatal(err)
		}
		src := strings.Replace(string(rig.g.Source), rig.home, home, 1)
		if src == string(rig.g.Source) {
			t.Fatal("CODEX_HOME not found in the graph")
		}
		g := parseTestGraph(t, src)
		j := openJournal(t)
		res, err := RunNode(context.Background(), g, "agent", NodeOptions{Options: Options{Journal: j, RunID: "run-h"}, From: &lost})
		if err != nil {
			t.Fatal(err)
		}
		if res.State == journal.NodeCompleted {
			t.Fatalf("the thread was resumed without its rollout: %q", res.Output)
		}
		if !strings.Contains(res.Reason, "session store") || !strings.Contains(res.Reason, "CODEX_HOME") {
			t.Fatalf("reason does not name the session store: %s\n%s", res.Reason, dumpDiags(diagRecs(t, j, "run-h", "agent")))
		}
		codexLeftovers(t, home)
	})
}
