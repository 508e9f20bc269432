package temporal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// benchGraph is the fleet graph on fast simulators: a node costs little
// besides the path that runs it, so the ratio shows what Temporal adds per
// node (workflow tasks, activity scheduling, heartbeats, history).
func benchGraph(tb testing.TB, dir string) *runner.Graph {
	cfg := sim.Config{Seed: 3, Tokens: 200, TokensPerSecond: 50000}
	chat, resp := simtest.Start(tb, cfg), simtest.Start(tb, cfg)
	src := fmt.Sprintf(`name: bench
profile: ci
providers:
  chat: {kind: openai, base_url: %s, model: sim}
  resp: {kind: responses, base_url: %s, model: sim}
nodes:
  - {id: plan, provider: chat, prompt: plan}
  - {id: reason, provider: resp, needs: [plan], prompt: 'reason {{ output "plan" }}'}
  - {id: critique, provider: chat, needs: [plan], prompt: 'critique {{ output "plan" }}'}
  - {id: report, provider: chat, needs: [reason, critique], prompt: 'report {{ output "reason" }} {{ output "critique" }}'}
`, chat.BaseURL(), resp.BaseURL())
	return loadGraph(tb, dir, "bench.yaml", src)
}

// BenchmarkTemporalVsLocal runs the same 4-node graph locally (runner.Run)
// and on Temporal (a workflow on the shared dev server, an in-process
// worker), checks that both give the same outputs, and reports the time per
// node of each path and their ratio.
func BenchmarkTemporalVsLocal(b *testing.B) {
	dir := b.TempDir()
	g := benchGraph(b, dir)
	ctx := context.Background()
	lj := testkit.OpenJournal(b, filepath.Join(dir, "local.db"))
	defer lj.Close()
	wj := testkit.OpenJournal(b, filepath.Join(dir, "worker.db"))
	defer wj.Close()
	c := dialDev(b)
	queue := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	w := ntemporal.NewWorker(c, queue, &ntemporal.Activities{Journal: wj, Identity: "bench"}, worker.Options{})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	prof, err := profile.Set(profile.Builtins()).Get("ci")
	if err != nil {
		b.Fatal(err)
	}
	nodes := float64(len(g.Nodes))
	var local, remote time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		lres, err := runner.Run(ctx, g, runner.Options{Journal: lj})
		if err != nil || lres.Status != journal.RunCompleted {
			b.Fatalf("local: %v %v", err, lres)
		}
		t1 := time.Now()
		in := ntemporal.RunInput{RunID: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), GraphPath: g.Path,
			GraphText: string(g.Source), Profile: prof, Parallel: 4}
		run, err := ntemporal.Submit(ctx, c, queue, in)
		if err != nil {
			b.Fatal(err)
		}
		var tres ntemporal.RunResult
		if err := run.Get(ctx, &tres); err != nil || tres.Status != string(journal.RunCompleted) {
			b.Fatalf("temporal: %v %+v", err, tres)
		}
		if err := ntemporal.Outcomes(ctx, c, &tres); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		local += t1.Sub(t0)
		remote += t2.Sub(t1)
		for k, n := range lres.Nodes {
			if tres.Nodes[k].Output != n.Output {
				b.Fatalf("node %s: Temporal output differs from the local one", n.ID)
			}
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) / nodes }
	b.ReportMetric(per(local), "local-ms/node")
	b.ReportMetric(per(remote), "temporal-ms/node")
	b.ReportMetric(per(remote-local), "overhead-ms/node")
	b.ReportMetric(float64(remote)/float64(local), "temporal/local")
}

// The same graph gives the same outputs run locally and on Temporal, with
// an in-process worker (the kill -9 test covers worker processes).
func TestSameOutputsLocallyAndOnTemporal(t *testing.T) {
	dir := t.TempDir()
	g := benchGraph(t, dir)
	ctx := context.Background()
	lj := testkit.OpenJournal(t, filepath.Join(dir, "local.db"))
	defer lj.Close()
	lres, err := runner.Run(ctx, g, runner.Options{Journal: lj})
	if err != nil || lres.Status != journal.RunCompleted {
		t.Fatalf("local: %v %v", err, lres)
	}
	wj := testkit.OpenJournal(t, filepath.Join(dir, "worker.db"))
	defer wj.Close()
	c := dialDev(t)
	queue := fmt.Sprintf("same-%d", time.Now().UnixNano())
	w := ntemporal.NewWorker(c, queue, &ntemporal.Activities{Journal: wj, Identity: "same"}, worker.Options{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	prof, err := profile.Set(profile.Builtins()).Get("ci")
	if err != nil {
		t.Fatal(err)
	}
	in := ntemporal.RunInput{RunID: fmt.Sprintf("same-%d", time.Now().UnixNano()), GraphPath: g.Path,
		GraphText: string(g.Source), Profile: prof}
	if _, err := ntemporal.Submit(ctx, c, queue, in); err != nil {
		t.Fatal(err)
	}
	// Followed as `noderun run --temporal` follows it: each node's states,
	// typed, ending once, done.
	var reports []runner.Progress
	tres, err := ntemporal.Follow(ctx, c, in.RunID, 20*time.Millisecond, func(p runner.Progress) { reports = append(reports, p) })
	if err != nil || tres.Status != string(journal.RunCompleted) {
		t.Fatalf("temporal: %v %+v", err, tres)
	}
	for k, n := range lres.Nodes {
		var finals []runner.Progress
		for _, p := range reports {
			if p.Node == n.ID && p.State.Final() {
				finals = append(finals, p)
			}
		}
		if len(finals) != 1 || finals[0].State != runner.ProgressDone || finals[0].Bytes != len(tres.Nodes[k].Output) {
			t.Errorf("node %s ended as %+v, want once done with %d bytes", n.ID, finals, len(tres.Nodes[k].Output))
		}
	}
	for k, n := range lres.Nodes {
		if tres.Nodes[k].Node != n.ID || tres.Nodes[k].Output != n.Output || n.Output == "" {
			t.Fatalf("node %s: Temporal output differs from the local one (%d vs %d bytes)", n.ID, len(tres.Nodes[k].Output), len(n.Output))
		}
		if tres.Nodes[k].Worker != "same" || tres.Nodes[k].TemporalAttempt != 1 {
			t.Fatalf("node %s: worker %q, activity attempt %d", n.ID, tres.Nodes[k].Worker, tres.Nodes[k].TemporalAttempt)
		}
	}
	// The worker journaled the run's nodes for inspection.
	nodes, err := wj.Nodes(ctx, in.RunID)
	if err != nil || len(nodes) != len(g.Nodes) {
		t.Fatalf("worker journal: %d nodes, %v", len(nodes), err)
	}
}
