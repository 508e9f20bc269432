package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// copied copies a journal (copyJournal) into a directory of its own.
func copied(t *testing.T, db string) string {
	t.Helper()
	dir := t.TempDir()
	copyJournal(t, db, dir)
	return filepath.Join(dir, "j.db")
}

var generated = regexp.MustCompile(`report generated [0-9TZ:.-]+`)

// inspect is what the inspecting commands print of a run's last journal:
// events, status, every node's show (output, attempts, thinking, JSON),
// diagnose (verdicts and totals, table, JSON) and the HTML report.
func inspect(t *testing.T, db string, nodes []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	cmds := [][]string{
		{"events", "last", "--json"}, {"events", "last"}, {"status", "last"},
		{"diagnose", "last"}, {"diagnose", "last", "--table"}, {"diagnose", "last", "--json"},
		{"report", "last", "-o", "-"},
	}
	for _, n := range nodes {
		cmds = append(cmds, []string{"show", "last", n}, []string{"show", "last", n, "--attempts"},
			[]string{"show", "last", n, "--thinking"}, []string{"show", "last", n, "--json"})
	}
	for _, args := range cmds {
		code, stdout, stderr := runCLI(t, append(args, "--db", db)...)
		key := strings.Join(args, " ")
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", key, code, stderr)
		}
		// The report says when it was generated.
		out[key] = generated.ReplaceAllString(stdout, "report generated …")
	}
	return out
}

// The inspecting commands print the same of a compacted run as of the run
// before: events (every one, with its seq, time and text), status, show,
// diagnose and report. The demo's run has dropped, continued and
// re-attached streams, so attempts that failed are folded too.
func TestCompactedRunReadsTheSame(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, stdout, stderr := runCLI(t, "run", "--db", db, "--profile", "ci", "../../testdata/graphs/demo.yaml"); code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, outputs := nodeOutputs(t, db)
	var nodes []string
	for id := range outputs {
		nodes = append(nodes, id)
	}
	if len(nodes) < 4 {
		t.Fatalf("the demo completed %d nodes", len(nodes))
	}
	compacted := copied(t, db)
	code, stdout, stderr := runCLI(t, "compact", "last", "--db", compacted)
	if code != exitOK || !strings.Contains(stdout, "rows of 4 nodes folded") {
		t.Fatalf("compact: exit %d\n%s%s", code, stdout, stderr)
	}
	if journal.DiskSize(compacted) >= journal.DiskSize(db) {
		t.Errorf("compacted journal %d bytes, the original %d", journal.DiskSize(compacted), journal.DiskSize(db))
	}
	checkFolded(t, compacted)
	want, got := inspect(t, db, nodes), inspect(t, compacted, nodes)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s prints differently after compact: %s", k, firstDiff(w, got[k]))
		}
	}
	if len(want["events last --json"]) < 1000 {
		t.Errorf("events: %d bytes", len(want["events last --json"]))
	}
}

// checkFolded fails unless the journal holds folded rows and no delta row
// of a completed node.
func checkFolded(t *testing.T, db string) {
	t.Helper()
	// A fold is invisible through the journal's API: count what the file holds.
	raw, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var folds, rows int
	if err := raw.QueryRow(`SELECT count(*) FROM folds`).Scan(&folds); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM events e JOIN runs r ON r.key = e.run JOIN nodes n ON n.run = r.id AND n.id = e.node
		WHERE e.kind = 'delta' AND n.state = 'completed' AND e.code = ''`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if folds == 0 || rows != 0 {
		t.Errorf("%d folds, %d delta rows of completed nodes left", folds, rows)
	}
}

// Resuming a compacted interrupted run completes it byte-identical to an
// undisturbed run, as resuming it uncompacted does: the completed node's
// rows are folded, the interrupted node's are not, and resume re-attaches
// after the last sequence number the journal holds.
func TestResumeOfACompactedInterruptedRun(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
	chat := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: 200, TokensPerSecond: 4000,
		Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 50}}})
	cmd, db, errOut := startRunOut(t, t.TempDir(), fmt.Sprintf(
		"name: slow\nprofile: ci\ncache: false\nproviders:\n  p: {kind: responses, base_url: %s, model: sim}\n  c: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, provider: p, prompt: %s}\n  - {id: quick, provider: c, prompt: quick}\n",
		srv.BaseURL(), chat.BaseURL(), intPrompt))
	waitOutput(t, errOut, "quick")
	waitStreaming(t, srv, 1500) // half of a; quick took 0.05 s and a retry
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the run was not interrupted\n%s", errOut)
	}
	run, done := nodeOutputs(t, db)
	if run.Status != journal.RunInterrupted || done["quick"] == "" || done["a"] != "" {
		t.Fatalf("run %s, completed %v: want interrupted with quick completed and a not", run.Status, done)
	}
	compacted := copied(t, db)
	if code, stdout, stderr := runCLI(t, "compact", "--db", compacted); code != exitOK || !strings.Contains(stdout, "of 1 nodes folded") {
		t.Fatalf("compact: exit %d\n%s%s", code, stdout, stderr)
	}
	checkFolded(t, compacted)
	want := strings.Join(sim.Text("sim", intPrompt, intSeed, intTokens), "")
	for _, path := range []string{db, compacted} {
		if got := resumeRun(t, path); got != want {
			t.Fatalf("%s: resumed output differs from the undisturbed one: %d bytes, want %d", path, len(got), len(want))
		}
		if _, outs := nodeOutputs(t, path); outs["quick"] != done["quick"] {
			t.Fatalf("%s: quick's output changed", path)
		}
	}
	if st := srv.Stats(); st.ResponsesCreated != 1 || st.TokensGenerated != intTokens {
		t.Errorf("sim: %d responses, %d tokens (want 1 and %d: none regenerated)", st.ResponsesCreated, st.TokensGenerated, intTokens)
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  before: %s\n  after:  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines before, %d after", len(al), len(bl))
}

// compact during a streaming run (issue 42): the live run is skipped and
// named, finished runs are folded, the file is not vacuumed under the
// runner, and the run completes as it would have, every output whole in its
// events.
func TestCompactDuringALiveRun(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: 2000, TokensPerSecond: 1000})
	chat := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: 200, TokensPerSecond: 4000})
	cmd, db, errOut := startRunOut(t, t.TempDir(), fmt.Sprintf(
		"name: live\nprofile: ci\ncache: false\nproviders:\n  p: {kind: responses, base_url: %s, model: sim}\n  c: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, provider: p, prompt: %s}\n  - {id: quick, provider: c, prompt: quick}\n",
		srv.BaseURL(), chat.BaseURL(), intPrompt))
	waitStreaming(t, srv, 500)
	code, stdout, stderr := runCLI(t, "compact", "--db", db)
	if code != exitOK || !regexp.MustCompile(`run \S+: skipped: it is running \(pid \d+ on host`).MatchString(stdout) ||
		!strings.Contains(stdout, "not vacuumed: another process") || strings.Contains(stdout, "rows of") {
		t.Fatalf("compact of a live run: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run after a compact: %v\n%s", err, errOut)
	}
	run, outs := nodeOutputs(t, db)
	if want := strings.Join(sim.Text("sim", intPrompt, intSeed, 2000), ""); run.Status != journal.RunCompleted || outs["a"] != want || outs["quick"] == "" {
		t.Fatalf("run %s, a %d bytes (want %d), quick %d bytes", run.Status, len(outs["a"]), len(want), len(outs["quick"]))
	}
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	evs, err := j.Events(t.Context(), run.ID, journal.EventFilter{Kinds: []string{journal.KindDelta}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Fatalf("event %d: seq %d after %d", i, e.Seq, evs[i-1].Seq)
		}
		got[e.NodeID] += string(e.Payload)
	}
	for id, o := range outs {
		if got[id] != o {
			t.Errorf("node %s: its delta events hold %d bytes of its %d", id, len(got[id]), len(o))
		}
	}
}

// A run that opens its journal while compact rewrites it (VACUUM, which
// holds SQLite's write lock for as long as the rewrite takes) waits for
// the rewrite, saying which process it waits for, and then runs as it would
// have: before the maintenance lock it failed with "database is locked"
// after its 5 s busy timeout, naming nobody. The test process holds the
// lock as compact does (journal.LockSuffix, with its holder line) for longer
// than that busy timeout.
func TestRunWaitsForARewrite(t *testing.T) {
	chat := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: 200, TokensPerSecond: 4000})
	dir := t.TempDir()
	db := filepath.Join(dir, "run.db")
	if err := testkit.OpenJournal(t, db).Close(); err != nil {
		t.Fatal(err)
	}
	lock := flock.New(db + journal.LockSuffix)
	if ok, err := lock.TryLock(); !ok || err != nil {
		t.Fatalf("the maintenance lock: %v, %v", ok, err)
	}
	defer lock.Close()
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid=%d host=%s since=%d what=vacuum\n", os.Getpid(), host, time.Now().UnixNano())
	if err := os.WriteFile(db+journal.LockSuffix, []byte(holder), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _, errOut := startRunOut(t, dir, fmt.Sprintf(
		"name: waits\nprofile: ci\ncache: false\nproviders:\n  c: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: quick, provider: c, prompt: quick}\n", chat.BaseURL()))
	says := fmt.Sprintf("pid %d on host %s (vacuum for", os.Getpid(), host)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errOut.String(), says); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run does not say whom it waits for (%q):\n%s", says, errOut)
		}
	}
	time.Sleep(6 * time.Second) // past a writer's busy timeout
	if st := chat.Stats(); len(st.Requests) != 0 {
		t.Fatalf("the run went on under a rewrite: requests %v", st.Requests)
	}
	if err := os.WriteFile(db+journal.LockSuffix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run after the rewrite: %v\n%s", err, errOut)
	}
	run, outs := nodeOutputs(t, db)
	if want := strings.Join(sim.Text("sim", "quick", intSeed, 200), ""); run.Status != journal.RunCompleted || outs["quick"] != want {
		t.Fatalf("run %s, quick %d bytes (want %d)", run.Status, len(outs["quick"]), len(want))
	}
}
