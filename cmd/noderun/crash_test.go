package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// noderun is the CLI, built once per test process: crash tests need a real
// process to kill -9.
var noderun testkit.CLI

func noderunBinary(t *testing.T) string { return noderun.Path(t) }

func TestMain(m *testing.M) {
	// Alone under -race here, the full suite took 164 s at the default
	// -parallel (2) with the machine 62% idle (its tests wait on processes,
	// paced streams and Chromium), and 117 s at 4 for the same CPU.
	testkit.ParallelByMode(4, 8)
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	noderun.Remove()
	os.Exit(code)
}

const crashTokens = 300

// crashGraph has chat and Responses nodes on two external simulators, so the
// providers outlive the runner that is killed.
func crashGraph(t *testing.T, dir, chatURL, respURL string) string {
	src := fmt.Sprintf(`name: crash
profile: ci
providers:
  chat: {kind: openai, base_url: %s, model: sim}
  resp: {kind: responses, base_url: %s, model: sim}
nodes:
  - {id: c1, provider: chat, prompt: first chat}
  - {id: r1, provider: resp, prompt: first reasoning}
  - {id: r2, provider: resp, needs: [c1], prompt: 'reason about {{ output "c1" }}'}
  - {id: c2, provider: chat, needs: [c1, r1], prompt: 'combine {{ output "c1" }} {{ output "r1" }}'}
  - {id: c3, provider: chat, needs: [r2], prompt: 'end {{ output "r2" }}'}
`, chatURL, respURL)
	path := filepath.Join(dir, "crash.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func simPair(t *testing.T) (chat, resp *sim.Server) {
	cfg := sim.Config{Seed: 5, Tokens: crashTokens, TokensPerSecond: 1500}
	return simtest.Start(t, cfg), simtest.Start(t, cfg)
}

func nodeOutputs(t *testing.T, db string) (journal.Run, map[string]string) {
	t.Helper()
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	runs, err := j.Runs(context.Background(), 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	nodes, err := j.Nodes(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes {
		if n.State == journal.NodeCompleted {
			out[n.ID] = n.Output
		}
	}
	return runs[0], out
}

// The crash test of issue 6: kill -9 the runner at random moments of a
// multi-node graph; every `noderun resume` completes the run with outputs
// byte-identical to an undisturbed run, no duplicated event, an intact
// database, and no token regenerated for Responses nodes.
//
// Every trial has its simulators and journal to itself and runs the CLI as
// a process of its own: the trials run side by side, and beside the
// package's other parallel tests (20 trials were 28 s one after another).
func TestKill9ThenResumeCompletesByteIdentical(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	dir := t.TempDir()

	chat, resp := simPair(t)
	graph := crashGraph(t, dir, chat.BaseURL(), resp.BaseURL())
	ref := filepath.Join(dir, "ref.db")
	if out, err := exec.Command(bin, "run", "--db", ref, graph).CombinedOutput(); err != nil {
		t.Fatalf("undisturbed run: %v\n%s", err, out)
	}
	_, want := nodeOutputs(t, ref)
	if len(want) != 5 {
		t.Fatalf("undisturbed run completed %d nodes", len(want))
	}
	const trials = 20
	for trial := range trials {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			t.Parallel()
			chat, resp := simPair(t)
			dir := t.TempDir() // the trial's graph (crashGraph names it) and journal
			graph := crashGraph(t, dir, chat.BaseURL(), resp.BaseURL())
			db := filepath.Join(dir, fmt.Sprintf("trial%d.db", trial))
			cmd := exec.Command(bin, "run", "--db", db, graph)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killAt := time.Duration(20+rand.IntN(700)) * time.Millisecond
			time.Sleep(killAt)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()

			out, err := exec.Command(bin, "resume", "--db", db, "last").CombinedOutput()
			if err != nil && strings.Contains(string(out), "no runs") || !fileExists(db) {
				// Killed before the run was journaled: there is nothing to resume; run it again.
				out, err = exec.Command(bin, "run", "--db", db, graph).CombinedOutput()
			}
			if err != nil {
				t.Fatalf("trial %d (killed at %s): resume failed: %v\n%s", trial, killAt, err, out)
			}
			run, got := nodeOutputs(t, db)
			if run.Status != journal.RunCompleted {
				t.Fatalf("trial %d: run %s after resume", trial, run.Status)
			}
			for id, w := range want {
				if got[id] != w {
					t.Fatalf("trial %d (killed at %s): node %s output differs from the undisturbed run (%d vs %d bytes)\n%s", trial, killAt, id, len(got[id]), len(w), out)
				}
			}
			checkJournal(t, db, run.ID)
			// No token is regenerated for a Responses node whose response id was
			// journaled: it is re-attached or taken from its status, never retried.
			// The one window left is a kill after the create request left but
			// before response.created reached the journal: the id is unknown, so a
			// retry (side_effects: none) is the only way on; the sim may then have
			// generated one orphan response.
			unknownIDs := 0
			for _, node := range []string{"r1", "r2"} {
				atts := attempts(t, db, run.ID, node)
				if len(atts) > 1 {
					if atts[0].Ref != "" {
						t.Fatalf("trial %d (killed at %s): %s was retried although its response %s was journaled", trial, killAt, node, atts[0].Ref)
					}
					unknownIDs++
				}
			}
			st := resp.Stats()
			if st.TokensGenerated != st.ResponsesCreated*crashTokens {
				t.Fatalf("trial %d: responses sim generated %d tokens for %d responses", trial, st.TokensGenerated, st.ResponsesCreated)
			}
			if st.ResponsesCreated < 2 || st.ResponsesCreated > int64(2+unknownIDs) {
				t.Fatalf("trial %d (killed at %s): %d responses created for 2 nodes (%d retried before their id was known)", trial, killAt, st.ResponsesCreated, unknownIDs)
			}
			if unknownIDs > 0 {
				t.Logf("trial %d (killed at %s): killed before a response id was journaled; %d response(s) created", trial, killAt, st.ResponsesCreated)
			}
		})
	}
}

func attempts(t *testing.T, db, run, node string) []journal.Attempt {
	t.Helper()
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	atts, err := j.Attempts(context.Background(), run, node)
	if err != nil {
		t.Fatal(err)
	}
	return atts
}

// checkJournal: PRAGMA integrity_check is ok and no provider event was journaled twice.
func checkJournal(t *testing.T, db, runID string) {
	t.Helper()
	integrityOK(t, db)
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	evs, err := j.Events(context.Background(), runID, journal.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		if e.ProviderSeq < 0 {
			continue
		}
		k := fmt.Sprintf("%s#%d@%d", e.NodeID, e.Attempt, e.ProviderSeq)
		if seen[k] {
			t.Fatalf("event %s journaled twice", k)
		}
		seen[k] = true
	}
}

// An unsafe chat node killed mid-stream is not replayed on resume: it needs
// attention, with an explanation; --retry runs it.
func TestUnsafeNodeNeedsAttentionAfterCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 3000, TokensPerSecond: 1000})
	cmd, db := startRun(t, dir, fmt.Sprintf(`name: unsafe
profile: ci
providers:
  chat: {kind: openai, base_url: %s, model: sim}
nodes:
  - {id: deploy, prompt: deploy it, side_effects: unsafe}
  - {id: after, needs: [deploy], prompt: 'report {{ output "deploy" }}'}
`, srv.BaseURL()))
	waitStreaming(t, srv, 500) // of 3000: killed mid-stream
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	before := srv.Stats().Requests[sim.EndpointChat]

	code, _, stderr := runCLI(t, "resume", "--db", db, "last")
	if code != exitFailed {
		t.Fatalf("resume exit %d, want 1\n%s", code, stderr)
	}
	if got := srv.Stats().Requests[sim.EndpointChat]; got != before {
		t.Fatalf("the unsafe node was replayed: %d chat requests, was %d", got, before)
	}
	_, out, _ := runCLI(t, "status", "--db", db, "last")
	if !strings.Contains(out, "attention") || !strings.Contains(out, "side effects") || !strings.Contains(out, "--retry deploy") {
		t.Errorf("status does not explain the attention:\n%s", out)
	}
	code, _, stderr = runCLI(t, "resume", "--db", db, "--retry", "deploy", "last")
	if code != exitOK {
		t.Fatalf("resume --retry exit %d\n%s", code, stderr)
	}
	run, got := nodeOutputs(t, db)
	if run.Status != journal.RunCompleted || len(got) != 2 || len(got["deploy"]) < 1000 {
		t.Fatalf("after --retry: run %s, %d nodes completed", run.Status, len(got))
	}
}

// One runner per run: a second noderun on a live run is refused with a clear
// error; once its runner is dead the lock is taken over (the kill -9 tests
// resume such runs).
func TestSecondRunnerIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 2000, TokensPerSecond: 1000})
	first, db := startRun(t, dir, fmt.Sprintf("name: slow\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: long}\n", srv.BaseURL()))
	waitStreaming(t, srv, 1)
	code, _, stderr := runCLI(t, "resume", "--db", db, "last")
	if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("pid %d", first.Process.Pid)) || !strings.Contains(stderr, "one runner per run") {
		t.Fatalf("second runner: exit %d, stderr %q", code, stderr)
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	code, _, stderr = runCLI(t, "resume", "--db", db, "last")
	if code != exitOK {
		t.Fatalf("resume after the first runner died: exit %d\n%s", code, stderr)
	}
}

// events --follow prints a run's events as they are journaled, from another
// process, and returns when the run ends.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 400, TokensPerSecond: 400})
	_, db := startRun(t, dir, fmt.Sprintf("name: f\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: one}\n  - {id: b, needs: [a], prompt: two}\n", srv.BaseURL()))
	waitStreaming(t, srv, 1)
	start := time.Now()
	code, out, stderr := runCLI(t, "events", "--db", db, "--follow", "--kind", "diagnostic", "last")
	if code != exitOK {
		t.Fatalf("events --follow: exit %d\n%s", code, stderr)
	}
	if time.Since(start) < 500*time.Millisecond {
		t.Errorf("returned after %s, before the run (about 2s) could have ended", time.Since(start))
	}
	if !strings.Contains(out, "NR402") || strings.Count(out, "NR401") != 1 {
		t.Errorf("followed events lack the run's start and end:\n%s", out)
	}
}

// startRun writes src as a graph file in dir and starts `noderun run` on it
// in a process of its own, killed when the test ends.
func startRun(t *testing.T, dir, src string) (*exec.Cmd, string) {
	t.Helper()
	cmd, db, _ := startRunOut(t, dir, src)
	return cmd, db
}

// startRunOut is startRun, with the process's stderr.
func startRunOut(t *testing.T, dir, src string) (*exec.Cmd, string, *testkit.Buffer) {
	t.Helper()
	graph := filepath.Join(dir, "graph.yaml")
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "run.db")
	cmd := exec.Command(noderunBinary(t), "run", "--db", db, graph)
	stderr := new(testkit.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, db, stderr
}

// waitStreaming waits until the simulator has generated n tokens.
func waitStreaming(t *testing.T, srv *sim.Server, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().TokensGenerated < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not stream %d tokens within 10s", n)
		}
	}
}

// Issue 25: kill -9 the runner while a gemini node streams, at several
// points of its interaction; `noderun resume` re-attaches to the journaled
// interaction from the journaled cursor (from the start of its stream,
// since the new process never saw an event_id, dropping what the journal
// has) and completes byte-identical to the simulator's text, one
// interaction created, no token regenerated, no event journaled twice.
func TestKill9GeminiNodeThenResume(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	const T = 300
	const prompt = "reason at length"
	want := strings.Join(sim.Text("sim", prompt, 5, T), "")
	marked := 0 // subtests whose killed runner had journaled a resume point
	t.Cleanup(func() {
		if !t.Failed() && marked == 0 {
			t.Error("no killed runner had journaled a mark: the resume from an event_id went untested")
		}
	})
	for _, killAfter := range []int64{1, T / 3, 2 * T / 3} {
		t.Run(fmt.Sprint(killAfter), func(t *testing.T) {
			// The interaction goes on generating while no runner watches: at
			// 400 tokens/s the last kill left it 0.25 s, and under make test's
			// load the resume once came after it had completed, took its
			// output from its status (NR206) and never re-attached. At 100 a
			// second it has a second left.
			srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: T, TokensPerSecond: 100})
			dir := t.TempDir()
			cmd, db := startRun(t, dir, fmt.Sprintf(`name: gemini-crash
profile: ci
providers:
  gem: {kind: gemini, base_url: 'http://%s', model: sim}
nodes:
  - {id: g1, provider: gem, reasoning_effort: low, prompt: %s}
`, srv.Addr(), prompt))
			waitStreaming(t, srv, killAfter)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			mark := lastEvent(t, bin, db, "mark")
			if out, err := exec.Command(bin, "resume", "--db", db, "last").CombinedOutput(); err != nil {
				t.Fatalf("resume: %v\n%s", err, out)
			}
			// The resume re-attached after the event_id the killed runner
			// journaled, not from the stream's start (when it had one).
			from := "from the start"
			if mark != nil {
				marked++
				from = fmt.Sprintf("from event %v (event_id %v)", mark["seq"], mark["token"])
			}
			if re := lastEvent(t, bin, db, "diagnostic", "NR201"); re == nil || !strings.Contains(fmt.Sprint(re["message"]), from) {
				t.Errorf("the resume's re-attach %v, want it %s", re, from)
			}
			run, got := nodeOutputs(t, db)
			if run.Status != journal.RunCompleted || got["g1"] != want {
				t.Fatalf("run %s; output (%d bytes) differs from the simulator's text (%d bytes)", run.Status, len(got["g1"]), len(want))
			}
			checkJournal(t, db, run.ID)
			atts := attempts(t, db, run.ID, "g1")
			for _, a := range atts {
				if a.Ref != atts[0].Ref || !strings.HasPrefix(a.Ref, "v1_") {
					t.Fatalf("attempts %+v: the node was not re-attached to its one interaction", atts)
				}
			}
			if st := srv.Stats(); st.InteractionsCreated != 1 || st.TokensGenerated != T {
				t.Fatalf("sim: %d interactions created, %d tokens generated; want 1 and %d (none regenerated)", st.InteractionsCreated, st.TokensGenerated, T)
			}
		})
	}
}

// lastEvent is the payload of the last event of kind (and code, for a
// diagnostic) in the newest run of db, as `noderun events --json` prints it;
// nil if none.
func lastEvent(t *testing.T, bin, db, kind string, code ...string) map[string]any {
	t.Helper()
	out, err := exec.Command(bin, "events", "last", "--db", db, "--kind", kind, "--json").Output()
	if err != nil {
		t.Fatalf("events --kind %s: %v", kind, err)
	}
	var last map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e struct {
			Code    string         `json:"code"`
			Payload map[string]any `json:"payload"`
		}
		if l == "" || json.Unmarshal([]byte(l), &e) != nil || len(code) > 0 && e.Code != code[0] {
			continue
		}
		last = e.Payload
	}
	return last
}

// Issue 43: kill -9 a runner whose journal's newest mark is past its cursor
// (the interaction had started, its first events carried event_ids, and no
// data had come yet: the model was silent), then resume: the re-attach goes
// on after the mark (the server sees last_event_id), not from the first
// event, and the output is the simulator's, none of it generated twice.
func TestKill9GeminiResumesFromAMarkPastTheCursor(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	const T = 40
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: T, TokensPerSecond: 400, Silence: 3 * time.Second})
	var mu sync.Mutex
	var resumedWith []string // the last_event_id of each stream re-attach the server saw
	target := &url.URL{Scheme: "http", Host: srv.Addr()}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("stream") == "true" {
			mu.Lock()
			resumedWith = append(resumedWith, r.URL.Query().Get("last_event_id"))
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	dir := t.TempDir()
	cmd, db := startRun(t, dir, fmt.Sprintf("name: gemini-mark\nprofile: ci\nproviders:\n  gem: {kind: gemini, base_url: '%s', model: sim}\nnodes:\n  - {id: g1, provider: gem, prompt: think first}\n", front.URL))
	var mark map[string]any
	for deadline := time.Now().Add(10 * time.Second); mark == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the runner journaled no mark while the model was silent")
		}
		if runs(t, db) > 0 { // the run is journaled: events can be asked for
			mark = lastEvent(t, bin, db, "mark")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	mark = lastEvent(t, bin, db, "mark") // the newest: another may have come before the kill
	if deltas := lastEvent(t, bin, db, "delta"); deltas != nil {
		t.Fatalf("data was journaled before the kill (%v): the cursor is not behind the mark, this test tests nothing", deltas)
	}
	mu.Lock()
	before := len(resumedWith) // the killed runner's own re-attaches, if any
	mu.Unlock()
	if out, err := exec.Command(bin, "resume", "--db", db, "last").CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	// The resume's first re-attach goes on after the mark (later ones, while
	// the model is still silent, after the events it read since).
	from := fmt.Sprintf("from event %v (event_id %v)", mark["seq"], mark["token"])
	if diags, _ := exec.Command(bin, "events", "last", "--db", db, "--kind", "diagnostic", "--json").Output(); !strings.Contains(string(diags), from) {
		t.Errorf("no NR201 of the resume says it re-attached %s:\n%s", from, diags)
	}
	mu.Lock()
	seen := slices.Clone(resumedWith[before:])
	mu.Unlock()
	if len(seen) == 0 || seen[0] != fmt.Sprint(mark["token"]) {
		t.Errorf("the server saw the resume re-attach with last_event_id %q, want the first %v", seen, mark["token"])
	}
	run, got := nodeOutputs(t, db)
	if want := strings.Join(sim.Text("sim", "think first", 5, T), ""); run.Status != journal.RunCompleted || got["g1"] != want {
		t.Fatalf("run %s; output %q, want %q", run.Status, got["g1"], want)
	}
	if st := srv.Stats(); st.InteractionsCreated != 1 || st.TokensGenerated != T {
		t.Fatalf("sim: %d interactions, %d tokens; want 1 and %d", st.InteractionsCreated, st.TokensGenerated, T)
	}
}

// runs is how many runs the journal db holds, 0 while it does not exist.
func runs(t *testing.T, db string) int {
	t.Helper()
	n := 0
	withLastRun(db, func(*journal.Journal, journal.Run) { n = 1 })
	return n
}

// withLastRun calls f with the journal db, opened read-only (a live run
// goes on beside it), and its newest run; not at all while there is no
// journal or run yet.
func withLastRun(db string, f func(*journal.Journal, journal.Run)) {
	if _, err := os.Stat(db); err != nil {
		return
	}
	j, err := journal.OpenReadOnly(context.Background(), db)
	if err != nil {
		return
	}
	defer j.Close()
	if rs, err := j.Runs(context.Background(), 1); err == nil && len(rs) > 0 {
		f(j, rs[0])
	}
}
