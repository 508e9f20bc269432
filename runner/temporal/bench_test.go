package temporal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
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
	c := dialDev(b)
	queue := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	startWorker(b, c, queue, filepath.Join(dir, "worker.db"), &ntemporal.Activities{Identity: "bench"})
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
		in := ciInput(b, "bench", g)
		in.Parallel = 4
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
//
// Packed, reason and critique run in one activity (PackInput): the same
// outputs, progress and journal. The pack's result has room for one of the
// two outputs (PackBytes): the other reaches the workflow as SignalSettled.
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
	c := dialDev(t)
	for _, pack := range []int{1, 2} {
		t.Run(fmt.Sprintf("pack=%d", pack), func(t *testing.T) { sameOnTemporal(t, c, g, lres, pack) })
	}
}

func sameOnTemporal(t *testing.T, c client.Client, g *runner.Graph, lres *runner.Result, pack int) {
	ctx := context.Background()
	queue := fmt.Sprintf("same-%d", time.Now().UnixNano())
	acts := &ntemporal.Activities{Identity: "same"}
	startWorker(t, c, queue, filepath.Join(t.TempDir(), "worker.db"), acts)
	in := ciInput(t, "same", g)
	in.Pack = pack
	if pack > 1 {
		in.PackBytes = 1500 // reason's or critique's output (1,157 and 1,208 bytes), not both
	}
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
	nodes, err := acts.Journal.Nodes(ctx, in.RunID)
	if err != nil || len(nodes) != len(g.Nodes) {
		t.Fatalf("worker journal: %d nodes, %v", len(nodes), err)
	}
	// What Temporal ran, by its own history: activities and signals.
	var acts1, packs, signals int
	it := c.GetWorkflowHistory(ctx, in.RunID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch a := ev.GetActivityTaskScheduledEventAttributes(); {
		case a != nil && a.GetActivityType().GetName() == ntemporal.PackActivityName:
			packs++
		case a != nil:
			acts1++
		case ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == ntemporal.SignalSettled:
			signals++
		}
	}
	want := [3]int{4, 0, 0} // nodes alone, packs, outcomes by signal
	if pack > 1 {
		want = [3]int{2, 1, 1}
	}
	if got := [3]int{acts1, packs, signals}; got != want {
		t.Errorf("history: %d nodes alone, %d packs, %d outcomes by signal; want %v", acts1, packs, signals, want)
	}
}

// BenchmarkHandover measures how long a node goes unrun when the worker
// streaming it dies: two `noderun worker` processes, a run of one Responses
// node streaming for ~20 s; the worker streaming it is killed -9 and the
// clock runs until the node's next attempt has started on the other worker
// (Temporal shows it started there). It reports that time (handover-s: the
// default heartbeat timeout, 10 s, and Temporal's first retry), checks it
// against the history (the started event of the attempt that completed),
// and reports the history's figure from the lost worker's last heartbeat.
func BenchmarkHandover(b *testing.B) {
	hostPort := devServer(b)
	bin := noderun.Path(b)
	c := dialDev(b)
	var wall, hist, sinceBeat time.Duration
	b.ResetTimer() // the CLI's build and the server's start are not the hand-over
	for i := 0; i < b.N; i++ {
		w, h, s := handoverOnce(b, bin, hostPort, c)
		wall, hist, sinceBeat = wall+w, hist+h, sinceBeat+s
	}
	n := float64(b.N)
	b.ReportMetric(wall.Seconds()/n, "handover-s")
	b.ReportMetric(hist.Seconds()/n, "history-handover-s")
	b.ReportMetric(sinceBeat.Seconds()/n, "since-last-beat-s")
}

// handoverOnce runs one kill -9 hand-over and returns the time from the kill
// to the next attempt's start by the wall clock and by the history (the
// server is on this machine: one clock), and from the lost worker's last
// heartbeat to that start.
func handoverOnce(b *testing.B, bin, hostPort string, c client.Client) (wall, hist, sinceBeat time.Duration) {
	b.StopTimer()
	dir := b.TempDir()
	// 20 s of streaming: the response is still going when the node's next
	// attempt starts (~11 s after the kill), so that attempt re-attaches and
	// runs for a while, long enough for the poll to see it start (a response
	// completed meanwhile is taken from its status in a few milliseconds).
	resp := simtest.Start(b, sim.Config{Seed: 5, Tokens: 4000, TokensPerSecond: 200})
	graph := writeGraph(b, dir, "handover.yaml", fmt.Sprintf("name: handover\nprofile: ci\nproviders:\n"+
		"  resp: {kind: responses, base_url: %s, model: sim}\nnodes:\n  - {id: reason, provider: resp, prompt: reason at length}\n", resp.BaseURL()))
	queue := fmt.Sprintf("handover-%d", time.Now().UnixNano())
	workers, run, runID := fleet(b, bin, hostPort, queue, dir, []string{"a", "b"}, graph)
	victim := waitFor(b, 60*time.Second, "a heartbeat of node reason with its response id", func() (string, bool) {
		pend, err := ntemporal.PendingNodes(context.Background(), c, runID)
		if err != nil {
			return "", false
		}
		for _, p := range pend {
			if p.Node == "reason" && p.Beat.Ref != "" && p.Worker != "" {
				return p.Worker, true
			}
		}
		return "", false
	})
	time.Sleep(500 * time.Millisecond) // streaming
	survivor := "a"
	if victim == "a" {
		survivor = "b"
	}
	b.StartTimer()
	if err := workers[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	<-workers[victim].done
	var seen string // what the poll saw last, for a failure
	deadline := time.Now().Add(60 * time.Second)
	for {
		pend, err := ntemporal.PendingNodes(context.Background(), c, runID)
		seen = fmt.Sprintf("%+v %v", pend, err)
		started := false
		for _, p := range pend {
			started = started || p.Node == "reason" && p.Attempt >= 2 && p.Worker == survivor
		}
		if started {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("node reason's next attempt did not start on worker %s within 60 s; pending: %s\n%s", survivor, seen, workers[survivor].out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	wall = time.Since(killed)
	b.StopTimer()
	run.wait(b, 120*time.Second, "did not finish")
	if run.err != nil {
		b.Fatalf("run --temporal: %v\n%s", run.err, run.out.String())
	}
	h, err := ntemporal.ReadHistory(context.Background(), c, runID)
	if err != nil {
		b.Fatal(err)
	}
	if len(h.Activities) != 1 {
		b.Fatalf("%d activities in the history, want 1", len(h.Activities))
	}
	a := h.Activities[0]
	if a.Attempt != 2 || a.Worker != survivor || a.LostWorker != victim || a.LastBeat.IsZero() {
		b.Fatalf("the history shows attempt %d on %q, lost worker %q (last heartbeat %s); want 2 on %s, lost %s", a.Attempt, a.Worker, a.LostWorker, a.LastBeat, survivor, victim)
	}
	hist, sinceBeat = a.Started.Sub(killed), a.Started.Sub(a.LastBeat)
	// The poll sees the start at most a poll (and a describe call) late.
	if d := wall - hist; d < -100*time.Millisecond || d > time.Second {
		b.Fatalf("hand-over %s by the wall clock, %s by the history", wall, hist)
	}
	b.Logf("worker %s killed -9; node reason started on %s %s later (history: %s; %s after %s's last heartbeat)",
		victim, survivor, wall.Round(10*time.Millisecond), hist.Round(10*time.Millisecond), sinceBeat.Round(10*time.Millisecond), victim)
	for _, w := range workers {
		if w.cmd.ProcessState == nil {
			testkit.Terminate(w.cmd, w.done, 15*time.Second)
		}
	}
	return wall, hist, sinceBeat
}
