package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/ledger"
)

// wideGraph is a graph of n independent chat nodes against baseURL, in
// profile ci, with extra provider lines (YAML, indented as its fields).
func wideGraph(t *testing.T, baseURL string, n int, extra string) *Graph {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: wide\nprofile: ci\nproviders:\n  p:\n    kind: openai\n    base_url: %s\n    model: sim\n%snodes:\n", baseURL, extra)
	for i := range n {
		fmt.Fprintf(&b, "  - id: n%02d\n    prompt: write about %d\n", i, i)
	}
	return parseTestGraph(t, b.String())
}

// runOwn runs g with opts and a journal of its own.
func runOwn(t *testing.T, g *Graph, opts Options) (*Result, *journal.Journal) {
	t.Helper()
	opts.Journal = openJournal(t)
	return runWith(t, g, opts), opts.Journal
}

// The quota acceptance, small: a graph three times wider than the
// simulator's request limit lets through at once completes with every
// output as on an unlimited server, the simulator refuses nothing, and it
// takes at least as long as the limit allows; the journal counts the time
// spent waiting for quota apart from time lost.
func TestPacingKeepsAWideGraphWithinItsLimits(t *testing.T) {
	const nodes, perWindow, window = 30, 10, 2 * time.Second
	free := simtest.Start(t, sim.Config{Seed: 7, Tokens: 30})
	want, _ := runOwn(t, wideGraph(t, free.BaseURL(), nodes, ""), Options{Parallel: nodes})

	srv := simtest.Start(t, sim.Config{Seed: 7, Tokens: 30,
		Limits: &sim.Limits{RequestsPerMinute: perWindow, TokensPerMinute: 1_000_000, Window: window}})
	start := time.Now()
	res, j := runOwn(t, wideGraph(t, srv.BaseURL(), nodes, ""), Options{Parallel: nodes})
	wall := time.Since(start)
	if res.Status != journal.RunCompleted {
		t.Fatalf("run %s: %+v", res.Status, res.Nodes)
	}
	for id, out := range outputs(want) {
		if got := outputs(res)[id]; got != out {
			t.Errorf("%s: output %q, want %q as unlimited", id, head(got), head(out))
		}
	}
	st := srv.Stats()
	if st.RateLimited != 0 {
		t.Errorf("the simulator refused %d requests: pacing sent past the limit", st.RateLimited)
	}
	if st.Requests[sim.EndpointChat] != nodes {
		t.Errorf("%d requests for %d nodes", st.Requests[sim.EndpointChat], nodes)
	}
	// 10 at once, then one every 200 ms: the last cannot leave before 4 s.
	floor := time.Duration(nodes-perWindow) * window / perWindow
	if wall < floor-100*time.Millisecond {
		t.Errorf("run took %s, less than the %s the limit allows", wall, floor)
	}
	run, err := ledger.Load(context.Background(), j, res.RunID, ledger.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := ledger.AccountOf(run, nil)
	var longest int64
	for _, n := range a.Nodes {
		longest = max(longest, n.QuotaWaitMS)
		if n.UsefulMS+n.TimeLostMS+n.QuotaWaitMS != n.WallMS || n.WallMS > wall.Milliseconds() {
			t.Errorf("%s: useful %d + lost %d + quota %d != wall %d (the run took %s)", n.ID, n.UsefulMS, n.TimeLostMS, n.QuotaWaitMS, n.WallMS, wall)
		}
	}
	// The last node sent no sooner than the floor, and waited for quota
	// until then (less the moment the first answer took).
	if longest < (floor - 500*time.Millisecond).Milliseconds() {
		t.Errorf("the longest wait for quota is %d ms; the last node could not send before %s", longest, floor)
	}
	if a.Totals.TimeLostMS != 0 {
		t.Errorf("%d ms lost to faults in a run without any", a.Totals.TimeLostMS)
	}
	t.Logf("%d nodes in %s (floor %s); longest wait for quota %d ms", nodes, wall.Round(time.Millisecond), floor, longest)
}

// The same graph without pacing meets the limit: the simulator refuses
// requests, and each refusal costs its node a retry.
func TestWithoutPacingA429SpendsARetry(t *testing.T) {
	const nodes = 30
	srv := simtest.Start(t, sim.Config{Seed: 7, Tokens: 30,
		Limits: &sim.Limits{RequestsPerMinute: 10, TokensPerMinute: 1_000_000, Window: 2 * time.Second}})
	res, j := runOwn(t, wideGraph(t, srv.BaseURL(), nodes, ""), Options{Parallel: nodes, Quota: QuotaOptions{Off: true}})
	st := srv.Stats()
	if st.RateLimited == 0 {
		t.Fatal("no request was refused: the limit was not met")
	}
	retried := 0
	for _, n := range res.Nodes {
		if has(codes(t, j, res.RunID, n.ID), diagnostics.RetryStarted.ID) {
			retried++
		}
		if has(codes(t, j, res.RunID, n.ID), diagnostics.QuotaParked.ID) {
			t.Errorf("%s was parked with pacing off", n.ID)
		}
	}
	if retried == 0 {
		t.Errorf("%d refusals and no retry", st.RateLimited)
	}
	t.Logf("without pacing: %d refused, %d nodes retried, run %s", st.RateLimited, retried, res.Status)
}

// A 429 parks the node until its Retry-After and sends the same request
// again: no retry spent, one attempt, the undisturbed output.
func TestA429ParksTheNode(t *testing.T) {
	want := undisturbed(t, "essay")
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200, Faults: []sim.Fault{
		{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultStatus, Status: 429, RetryAfter: "2"}}})
	start := time.Now()
	res, j := runOwn(t, chatGraph(t, srv.BaseURL(), "essay"), Options{})
	took := time.Since(start)
	if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != want {
		t.Fatalf("node %s (%v)", n.State, n.Err)
	}
	if took < 1900*time.Millisecond {
		t.Errorf("sent again after %s, before Retry-After 2", took)
	}
	got := codes(t, j, res.RunID, "essay")
	if !has(got, diagnostics.RateLimitWait.ID, diagnostics.QuotaParked.ID) || has(got, diagnostics.RetryStarted.ID) {
		t.Errorf("codes %v: want rate_limit_wait and quota_parked, no retry_started", got)
	}
	atts, err := j.Attempts(context.Background(), res.RunID, "essay")
	if err != nil || len(atts) != 1 {
		t.Errorf("%d attempts (%v), want 1: a park is no new attempt", len(atts), err)
	}
	if n := srv.Stats().Requests[sim.EndpointChat]; n != 2 {
		t.Errorf("%d requests, want the refused one and its repeat", n)
	}
}
