package runner

import (
	"context"
	"errors"
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
	t.Parallel()
	cpus.Take(t)
	const nodes, perWindow, window = 30, 10, 2 * time.Second
	free := simtest.Start(t, sim.Config{Seed: 7, Tokens: 30})
	want, _ := runOwn(t, wideGraph(t, free.BaseURL(), nodes, ""), Options{Parallel: nodes})

	srv := simtest.Start(t, sim.Config{Seed: 7, Tokens: 30,
		Limits: &sim.Limits{RequestsPerWindow: perWindow, TokensPerWindow: 1_000_000, Window: window}})
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
	t.Parallel()
	cpus.Take(t)
	const nodes = 30
	srv := simtest.Start(t, sim.Config{Seed: 7, Tokens: 30,
		Limits: &sim.Limits{RequestsPerWindow: 10, TokensPerWindow: 1_000_000, Window: 2 * time.Second}})
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
	t.Parallel()
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
	// The account says the park was waiting for quota, not time lost: at
	// least the Retry-After, at most what the wall clock took.
	run, err := ledger.Load(context.Background(), j, res.RunID, ledger.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	na := ledger.AccountOf(run, nil).Nodes[0]
	if na.QuotaWaitMS < 1900 || na.QuotaWaitMS > took.Milliseconds() || na.TimeLostMS > 100 {
		t.Errorf("quota wait %d ms, lost %d ms; the park waited Retry-After 2 s of a %s run", na.QuotaWaitMS, na.TimeLostMS, took)
	}
}

// failoverGraph is n chat nodes on provider primary (at down) with fallback
// backup (at up); node n00 is side_effects: unsafe, the others get
// nodeExtra. Its nodes set no model: each provider's own is used.
func failoverGraph(t *testing.T, down, up string, n int, nodeExtra string) *Graph {
	return failoverGraphModel(t, down, up, "gone-model", n, nodeExtra)
}

// fallbackAlone is what the nodes of failoverGraph answer on up, the
// fallback's server, with its model: what failover must produce.
func fallbackAlone(t *testing.T, up string, n int) *Result {
	res, _ := runOwn(t, failoverGraphModel(t, up, up, "sim", n, ""), Options{Parallel: n})
	return res
}

func failoverGraphModel(t *testing.T, down, up, model string, n int, nodeExtra string) *Graph {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `name: failover
profile: ci
providers:
  primary:
    kind: openai
    base_url: %s
    model: %s
    fallback: [backup]
  backup:
    kind: openai
    base_url: %s
    model: sim
    continuation: prefix
nodes:
`, down, model, up)
	for i := range n {
		fmt.Fprintf(&b, "  - id: n%02d\n    provider: primary\n    prompt: write about %d\n", i, i)
		if i == 0 {
			b.WriteString("    side_effects: unsafe\n")
		} else {
			b.WriteString(nodeExtra)
		}
	}
	return parseTestGraph(t, b.String())
}

// The failover acceptance: a 20-node graph whose provider's simulator is
// down completes on its fallback, each node with what the fallback alone
// would have answered, each journaled as failed over and named so in its
// verdict; the unsafe node does not move.
func TestFailoverToTheFallbackProvider(t *testing.T) {
	const nodes = 20
	up := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	want := fallbackAlone(t, up.BaseURL(), nodes)
	down := simtest.Start(t, sim.Config{Seed: 3})
	if err := down.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		down string
	}{
		{"refused", down.BaseURL()},
		// A provider that answers 404 for the model: withdrawn.
		{"model not found", simtest.Start(t, sim.Config{Seed: 3, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: sim.FaultStatus, Status: 404}}}).BaseURL()},
	} {
		t.Run(c.name, func(t *testing.T) {
			served := up.Stats().Requests[sim.EndpointChat]
			res, j := runOwn(t, failoverGraph(t, c.down, up.BaseURL(), nodes, ""), Options{Parallel: nodes})
			run, err := ledger.Load(context.Background(), j, res.RunID, ledger.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a := ledger.AccountOf(run, nil)
			for i, n := range res.Nodes {
				if n.ID == "n00" { // unsafe: never moves
					if n.State != journal.NodeFailed || has(codes(t, j, res.RunID, n.ID), diagnostics.FailedOver.ID) {
						t.Errorf("unsafe %s: %s, codes %v; want failed where it was", n.ID, n.State, codes(t, j, res.RunID, n.ID))
					}
					continue
				}
				if n.State != journal.NodeCompleted || n.Provider != "backup" {
					t.Errorf("%s: %s on %q (%v)", n.ID, n.State, n.Provider, n.Err)
					continue
				}
				if n.Output != want.Nodes[i].Output {
					t.Errorf("%s: output %q, want the fallback's own %q", n.ID, head(n.Output), head(want.Nodes[i].Output))
				}
				if !has(codes(t, j, res.RunID, n.ID), diagnostics.FailedOver.ID) {
					t.Errorf("%s: codes %v lack failed_over", n.ID, codes(t, j, res.RunID, n.ID))
				}
				if v := a.Nodes[i].Verdict.Text; !strings.Contains(v, "completed on fallback backup") {
					t.Errorf("%s: verdict %q does not name the fallback", n.ID, v)
				}
			}
			if got := up.Stats().Requests[sim.EndpointChat] - served; got != nodes-1 {
				t.Errorf("the fallback served %d requests, want one per safe node (%d)", got, nodes-1)
			}
		})
	}
}

// A node that allows it (fallback_continue) hands its partial answer to a
// fallback that can continue it: what was delivered is not generated
// again. Both providers serve the same model here (another host of it), so
// the answer is byte for byte the one the fallback alone gives.
func TestFailoverContinuesThePartialAnswer(t *testing.T) {
	up := simtest.Start(t, sim.Config{Seed: 3, Tokens: 200})
	want := fallbackAlone(t, up.BaseURL(), 2)
	// The primary cuts every stream after 50 events and cannot continue:
	// its retry budget runs out.
	flaky := simtest.Start(t, sim.Config{Seed: 3, Tokens: 200, Continuation: []string{"none"},
		Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: sim.FaultClose, AfterEvents: 50}}})
	before := up.Stats()
	res, j := runOwn(t, failoverGraphModel(t, flaky.BaseURL(), up.BaseURL(), "sim", 2, "    fallback_continue: true\n"), Options{})
	n := res.Nodes[1]
	if n.State != journal.NodeCompleted || n.Provider != "backup" || n.Output != want.Nodes[1].Output {
		t.Fatalf("node %s on %q: %q, want %q", n.State, n.Provider, head(n.Output), head(want.Nodes[1].Output))
	}
	after := up.Stats()
	if after.ContinuedRequests-before.ContinuedRequests != 1 {
		t.Errorf("the fallback continued %d requests, want 1", after.ContinuedRequests-before.ContinuedRequests)
	}
	if gen := after.Nodes["n01"].TokensGenerated - before.Nodes["n01"].TokensGenerated; gen >= 200 {
		t.Errorf("the fallback generated %d tokens of 200: the delivered part again", gen)
	}
	recs := diagRecs(t, j, res.RunID, "n01")
	for _, r := range recs {
		if r.Code == diagnostics.FailedOver.ID && r.Attrs["continued_from"] == nil {
			t.Errorf("failed_over record %v does not say where it continued from", r.Attrs)
		}
	}
	// The journal rebuilds the whole answer from the fallback's attempt.
	atts, _ := j.Attempts(context.Background(), res.RunID, "n01")
	last := atts[len(atts)-1]
	if out, err := j.RebuildOutput(context.Background(), res.RunID, "n01", last.N); err != nil || out != n.Output {
		t.Errorf("rebuilt %q (%v), want the output", head(out), err)
	}
	if last.Provider != "backup" {
		t.Errorf("last attempt on %q, want backup", last.Provider)
	}
}

// A node interrupted on the fallback it moved to is resumed there: the
// journal says where its attempt ran, and its own provider is not asked
// again (it stays down).
func TestResumeGoesOnOnTheFallback(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	up := simtest.Start(t, sim.Config{Seed: 3, Tokens: 200, TokensPerSecond: 400})
	want := fallbackAlone(t, up.BaseURL(), 2)
	down := simtest.Start(t, sim.Config{Seed: 3})
	if err := down.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	g := failoverGraphModel(t, down.BaseURL(), up.BaseURL(), "sim", 2, "")
	j := openJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, g, Options{Journal: j, OnProgress: func(p Progress) {
		if p.Node == "n01" && p.Bytes > 100 { // streaming on the fallback
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want it interrupted", err)
	}
	if n := res.Nodes[1]; n.State != journal.NodeCanceled {
		t.Fatalf("n01 %s, want interrupted on the fallback", n.State)
	}
	before := len(codes(t, j, res.RunID, "n01"))
	res, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	n := res.Nodes[1]
	if n.State != journal.NodeCompleted || n.Output != want.Nodes[1].Output {
		t.Fatalf("resumed n01 %s: %q, want %q", n.State, head(n.Output), head(want.Nodes[1].Output))
	}
	if after := codes(t, j, res.RunID, "n01")[before:]; has(after, diagnostics.FailedOver.ID) {
		t.Errorf("the resume failed over again (%v): it went back to the node's own provider", after)
	}
	atts, _ := j.Attempts(context.Background(), res.RunID, "n01")
	if last := atts[len(atts)-1]; last.Provider != "backup" {
		t.Errorf("the resumed attempt ran on %q, want backup", last.Provider)
	}
}

// Issue 41: a failover's figures are exact. The primary delivers part of an
// answer, then is down (its last attempts are retries that never connect);
// the node moves to the fallback, which continues the best journaled
// partial answer, not the last attempt's empty one. Each provider's tokens
// are what its simulator generated, nothing is counted twice or thrown
// away, and the verdict names the provider that completed it and what moved
// it.
func TestFailoverFiguresAreExact(t *testing.T) {
	up := simtest.Start(t, sim.Config{Seed: 3, Tokens: 200})
	down := simtest.Start(t, sim.Config{Seed: 3, Tokens: 200, Continuation: []string{"none"},
		Faults: []sim.Fault{
			{Node: "n01", Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 60},
			{Node: "n01", Endpoint: sim.EndpointChat, Requests: []int{2}, Kind: sim.FaultOutage, Duration: 30 * time.Second},
		}})
	before := up.Stats()
	res, j := runOwn(t, failoverGraphModel(t, down.BaseURL(), up.BaseURL(), "sim", 2, "    fallback_continue: true\n"), Options{})
	n := res.Nodes[1]
	if n.State != journal.NodeCompleted || n.Provider != "backup" {
		t.Fatalf("node %s on %q", n.State, n.Provider)
	}
	recs := diagRecs(t, j, res.RunID, "n01")
	moved := false
	for _, r := range recs {
		if r.Code == diagnostics.FailedOver.ID {
			moved = true
			if r.Attrs["continued_from"] == nil || r.Attrs["continued_attempt"] != float64(1) {
				t.Errorf("failed_over %v: want it to continue attempt 1's answer", r.Attrs)
			}
		}
	}
	if !moved {
		t.Fatal("the node did not fail over")
	}
	run, err := ledger.Load(context.Background(), j, res.RunID, ledger.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var na ledger.NodeAccount
	for _, a := range ledger.AccountOf(run, nil).Nodes {
		if a.ID == "n01" {
			na = a
		}
	}
	fromUp := int(up.Stats().Nodes["n01"].TokensGenerated - before.Nodes["n01"].TokensGenerated)
	fromDown := int(down.Stats().Nodes["n01"].TokensGenerated)
	tok := na.Tokens
	t.Logf("generated by %v; the simulators: primary %d, backup %d; %+v; %s", na.GeneratedBy, fromDown, fromUp, tok, na.Verdict)
	if na.GeneratedBy["backup"] != fromUp || na.GeneratedBy["primary"] > fromDown || na.GeneratedBy["primary"] < 55 {
		t.Errorf("generated by %v; the backup simulator generated %d, the primary %d (some in flight when it was cut)", na.GeneratedBy, fromUp, fromDown)
	}
	if tok.Generated != na.GeneratedBy["backup"]+na.GeneratedBy["primary"] || tok.Regenerated != 0 || tok.Needed != tok.Generated ||
		tok.Preserved != na.GeneratedBy["primary"] {
		t.Errorf("tokens %+v: want the primary's part preserved and needed, nothing regenerated", tok)
	}
	if fromUp >= 200 {
		t.Errorf("the fallback generated %d tokens: the delivered part again", fromUp)
	}
	for _, says := range []string{"completed on fallback backup", "moved by connect_failed", "backup generated", "primary generated"} {
		if !strings.Contains(na.Verdict.Text, says) {
			t.Errorf("verdict %q does not say %q", na.Verdict, says)
		}
	}
}

// Issue 42: an answer a fallback gave is found by the fallback's key, never
// by the primary's: after a run whose node moved to its fallback, a healthy
// run of the same graph is answered by the primary, not from the cache; a
// third run reuses the primary's answer.
func TestFailoverAnswerNeverServesThePrimary(t *testing.T) {
	up := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	// The primary answers 404 (a withdrawn model) to its first request only.
	primary := simtest.Start(t, sim.Config{Seed: 4, Tokens: 40, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultStatus, Status: 404}}})
	g := parseTestGraph(t, fmt.Sprintf("name: f\nprofile: ci\ncache: true\nproviders:\n  primary: {kind: openai, base_url: %s, model: sim, fallback: [backup]}\n"+
		"  backup: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, provider: primary, prompt: say something}\n", primary.BaseURL(), up.BaseURL()))
	j := openJournal(t)
	first := runWith(t, g, Options{Journal: j})
	if n := first.Nodes[0]; n.State != journal.NodeCompleted || n.Provider != "backup" {
		t.Fatalf("first run: %s on %q (%v)", n.State, n.Provider, n.Err)
	}
	second := runWith(t, g, Options{Journal: j})
	if n := second.Nodes[0]; n.State != journal.NodeCompleted || n.Provider != "" || n.FromCache != "" {
		t.Fatalf("second run: %s, provider %q, from cache %q: want the primary's own answer", n.State, n.Provider, n.FromCache)
	}
	if got := primary.Stats().Requests[sim.EndpointChat]; got != 2 {
		t.Errorf("the primary served %d requests, want 2 (the 404, then the second run)", got)
	}
	third := runWith(t, g, Options{Journal: j})
	if n := third.Nodes[0]; n.FromCache != second.RunID+"/a" || n.Output != second.Nodes[0].Output {
		t.Errorf("third run: from cache %q, want the second run's answer", n.FromCache)
	}
}
