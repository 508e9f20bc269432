package temporal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// A pack whose worker dies moves whole, but the worker that takes it over
// runs only the nodes that had not ended: a pack of a quick node (ended on
// the lost worker, its outcome in the pack's heartbeat) and a slow chat
// node (continued from the answer its heartbeat carried). The quick node
// is not asked of its provider again; both outputs are the undisturbed
// local run's.
func TestKill9PackRunsOnlyItsUnfinishedNodes(t *testing.T) {
	t.Parallel() // waits on heartbeats and processes, not the CPU: overlapped with the others
	bin := noderun.Path(t)
	hostPort := devServer(t)
	dir := t.TempDir()
	const quickTokens, slowTokens = 20, 300
	graph := func(name string, quick, slow *sim.Server) string {
		return writeGraph(t, dir, name, fmt.Sprintf(`name: pack
profile: ci
providers:
  q: {kind: openai, base_url: %s, model: sim}
  s: {kind: openai, base_url: %s, model: sim, continuation: prefix}
nodes:
  - {id: quick, provider: q, prompt: 'a short answer'}
  - {id: slow, provider: s, prompt: 'a long answer'}
`, quick.BaseURL(), slow.BaseURL()))
	}
	// The undisturbed outputs: the same seeds, not paced (the content does
	// not depend on the pace).
	local := graph("local.yaml", simtest.Start(t, sim.Config{Seed: 29, Tokens: quickTokens}), simtest.Start(t, sim.Config{Seed: 29, Tokens: slowTokens}))
	g, err := runner.LoadGraph(local)
	if err != nil {
		t.Fatal(err)
	}
	lj := testkit.OpenJournal(t, filepath.Join(dir, "local.db"))
	lres, err := runner.Run(context.Background(), g, runner.Options{Journal: lj})
	if err != nil || lres.Status != journal.RunCompleted {
		t.Fatalf("local: %v %+v", err, lres)
	}

	quick := simtest.Start(t, sim.Config{Seed: 29, Tokens: quickTokens})
	slow := simtest.Start(t, sim.Config{Seed: 29, Tokens: slowTokens, TokensPerSecond: 30})
	queue := fmt.Sprintf("pack-%d", time.Now().UnixNano())
	workers, run, runID := fleet(t, bin, hostPort, queue, dir, []string{"w1", "w2"}, "--pack", "2", "--json", graph("pack.yaml", quick, slow))
	c := dialDev(t)
	// Kill the pack's worker once its heartbeat holds the quick node's
	// outcome (it is no longer running) and a part of the slow answer.
	victim := waitFor(t, 60*time.Second, "a pack heartbeat with quick ended and slow streaming", func() (string, bool) {
		pend, err := ntemporal.PendingNodes(context.Background(), c, runID)
		if err != nil || len(pend) != 1 || pend[0].Node != "slow" || len(pend[0].Beat.Output) < 100 {
			return "", false
		}
		return pend[0].Worker, true
	})
	if err := workers[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-workers[victim].done
	run.wait(t, 90*time.Second, "did not finish")
	if run.err != nil {
		t.Fatalf("run --temporal: %v\n%s", run.err, tail(run.out.String()))
	}
	got := jsonOutputs(t, run.stdout.String())
	for _, n := range lres.Nodes {
		if got[n.ID] != n.Output || n.Output == "" {
			t.Fatalf("node %s: output differs from the undisturbed local run (%d vs %d bytes)", n.ID, len(got[n.ID]), len(n.Output))
		}
	}
	// The provider's own counts: the quick node was asked once; the slow
	// one was continued (a second request), not restarted from scratch.
	q, s := quick.Stats().Nodes["quick"], slow.Stats().Nodes["slow"]
	if q.Requests[sim.EndpointChat] != 1 || q.TokensGenerated != quickTokens {
		t.Errorf("quick: %d requests, %d tokens generated; want 1 and %d (its outcome came from the lost worker's heartbeat)",
			q.Requests[sim.EndpointChat], q.TokensGenerated, quickTokens)
	}
	if s.Requests[sim.EndpointChat] != 2 || s.TokensGenerated >= 2*slowTokens {
		t.Errorf("slow: %d requests, %d tokens generated; want a continuation (2 requests, under %d tokens)",
			s.Requests[sim.EndpointChat], s.TokensGenerated, 2*slowTokens)
	}
	// Temporal's history names who finished each: the quick node on the
	// lost worker (attempt 1), the slow one on the other (attempt 2).
	st, err := ntemporal.State(context.Background(), c, runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		onVictim := n.Worker == victim
		if n.Node == "quick" && (!onVictim || n.TemporalAttempt != 1) || n.Node == "slow" && (onVictim || n.Worker == "" || n.TemporalAttempt != 2) {
			t.Errorf("node %s finished by worker %q on activity attempt %d (the lost worker: %s)", n.Node, n.Worker, n.TemporalAttempt, victim)
		}
	}
	t.Logf("worker %s killed; quick: %d request; slow: %d requests, %d tokens for %d", victim, q.Requests[sim.EndpointChat],
		s.Requests[sim.EndpointChat], s.TokensGenerated, slowTokens)
}

// A packed node that a dependent waits for alone sends its outcome as it
// ends (PackInput.Early), so the dependent starts then, not when the
// pack's slowest node ends: in a pack of a quick node and a slow one, the
// quick node's dependent is scheduled before the pack completes, with the
// quick node's output. A dependent that also waits for the slow node waits
// for the pack, and the quick node's signal is the only one.
func TestPackedNodeStartsItsDependentWhenItEnds(t *testing.T) {
	dir := t.TempDir()
	const slowTokens = 60 // 2 s at 30 a second
	graph := func(name string, quick, slow *sim.Server) *runner.Graph {
		return loadGraph(t, dir, name, fmt.Sprintf(`name: early
profile: ci
providers:
  q: {kind: openai, base_url: %s, model: sim}
  s: {kind: openai, base_url: %s, model: sim}
nodes:
  - {id: quick, provider: q, prompt: 'a short answer'}
  - {id: slow, provider: s, prompt: 'a long answer'}
  - {id: next, provider: q, needs: [quick], prompt: 'go on from {{ output "quick" }}'}
  - {id: join, provider: q, needs: [quick, slow], prompt: 'join {{ output "quick" }} and {{ output "slow" }}'}
`, quick.BaseURL(), slow.BaseURL()))
	}
	lj := testkit.OpenJournal(t, filepath.Join(dir, "local.db"))
	lres, err := runner.Run(context.Background(), graph("local.yaml", simtest.Start(t, sim.Config{Seed: 29, Tokens: 20}),
		simtest.Start(t, sim.Config{Seed: 29, Tokens: slowTokens})), runner.Options{Journal: lj})
	if err != nil || lres.Status != journal.RunCompleted {
		t.Fatalf("local: %v %+v", err, lres)
	}

	g := graph("early.yaml", simtest.Start(t, sim.Config{Seed: 29, Tokens: 20}),
		simtest.Start(t, sim.Config{Seed: 29, Tokens: slowTokens, TokensPerSecond: 30}))
	c := dialDev(t)
	queue := fmt.Sprintf("early-%d", time.Now().UnixNano())
	startWorker(t, c, queue, filepath.Join(dir, "worker.db"), &ntemporal.Activities{Identity: "early"})
	in := ciInput(t, "early", g)
	in.Parallel, in.Pack = 4, 2 // quick and slow in one pack
	ctx := context.Background()
	if _, err := ntemporal.Submit(ctx, c, queue, in); err != nil {
		t.Fatal(err)
	}
	res, err := ntemporal.Follow(ctx, c, in.RunID, 50*time.Millisecond, nil)
	if err != nil || res.Status != string(journal.RunCompleted) {
		t.Fatalf("temporal: %v %+v", err, res)
	}
	for i, n := range lres.Nodes {
		if res.Nodes[i].Node != n.ID || res.Nodes[i].Output != n.Output || n.Output == "" {
			t.Fatalf("node %s: output differs from the local run's (%d vs %d bytes)", n.ID, len(res.Nodes[i].Output), len(n.Output))
		}
	}
	// The history's order: next scheduled before the pack completed, join
	// after; one outcome signalled (quick's).
	var packDone, nextScheduled, joinScheduled, signals int64
	scheduled := map[int64]string{} // event id → activity id
	it := c.GetWorkflowHistory(ctx, in.RunID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			id := ev.GetActivityTaskScheduledEventAttributes().GetActivityId()
			scheduled[ev.GetEventId()] = id
			switch id {
			case "next":
				nextScheduled = ev.GetEventId()
			case "join":
				joinScheduled = ev.GetEventId()
			}
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			if scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] == "quick+1" {
				packDone = ev.GetEventId()
			}
		case ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == ntemporal.SignalSettled:
			signals++
		}
	}
	if packDone == 0 || nextScheduled == 0 || joinScheduled == 0 {
		t.Fatalf("history: pack quick+1 completed at event %d, next scheduled at %d, join at %d; want all three (activities %v)",
			packDone, nextScheduled, joinScheduled, scheduled)
	}
	if nextScheduled > packDone {
		t.Errorf("next was scheduled at event %d, after its need's pack completed (%d): it waited for the slow node", nextScheduled, packDone)
	}
	if joinScheduled < packDone {
		t.Errorf("join was scheduled at event %d, before the pack with the slow node it needs completed (%d)", joinScheduled, packDone)
	}
	if signals != 1 {
		t.Errorf("%d outcomes signalled; want 1 (quick's: the one need a dependent waits for alone)", signals)
	}
}
