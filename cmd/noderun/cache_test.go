package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/dirstate"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// cacheGraph writes a 6-node graph on the simulator at url: a and b are
// roots; c needs a; d needs a and b; e needs c; f needs d. cPrompt is c's.
func cacheGraph(t *testing.T, dir, url, cPrompt string) string {
	t.Helper()
	src := fmt.Sprintf(`name: six
profile: ci
providers:
  p: {kind: openai, base_url: %s, model: sim}
nodes:
  - {id: a, prompt: first a}
  - {id: b, prompt: first b}
  - {id: c, needs: [a], prompt: '%s {{ output "a" }}'}
  - {id: d, needs: [a, b], prompt: 'join {{ output "a" }} {{ output "b" }}'}
  - {id: e, needs: [c], prompt: 'then {{ output "c" }}'}
  - {id: f, needs: [d], prompt: 'then {{ output "d" }}'}
`, url, cPrompt)
	path := filepath.Join(dir, "six.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// simCalls is how many chat requests each node sent srv.
func simCalls(srv *sim.Server) map[string]int64 {
	out := map[string]int64{}
	for id, ns := range srv.Stats().Nodes {
		out[id] = ns.Requests[sim.EndpointChat]
	}
	return out
}

// called lists the nodes that sent requests since before, with how many.
func called(srv *sim.Server, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for id, n := range simCalls(srv) {
		if n != before[id] {
			out[id] = n - before[id]
		}
	}
	return out
}

// runOutputs is the completed nodes' outputs of run (last when "").
func runOutputs(t *testing.T, db, run string) (string, map[string]string) {
	t.Helper()
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	ctx := context.Background()
	if run == "" {
		runs, err := j.Runs(ctx, 1)
		if err != nil || len(runs) == 0 {
			t.Fatalf("runs: %v %v", runs, err)
		}
		run = runs[0].ID
	}
	nodes, err := j.Nodes(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes {
		if n.State == journal.NodeCompleted {
			out[n.ID] = n.Output
		}
	}
	return run, out
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("noderun %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// The README's loop: run, edit one middle node's prompt, run again. Only
// that node and its dependents call the simulator (its counts), the other
// outputs are byte-identical, and diagnose --json shows what was saved,
// priced by the same table. Then --refresh recalls exactly a node and its
// dependents, though the simulator's answer comes back the same.
func TestCacheEditAndRerunCLI(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: 9, Tokens: 50})
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	mustRun(t, "run", "--db", db, cacheGraph(t, dir, srv.BaseURL(), "expand"))
	first, was := runOutputs(t, db, "")
	if got := called(srv, nil); len(got) != 6 {
		t.Fatalf("first run: calls %v", got)
	}

	before := simCalls(srv)
	out := mustRun(t, "run", "--db", db, "--json", cacheGraph(t, dir, srv.BaseURL(), "elaborate"))
	validJSON(t, schemas(t)["run"], "run --json with hits", out)
	if got := called(srv, before); fmt.Sprint(got) != "map[c:1 e:1]" {
		t.Errorf("after editing c: calls %v, want c and e once", got)
	}
	second, now := runOutputs(t, db, "")
	for _, id := range []string{"a", "b", "d", "f"} {
		if now[id] != was[id] {
			t.Errorf("node %s: output differs from the first run's", id)
		}
	}
	if now["c"] == was["c"] || now["e"] == was["e"] {
		t.Error("c or e kept the first run's output")
	}

	prices := tempFile(t, "prices.yaml", "sim: {input: 2, output: 8}\n")
	firstD := mustRun(t, "diagnose", first, "--db", db, "--json", "--prices", prices)
	secondD := mustRun(t, "diagnose", second, "--db", db, "--json", "--prices", prices)
	validJSON(t, schemas(t)["diagnose"], "diagnose --json with hits", secondD)
	type figures struct {
		Tokens struct{ Needed, Input int }
		Cost   float64 `json:"cost_usd"`
		Cached int
		Saved  struct {
			Output, Input int
			Cost          float64 `json:"cost_usd"`
		}
	}
	type account struct {
		Nodes []struct {
			ID         string
			CachedFrom string `json:"cached_from"`
			figures
		}
		Totals  figures
		Summary []string
	}
	var a1, a2 account
	if err := json.Unmarshal([]byte(firstD), &a1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(secondD), &a2); err != nil {
		t.Fatal(err)
	}
	var want figures
	for i, n := range a1.Nodes {
		if strings.Contains("abdf", n.ID) {
			want.Saved.Output += n.Tokens.Needed
			want.Saved.Input += n.Tokens.Input
			want.Saved.Cost += n.Cost
			if a2.Nodes[i].CachedFrom != first+"/"+n.ID {
				t.Errorf("node %s: cached_from %q", n.ID, a2.Nodes[i].CachedFrom)
			}
		}
	}
	s := a2.Totals
	if s.Cached != 4 || s.Saved.Output != want.Saved.Output || s.Saved.Input != want.Saved.Input || want.Saved.Output == 0 ||
		fmt.Sprintf("%.6f", s.Saved.Cost) != fmt.Sprintf("%.6f", want.Saved.Cost) || s.Saved.Cost == 0 {
		t.Errorf("diagnose: cached %d, saved %+v; want 4 and %+v", s.Cached, s.Saved, want.Saved)
	}
	if s.Cost >= a1.Totals.Cost/2 { // two nodes of six paid
		t.Errorf("paid $%f, the first run $%f", s.Cost, a1.Totals.Cost)
	}
	if !strings.Contains(strings.Join(a2.Summary, "\n"), "cache: 4 nodes reused") {
		t.Errorf("summary: %q", a2.Summary)
	}
	for _, args := range [][]string{{"status", "last"}, {"diagnose", "last"}} {
		if text := mustRun(t, append(args, "--db", db)...); !strings.Contains(text, "from the cache: node d of run "+first[:8]) {
			t.Errorf("%s does not show d's hit:\n%s", args[0], text)
		}
	}
	html := filepath.Join(dir, "r.html")
	mustRun(t, "report", "last", "--db", db, "-o", html)
	if b, _ := os.ReadFile(html); !strings.Contains(string(b), "from the cache") {
		t.Error("the report does not show the hits")
	}

	before = simCalls(srv)
	mustRun(t, "run", "--db", db, "--refresh", "a", cacheGraph(t, dir, srv.BaseURL(), "elaborate"))
	if got := called(srv, before); fmt.Sprint(got) != "map[a:1 c:1 d:1 e:1 f:1]" {
		t.Errorf("--refresh a: calls %v, want a and its dependents c, d, e, f once", got)
	}
	_, again := runOutputs(t, db, "")
	if again["a"] != was["a"] {
		t.Error("the simulator answered a differently: the refresh test proves nothing")
	}
	before = simCalls(srv)
	mustRun(t, "run", "--db", db, "--no-cache", cacheGraph(t, dir, srv.BaseURL(), "elaborate"))
	if got := called(srv, before); len(got) != 6 {
		t.Errorf("--no-cache: calls %v, want all 6", got)
	}
}

// --cache-from reuses another journal, which it opens read-only: its
// directory is left exactly as it was.
func TestCacheFromLeavesTheOtherJournalAlone(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: 2, Tokens: 30})
	dir, ci := t.TempDir(), t.TempDir()
	artifact := filepath.Join(ci, "previous.db")
	graph := cacheGraph(t, dir, srv.BaseURL(), "expand")
	mustRun(t, "run", "--db", artifact, graph)
	_, was := runOutputs(t, artifact, "")
	state := dirstate.Of(t, ci)
	before := simCalls(srv)
	db := filepath.Join(dir, "new.db")
	code, table, stderr := runCLI(t, "run", "--db", db, "--cache-from", artifact, graph)
	if code != exitOK {
		t.Fatalf("run --cache-from: exit %d\n%s", code, stderr)
	}
	// Issue 46: a hit names the journal it came from, in the log, the
	// result and status.
	if table = strings.Join(strings.Fields(table), " "); !strings.Contains(stderr, "journal "+artifact+"  NR407") || !strings.Contains(stderr, "in "+artifact) || !strings.Contains(table, "found in "+artifact) {
		t.Errorf("the hits do not name %s:\n%s\n%s", artifact, stderr, table)
	}
	if got := called(srv, before); len(got) != 0 {
		t.Errorf("--cache-from: calls %v, want none", got)
	}
	if _, now := runOutputs(t, db, ""); fmt.Sprint(now) != fmt.Sprint(was) {
		t.Error("outputs differ from the artifact's")
	}
	if after := dirstate.Of(t, ci); after != state {
		t.Errorf("--cache-from changed its directory:\nbefore %s\nafter  %s", state, after)
	}
	if text := mustRun(t, "status", "last", "--db", db); !strings.Contains(text, "from the cache") || !strings.Contains(text, " in "+artifact) {
		t.Errorf("status:\n%s", text)
	}
}

// A run killed mid-way (kill -9) and run again, not resumed, reuses the
// nodes it had completed: they do not call the simulator again.
func TestCacheAfterACrash(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 200, TokensPerSecond: 1000})
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	graph := cacheGraph(t, dir, srv.BaseURL(), "expand")
	cmd := exec.Command(bin, "run", "--db", db, "--parallel", "1", graph)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once some nodes completed and some did not.
	var done map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		done = completedNodes(db)
		if len(done) >= 2 {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	crashed, done := runOutputs(t, db, "")
	if len(done) < 2 || len(done) == 6 {
		t.Fatalf("killed with %d nodes completed: want some, not all", len(done))
	}
	before := simCalls(srv)
	mustRun(t, "run", "--db", db, graph)
	got := called(srv, before)
	for id := range done {
		if got[id] != 0 {
			t.Errorf("node %s completed before the crash, yet called again", id)
		}
	}
	if len(got) != 6-len(done) {
		t.Errorf("calls %v after %d of 6 nodes completed", got, len(done))
	}
	_, now := runOutputs(t, db, "")
	for id, out := range done {
		if now[id] != out {
			t.Errorf("node %s: output differs from the crashed run's", id)
		}
	}
	if text := mustRun(t, "status", "last", "--db", db); !strings.Contains(text, "of run "+crashed[:8]) {
		t.Errorf("status does not name the crashed run:\n%s", text)
	}
}

// completedNodes reads, read-only, what a live run has completed so far.
func completedNodes(db string) map[string]string {
	var nodes []journal.Node
	withLastRun(db, func(j *journal.Journal, run journal.Run) { nodes, _ = j.Nodes(context.Background(), run.ID) })
	out := map[string]string{}
	for _, n := range nodes {
		if n.State == journal.NodeCompleted {
			out[n.ID] = n.Output
		}
	}
	return out
}

// Two `noderun run` processes of one graph on one journal at once pay once
// (issue 42, point 7): the second waits for the first's nodes, says whom it
// waits for, and reuses their answers; the simulator's request counts are
// the independent count.
func TestConcurrentRunsPayOnce(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: 80, TokensPerSecond: 400})
	dir := t.TempDir()
	src, err := os.ReadFile(cacheGraph(t, dir, srv.BaseURL(), "expand"))
	if err != nil {
		t.Fatal(err)
	}
	var db string
	start := func() (*exec.Cmd, *testkit.Buffer) {
		cmd, path, out := startRunOut(t, dir, string(src)) // one graph, one journal: dir's
		db = path
		return cmd, out
	}
	first, firstErr := start()
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().TokensGenerated == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first run does not stream\n%s", firstErr)
		}
	}
	second, secondErr := start()
	for _, c := range []struct {
		cmd *exec.Cmd
		out *testkit.Buffer
	}{{first, firstErr}, {second, secondErr}} {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("a run: %v\n%s", err, c.out)
		}
	}
	if got := simCalls(srv); len(got) != 6 || got["a"] != 1 || got["b"] != 1 || got["c"] != 1 || got["d"] != 1 || got["e"] != 1 || got["f"] != 1 {
		t.Fatalf("two runs at once called %v, want each node once\nsecond run:\n%s", got, secondErr)
	}
	if !strings.Contains(secondErr.String(), "waiting for another run's node computing the same request") {
		t.Errorf("the second run does not say it waits:\n%s", secondErr)
	}
	j := testkit.OpenJournal(t, db)
	runs, err := j.Runs(context.Background(), 2)
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	_, a := runOutputs(t, db, runs[1].ID)
	_, b := runOutputs(t, db, runs[0].ID)
	if len(a) != 6 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("the runs' outputs differ:\n%v\n%v", a, b)
	}
}
