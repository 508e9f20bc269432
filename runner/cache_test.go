package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/ledger"
)

// keyOf is node id's cache key in graph src, for a rendered prompt.
func keyOf(t *testing.T, src, id, prompt string) string {
	t.Helper()
	g := parseTestGraph(t, src)
	c, err := newRunCache(g, &Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	n := g.Node(id)
	r := &runState{g: g, cache: c}
	return r.cacheKey(n, builtProvider{model: g.Providers[n.Provider].Model}, "", prompt)
}

// What changes a node's cache key, and what does not.
func TestCacheKey(t *testing.T) {
	const base = `name: k
profile: ci
providers:
  p: {kind: openai, base_url: http://h/v1, model: m1, api_key_env: K}
nodes:
  - {id: a, provider: p, prompt: hi}
`
	want := keyOf(t, base, "a", "hi")
	if !strings.HasPrefix(want, cacheKeyVersion+":") || len(want) != len(cacheKeyVersion)+1+64 {
		t.Fatalf("key %q: want %s: and a hex sha256", want, cacheKeyVersion)
	}
	edit := func(old, new string) string { return strings.Replace(base, old, new, 1) }
	for _, tc := range []struct {
		name, src, id, prompt string
		changes               bool
	}{
		{"the same", base, "a", "hi", false},
		{"the model", edit("model: m1", "model: m2"), "a", "hi", true},
		{"the node's model", edit("prompt: hi}", "prompt: hi, model: m2}"), "a", "hi", true},
		{"the base URL", edit("http://h/v1", "http://other/v1"), "a", "hi", true},
		{"the kind", edit("kind: openai", "kind: responses"), "a", "hi", true},
		{"the rendered prompt (an upstream output or an input)", base, "a", "hi there", true},
		{"reasoning_effort", edit("prompt: hi}", "prompt: hi, reasoning_effort: high}"), "a", "hi", true},
		{"max_output_tokens", edit("prompt: hi}", "prompt: hi, max_output_tokens: 9}"), "a", "hi", true},
		{"the node's id", edit("id: a", "id: b"), "b", "hi", true},
		{"the continuation form", edit("api_key_env: K}", "api_key_env: K, continuation: prefix}"), "a", "hi", false},
		{"the profile", edit("profile: ci", "profile: patient"), "a", "hi", false},
		{"the provider's name", strings.NewReplacer("  p: {", "  q: {", "provider: p", "provider: q").Replace(base), "a", "hi", false},
		{"the api key variable", edit("api_key_env: K", "api_key_env: OTHER"), "a", "hi", false},
		{"retries, timeout, side effects, cache fields", edit("prompt: hi}", "prompt: hi, retries: 1, timeout: 1m, side_effects: unsafe, cache: true, cache_ttl: 1h}"), "a", "hi", false},
	} {
		got := keyOf(t, tc.src, tc.id, tc.prompt)
		if (got != want) != tc.changes {
			t.Errorf("%s: key changed %v, want %v", tc.name, got != want, tc.changes)
		}
	}
	// A gemini node's agent is in the key: another agent, another answer.
	const gem = "name: k\nprofile: ci\nproviders:\n  g: {kind: gemini, base_url: http://h, api_key_env: K, agent: deep-a}\nnodes:\n  - {id: a, provider: g, prompt: hi}\n"
	if keyOf(t, gem, "a", "hi") == keyOf(t, strings.Replace(gem, "agent: deep-a", "agent: deep-b", 1), "a", "hi") {
		t.Error("the gemini agent does not change the key")
	}
	// The rendered system prompt is in the key.
	g := parseTestGraph(t, base)
	r := &runState{g: g, cache: &runCache{endpoints: map[string]string{"p": "http://h/v1"}}}
	bp := builtProvider{model: "m1"}
	if r.cacheKey(g.Node("a"), bp, "", "hi") == r.cacheKey(g.Node("a"), bp, "be brief", "hi") {
		t.Error("the system prompt does not change the key")
	}
	// A simulated run never shares keys with a real one.
	c, _ := newRunCache(g, &Options{Sim: &SimOptions{}, Getenv: func(string) string { return "" }})
	if (&runState{g: g, cache: c}).cacheKey(g.Node("a"), bp, "", "hi") == want {
		t.Error("a --sim run has the real run's key")
	}
}

// sixGraph: a and b are roots; c needs a; d needs a and b; e needs c; f
// needs d. cPrompt is c's prompt, extra more node fields of every node.
func sixGraph(t *testing.T, url, cPrompt, extra string) *Graph {
	t.Helper()
	src := fmt.Sprintf(`name: six
profile: ci
providers:
  p: {kind: openai, base_url: %s, model: sim}
nodes:
  - {id: a, prompt: 'first a'%[3]s}
  - {id: b, prompt: 'first b'%[3]s}
  - {id: c, needs: [a], prompt: '%[2]s {{ output "a" }}'%[3]s}
  - {id: d, needs: [a, b], prompt: 'join {{ output "a" }} {{ output "b" }}'%[3]s}
  - {id: e, needs: [c], prompt: 'then {{ output "c" }}'%[3]s}
  - {id: f, needs: [d], prompt: 'then {{ output "d" }}'%[3]s}
`, url, cPrompt, extra)
	return parseTestGraph(t, src)
}

// calls is how many chat requests each node sent the simulator.
func calls(srv *sim.Server) map[string]int64 {
	out := map[string]int64{}
	for id, ns := range srv.Stats().Nodes {
		out[id] = ns.Requests[sim.EndpointChat]
	}
	return out
}

// callsSince is calls now minus before, of the nodes that called.
func callsSince(srv *sim.Server, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for id, n := range calls(srv) {
		if d := n - before[id]; d != 0 {
			out[id] = d
		}
	}
	return out
}

func runCached(t *testing.T, g *Graph, opts Options) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.RunCompleted {
		t.Fatalf("run %s: %+v", res.Status, res.Nodes)
	}
	return res
}

func outputs(res *Result) map[string]string {
	out := map[string]string{}
	for _, n := range res.Nodes {
		out[n.ID] = n.Output
	}
	return out
}

func sameCalls(got map[string]int64, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, id := range want {
		if got[id] != 1 {
			return false
		}
	}
	return true
}

// The acceptance, on the simulator (its request counts are the
// independent count): edit a middle node's prompt and run again: only that
// node and its dependents call; the others' outputs are byte-identical and
// their NR407 names the run and node they came from. Then --refresh, the
// model, a parameter, --no-cache, an unsafe node and a TTL.
func TestCacheEditAndRerun(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	j := openJournal(t)
	first := runCached(t, sixGraph(t, srv.BaseURL(), "expand", ""), Options{Journal: j})
	if got := calls(srv); !sameCalls(got, "a", "b", "c", "d", "e", "f") {
		t.Fatalf("first run calls %v", got)
	}
	check := func(name string, g *Graph, opts Options, wantCalled ...string) *Result {
		t.Helper()
		before := calls(srv)
		opts.Journal = j
		res := runCached(t, g, opts)
		if got := callsSince(srv, before); !sameCalls(got, wantCalled...) {
			t.Errorf("%s: nodes called %v, want each of %v once", name, got, wantCalled)
		}
		for _, n := range res.Nodes {
			called := false
			for _, id := range wantCalled {
				called = called || id == n.ID
			}
			if (n.FromCache != "") == called {
				t.Errorf("%s: node %s FromCache %q, called %v", name, n.ID, n.FromCache, called)
			}
		}
		return res
	}

	var mu sync.Mutex
	done := map[string]string{} // what the live view and the log are told
	edited := check("edit c", sixGraph(t, srv.BaseURL(), "elaborate", ""), Options{OnProgress: func(p Progress) {
		if p.State == ProgressDone {
			mu.Lock()
			done[p.Node] = p.Text
			mu.Unlock()
		}
	}}, "c", "e")
	if want := "done from the cache (" + fmt.Sprint(len(outputs(first)["d"])) + " bytes: node d of run " + first.RunID[:8] + ")"; done["d"] != want ||
		strings.Contains(done["c"], "cache") {
		t.Errorf("progress: d %q (want %q), c %q", done["d"], want, done["c"])
	}
	for _, id := range []string{"a", "b", "d", "f"} {
		if outputs(edited)[id] != outputs(first)[id] {
			t.Errorf("node %s: output differs from the first run's", id)
		}
	}
	recs := diagRecs(t, j, edited.RunID, "d")
	if len(recs) != 1 || recs[0].Code != diagnostics.CacheHit.ID || recs[0].Attrs["from_run"] != first.RunID || recs[0].Attrs["from_node"] != "d" ||
		recs[0].Attrs["saved_output_tokens"] == float64(0) {
		t.Errorf("d's records: %+v", recs)
	}

	// diagnose: the hits' tokens and cost are the first run's for those
	// nodes, priced by the same table, and not in this run's cost.
	prices := ledger.Prices{"sim": {Input: 1, Output: 10}}
	account := func(runID string) *ledger.Account {
		run, err := ledger.Load(context.Background(), j, runID, ledger.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ledger.AccountOf(run, prices)
	}
	was, now := account(first.RunID), account(edited.RunID)
	var wantOut, wantIn int
	var wantUSD float64
	for i, na := range was.Nodes {
		if strings.Contains("abdf", na.ID) {
			wantOut, wantIn, wantUSD = wantOut+na.Tokens.Needed, wantIn+na.Tokens.Input, wantUSD+*na.CostUSD
			if (now.Nodes[i].CachedFrom != ledger.CacheSource{Run: first.RunID, Node: na.ID}) || now.Nodes[i].Verdict.Kind != ledger.VerdictCached || !strings.HasPrefix(now.Nodes[i].Verdict.Text, "from the cache") {
				t.Errorf("node %s: cached_from %q, verdict %q", na.ID, now.Nodes[i].CachedFrom, now.Nodes[i].Verdict)
			}
		}
	}
	sv := now.Totals.Saved
	if now.Totals.Cached != 4 || sv.Output != wantOut || sv.Input != wantIn || wantOut == 0 || sv.CostUSD == nil || fmt.Sprintf("%.9f", *sv.CostUSD) != fmt.Sprintf("%.9f", wantUSD) {
		t.Errorf("saved %+v (cost %v), want 4 nodes, %d output, %d input, $%f", now.Totals, sv.CostUSD, wantOut, wantIn, wantUSD)
	}
	if *now.Totals.CostUSD >= *was.Totals.CostUSD {
		t.Errorf("cost %v not below the first run's %v", *now.Totals.CostUSD, *was.Totals.CostUSD)
	}

	// The simulator answers the same prompt the same: c's output is
	// byte-identical, yet a refresh calls its dependents too.
	check("--refresh c", sixGraph(t, srv.BaseURL(), "elaborate", ""), Options{Cache: CacheOptions{Refresh: []string{"c"}}}, "c", "e")
	check("max_output_tokens", sixGraph(t, srv.BaseURL(), "elaborate", ", max_output_tokens: 30"), Options{}, "a", "b", "c", "d", "e", "f")
	check("--no-cache", sixGraph(t, srv.BaseURL(), "elaborate", ""), Options{Cache: CacheOptions{Off: true}}, "a", "b", "c", "d", "e", "f")
	check("unsafe", sixGraph(t, srv.BaseURL(), "elaborate", ", side_effects: unsafe"), Options{}, "a", "b", "c", "d", "e", "f")
	check("unsafe opted in", sixGraph(t, srv.BaseURL(), "elaborate", ", side_effects: unsafe, cache: true"), Options{})
	check("cache: false", sixGraph(t, srv.BaseURL(), "elaborate", ", cache: false"), Options{}, "a", "b", "c", "d", "e", "f")
	time.Sleep(5 * time.Millisecond)
	check("stale", sixGraph(t, srv.BaseURL(), "elaborate", ", cache_ttl: 1ms"), Options{}, "a", "b", "c", "d", "e", "f")
	check("fresh enough", sixGraph(t, srv.BaseURL(), "elaborate", ", cache_ttl: 1h"), Options{})

	model := strings.Replace(string(sixGraph(t, srv.BaseURL(), "elaborate", "").Source), "model: sim", "model: sim-2", 1)
	check("the model", parseTestGraph(t, model), Options{}, "a", "b", "c", "d", "e", "f")

	if _, err := Run(context.Background(), sixGraph(t, srv.BaseURL(), "x", ""), Options{Journal: j, Cache: CacheOptions{Refresh: []string{"nosuch"}}}); err == nil ||
		!strings.Contains(err.Error(), `no node "nosuch"`) {
		t.Errorf("--refresh nosuch: %v", err)
	}
}

// Another journal, opened read-only, is a cache too (--cache-from).
func TestCacheFrom(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 4, Tokens: 30})
	dir := t.TempDir()
	a, err := journal.Open(context.Background(), dir+"/a.db")
	if err != nil {
		t.Fatal(err)
	}
	first := runCached(t, sixGraph(t, srv.BaseURL(), "expand", ""), Options{Journal: a})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := journal.OpenReadOnly(context.Background(), dir+"/a.db")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before := calls(srv)
	res := runCached(t, sixGraph(t, srv.BaseURL(), "expand", ""), Options{Journal: openJournal(t), Cache: CacheOptions{From: []*journal.Journal{ro}}})
	if got := callsSince(srv, before); len(got) != 0 {
		t.Errorf("calls with --cache-from: %v", got)
	}
	for id, out := range outputs(first) {
		if outputs(res)[id] != out {
			t.Errorf("node %s differs", id)
		}
	}
}

// A resumed node picks up its own work (a response to re-attach): it never
// takes a cached answer, which would leave that work billing at the
// provider. A fresh start does.
func TestCacheNotForAResumedNode(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 10})
	j := openJournal(t)
	g := chatGraph(t, srv.BaseURL(), "a")
	runCached(t, g, Options{Journal: j})
	r, closeProvs, err := newRunState(context.Background(), g, &Options{Journal: j, RunID: "later"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeProvs()
	n := g.Node("a")
	system, prompt, err := r.render(n)
	if err != nil {
		t.Fatal(err)
	}
	key := r.cacheKey(n, r.provs[n.Provider], system, prompt)
	r.entries["a"] = &entry{attempt: 1, action: "resume"}
	if hit := r.fromCache(context.Background(), n, key); hit != nil {
		t.Errorf("a resumed node took the cache: %+v", hit)
	}
	r.entries["a"] = &entry{fresh: true}
	if hit := r.fromCache(context.Background(), n, key); hit == nil {
		t.Error("a fresh start missed the cache")
	}
}

// In-flight sharing (issue 42, point 7): two runs of one graph at once, on
// one journal file through two writers (as two processes would), pay for
// each node once: every node of the run that starts second waits for the
// first run's node computing the same key and reuses its answer, its NR407
// naming that run. The simulator's request counts are the independent
// count. (Node a is the first run's: the second starts once it streams.
// Later nodes go to whichever run reaches them first, which under load may
// be the second: each is computed by one run and reused by the other.) With --no-cache the second run pays again. (A node whose runner
// is gone is not waited for: TestClaimKey.)
func TestInFlightSharing(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 60, TokensPerSecond: 300})
	path := filepath.Join(t.TempDir(), "j.db")
	j1, j2 := testkit.OpenJournal(t, path), testkit.OpenJournal(t, path)
	g := sixGraph(t, srv.BaseURL(), "expand", "")
	both := func(second Options) (*Result, *Result) {
		var wg sync.WaitGroup
		var first *Result
		wg.Go(func() { first = runCached(t, g, Options{Journal: j1}) })
		for deadline := time.Now().Add(10 * time.Second); srv.Stats().TokensGenerated == 0; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the first run does not stream")
			}
		}
		second.Journal = j2
		res := runCached(t, g, second)
		wg.Wait()
		return first, res
	}

	first, second := both(Options{})
	if got := calls(srv); !sameCalls(got, "a", "b", "c", "d", "e", "f") {
		t.Fatalf("two runs at once called %v, want each node once", got)
	}
	if a := second.Nodes[0]; a.ID != "a" || a.FromCache != first.RunID+"/a" {
		t.Errorf("node %s of the second run: %s from %q (%v), want %s/a", a.ID, a.State, a.FromCache, a.Err, first.RunID)
	}
	for i, n := range second.Nodes {
		f := first.Nodes[i]
		if n.State != journal.NodeCompleted || f.State != journal.NodeCompleted ||
			n.FromCache != first.RunID+"/"+n.ID && f.FromCache != second.RunID+"/"+n.ID {
			t.Errorf("node %s: %s from %q in the second run, %s from %q in the first: want one run's answer reused by the other",
				n.ID, n.State, n.FromCache, f.State, f.FromCache)
		}
	}
	if a, b := outputs(first), outputs(second); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("the runs' outputs differ:\n%v\n%v", a, b)
	}
	ds := diagRecs(t, j2, second.RunID, "a")
	if hits := withCode(ds, diagnostics.CacheHit); len(hits) != 1 || hits[0].Attrs["from_run"] != first.RunID {
		t.Errorf("NR407 of the second run's node a: %v, want one naming run %s", hits, first.RunID)
	}

	before := calls(srv)
	g = sixGraph(t, srv.BaseURL(), "elaborate", "") // new keys for c and e: nothing to reuse from the runs above
	_, _ = both(Options{Cache: CacheOptions{Off: true}})
	if got := callsSince(srv, before); got["c"] != 2 || got["e"] != 2 {
		t.Errorf("with --no-cache the second run waits for nobody: new calls %v, want c and e twice", got)
	}
}
