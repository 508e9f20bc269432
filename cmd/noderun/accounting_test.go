package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/ledger"
)

// Issue 23: the figures an operator reads are checked against the wall
// clock and the simulator, on real runs.

// diagnoseJSON runs `noderun diagnose last --json` (with more args) on db.
func diagnoseJSON(t *testing.T, db string, args ...string) ledger.Account {
	t.Helper()
	code, out, errs := runCLI(t, append([]string{"diagnose", "last", "--db", db, "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("diagnose: exit %d\n%s", code, errs)
	}
	var a ledger.Account
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return a
}

// writeGraph writes a graph file and returns its path and a journal path beside it.
func writeGraph(t *testing.T, src string) (graph, db string) {
	t.Helper()
	dir := t.TempDir()
	graph = filepath.Join(dir, "graph.yaml")
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return graph, filepath.Join(dir, "run.db")
}

// lostSeconds reads "X s lost of Y s" from the run's summary line.
var lostSeconds = regexp.MustCompile(`([0-9.]+) s lost of ([0-9.]+) s`)

// A provider that refuses every connection: the node fails after its
// retries, and the time it lost is at most the time it ran (each retry's
// backoff counted once, not once in the attempt it ended and again in the
// fault's stretch), which is at most what the wall clock measured.
func TestRefusedConnectionLosesAtMostItsWallTime(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: every connect is refused
	graph, db := writeGraph(t, fmt.Sprintf(`name: refused
providers:
  p: {kind: openai, base_url: "http://%s/v1", api_key_env: NODERUN_TEST_KEY, model: m}
nodes:
  - {id: a, provider: p, prompt: hello}
  - {id: b, provider: p, prompt: hello again}
`, addr))
	t.Setenv("NODERUN_TEST_KEY", "sk-test")
	// The default profile: its backoff (1 s base) is what the old
	// accounting counted twice.
	start := time.Now()
	code, out, errs := runCLI(t, "run", "--db", db, graph)
	wall := time.Since(start)
	if code != exitFailed {
		t.Fatalf("run: exit %d, want %d\n%s\n%s", code, exitFailed, out, errs)
	}
	a := diagnoseJSON(t, db)
	if a.WallMS > wall.Milliseconds() {
		t.Errorf("the run's wall %d ms is more than the %d ms it took", a.WallMS, wall.Milliseconds())
	}
	for _, n := range a.Nodes {
		if n.TimeLostMS > n.WallMS || n.WallMS > wall.Milliseconds() || n.UsefulMS+n.TimeLostMS+n.QuotaWaitMS != n.WallMS {
			t.Errorf("%s: lost %d ms, useful %d ms, wall %d ms; the run took %d ms", n.ID, n.TimeLostMS, n.UsefulMS, n.WallMS, wall.Milliseconds())
		}
		if n.Faults["connect_failed"] == 0 || !strings.Contains(n.Verdict.Text, "connect failure") {
			t.Errorf("%s: faults %v, verdict %q: the refused connections are not named", n.ID, n.Faults, n.Verdict)
		}
	}
	m := lostSeconds.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no \"s lost of\" in the summary:\n%s", out)
	}
	lost, _ := strconv.ParseFloat(m[1], 64)
	if lost > wall.Seconds()*float64(len(a.Nodes))+0.05 {
		t.Errorf("the summary says %.1f s lost of a run of %.1f s with %d nodes:\n%s", lost, wall.Seconds(), len(a.Nodes), out)
	}
}

// A request the provider rejects is named as such: in the verdict, and in
// the summary's faults ("no faults" was wrong).
func TestRejectedRequestIsNamed(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 20})
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Kind: sim.FaultStatus, Status: 401})
	graph, db := writeGraph(t, fmt.Sprintf(`name: rejected
profile: ci
providers:
  p: {kind: openai, base_url: %q, api_key_env: NODERUN_TEST_KEY, model: m}
nodes:
  - {id: a, provider: p, prompt: hello}
`, srv.BaseURL()))
	t.Setenv("NODERUN_TEST_KEY", "sk-wrong")
	code, out, errs := runCLI(t, "run", "--db", db, graph)
	if code != exitFailed {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "no faults") || !strings.Contains(out, "recovery: 1 rejection") {
		t.Errorf("the summary does not name the rejection:\n%s", out)
	}
	a := diagnoseJSON(t, db)
	if v := a.Nodes[0].Verdict.Text; !strings.HasPrefix(v, "failed: rejected by the provider (401)") {
		t.Errorf("verdict %q", v)
	}
	if n := srv.Stats().Requests[sim.EndpointChat]; n != 1 {
		t.Errorf("%d requests: a 401 is not retried", n)
	}
}

// Ctrl-C, then `noderun resume`: the node is not "clean", its verdict says
// it recovered from an interruption by re-attaching, and its tokens equal
// the simulator's (none regenerated).
func TestResumedNodeSaysItWasInterrupted(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
	db, _, _ := interruptRun(t, srv, os.Interrupt)
	before := diagnoseJSON(t, db)
	if v := before.Nodes[0].Verdict.Text; !strings.HasPrefix(v, "interrupted after ") || !strings.Contains(v, "keeps running at the provider") {
		t.Errorf("interrupted node's verdict %q", v)
	}
	resumeRun(t, db)
	a := diagnoseJSON(t, db)
	n := a.Nodes[0]
	if !strings.HasPrefix(n.Verdict.Text, "recovered from 1 interruption by re-attach") || n.Faults["node_resumed"] != 1 {
		t.Errorf("after resume: verdict %q, faults %v", n.Verdict, n.Faults)
	}
	if st := srv.Stats(); int64(n.Tokens.Generated) != st.TokensGenerated || n.Tokens.Regenerated != 0 || n.Tokens.Preserved == 0 {
		t.Errorf("tokens %+v, the simulator generated %d", n.Tokens, st.TokensGenerated)
	}
	// The time between the interruption and the resume is nobody's.
	if n.WallMS >= a.WallMS+1 || len(n.Faults) != 1 {
		t.Errorf("node wall %d ms, run wall %d ms, faults %v", n.WallMS, a.WallMS, n.Faults)
	}
}

// A price table keyed by the model a node was called with: "sim" prices the
// simulator's nodes (docs/graph.md: a sim provider's model is sim); a model
// without a price is a warning that names it and its nodes, and the cost
// line says it counts priced models only.
func TestPricesBySimModel(t *testing.T) {
	t.Parallel()
	db, _ := demoRun(t)
	dir := t.TempDir()
	priced := filepath.Join(dir, "sim.yaml")
	other := filepath.Join(dir, "other.yaml")
	for f, src := range map[string]string{priced: "sim: {input: 1, output: 10}\n", other: "gpt-5: {input: 1, output: 10}\n"} {
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := diagnoseJSON(t, db, "--prices", priced)
	if a.Totals.CostUSD == nil || *a.Totals.CostUSD <= 0 || len(a.Warnings) != 0 {
		t.Errorf("priced by sim: cost %v, warnings %q", a.Totals.CostUSD, a.Warnings)
	}
	want := 0.0
	for _, n := range a.Nodes {
		if n.Model != "sim" || n.CostUSD == nil {
			t.Errorf("%s: model %q, cost %v", n.ID, n.Model, n.CostUSD)
			continue
		}
		// independent of the ledger's sum: the price times the tokens
		want += (float64(n.Tokens.Input)*1 + float64(n.Tokens.Generated)*10) / 1e6
	}
	if a.Totals.CostUSD != nil && fmt.Sprintf("%.9f", *a.Totals.CostUSD) != fmt.Sprintf("%.9f", want) {
		t.Errorf("total cost %.9f, want %.9f", *a.Totals.CostUSD, want)
	}
	code, out, _ := runCLI(t, "diagnose", "last", "--db", db, "--prices", other)
	if code != exitOK || !strings.Contains(out, `warning: no price for model "sim" (4 nodes plan, research, critique, report)`) ||
		!strings.Contains(out, "(priced models only)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
