package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 5's acceptance at the node level: graphs with a `kind: harness`
// provider run the real Codex CLI (npm @openai/codex 0.169.0) against the
// provider simulator on 127.0.0.1, through Run, and the journal is checked.
//
// Codex retries a dropped stream once by itself (stream_max_retries=1) and
// never re-sends a failed request (request_max_retries=0), so two dropped
// requests in a row make it give up with `stream disconnected before
// completion`. The graphs use the profile ci-harness from a profiles file:
// ci's 5 s recovery deadline is shorter than a Codex run or two.

// harnessPrompt is every test node's prompt.
const harnessPrompt = "Write the release notes."

// harnessProfile is the profiles file entry ci-harness: ci's quick backoff,
// with a recovery deadline and reconnect budget that suit Codex.
type harnessProfile struct {
	reconnects int
	deadline   time.Duration
}

// codexRig is one test's Codex harness graph: its own CODEX_HOME and
// working directory, pointed at baseURL.
type codexRig struct {
	g    *Graph
	home string // CODEX_HOME
	work string
}

// codexGraph writes the profiles file and the graph of one node "agent" on a
// Codex harness provider. descriptor is "" for the built-in codex, else a
// descriptor file; nodeExtra is YAML added to the node (indented by 4).
func codexGraph(t *testing.T, baseURL string, prof harnessProfile, descriptor, nodeExtra string) *codexRig {
	t.Helper()
	bin := codexbin.Path(t)
	dir := t.TempDir()
	rig := &codexRig{home: filepath.Join(dir, "codex-home"), work: filepath.Join(dir, "work")}
	for _, d := range []string{rig.home, rig.work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	profiles := harnessProfiles(t, dir, prof)
	if descriptor == "" {
		descriptor = "codex"
	}
	settings := fmt.Sprintf(`model_providers.sim={name="sim",base_url=%q,wire_api="responses",env_key="SIM_KEY",`+
		`stream_max_retries=1,request_max_retries=0,stream_idle_timeout_ms=20000}`, baseURL)
	args, _ := json.Marshal(append([]string{"-c", "model_provider=sim", "-c", settings}, harness.CodexQuietArgs()...))
	env, _ := json.Marshal(map[string]string{"CODEX_HOME": rig.home, "SIM_KEY": "sim-test-key"})
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	src := fmt.Sprintf(`name: harness
profile: ci-harness
profiles: %s
providers:
  agent:
    kind: harness
    harness: %s
    command: %s
    model: sim
    args: %s
    env: %s
    workdir: %s
nodes:
  - id: agent
    prompt: %s
%s`, q(profiles), q(descriptor), q(bin), args, env, q(rig.work), q(harnessPrompt), nodeExtra)
	rig.g = parseTestGraph(t, src)
	t.Cleanup(func() { codexLeftovers(t, rig.home) })
	return rig
}

// codexLeftovers fails if a process with CODEX_HOME=home still runs. Every
// Codex process of a node (and the children it starts) carries it.
// harnessProfiles writes the ci-harness profile (ci's values, with prof's
// reconnects and deadline) into dir and returns the file's path.
func harnessProfiles(t *testing.T, dir string, prof harnessProfile) string {
	t.Helper()
	path := filepath.Join(dir, "profiles.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, `ci-harness:
  retries: 3
  reconnects: %d
  backoff: {base: 5ms, factor: 2, cap: 50ms}
  deadline: %s
  idle_timeout: 2s
  poll_interval: 50ms
  stuck_after: 500ms
  max_retry_after: 2s
  breaker: 3
  breaker_cooldown: 500ms
`, prof.reconnects, prof.deadline), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func codexLeftovers(t *testing.T, home string) {
	t.Helper()
	needle := "\x00CODEX_HOME=" + home + "\x00"
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains("\x00"+string(b), needle) {
			continue
		}
		dir := filepath.Dir(f)
		stat, _ := os.ReadFile(filepath.Join(dir, "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			continue // a zombie runs nothing
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		t.Errorf("a process of the node's Codex is left running: %s: %s", dir, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

func withCode(ds []diagRec, c diagnostics.Code) []diagRec {
	var out []diagRec
	for _, d := range ds {
		if d.Code == c.ID {
			out = append(out, d)
		}
	}
	return out
}

// firstIndex is the position of the first diagnostic with code c, -1 if none.
func firstIndex(ds []diagRec, c diagnostics.Code) int {
	return slices.IndexFunc(ds, func(d diagRec) bool { return d.Code == c.ID })
}

func dumpDiags(ds []diagRec) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  #%d %s %s %v\n", d.Attempt, d.Code, d.Message, d.Attrs)
	}
	return b.String()
}

// rawLines returns the node's journaled harness events (JSONL lines).
func rawLines(t *testing.T, j *journal.Journal, run, node string) []string {
	t.Helper()
	evs, err := j.Events(context.Background(), run, journal.EventFilter{Node: node, Kinds: []string{"raw"}, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Payload))
	}
	return out
}

func attemptsOf(t *testing.T, j *journal.Journal, run, node string) []journal.Attempt {
	t.Helper()
	atts, err := j.Attempts(context.Background(), run, node)
	if err != nil {
		t.Fatal(err)
	}
	return atts
}

// simAnswer is the simulator's answer to a Codex turn whose last user
// message is prompt (default seed and length, model "sim").
func simAnswer(prompt string) string {
	return strings.Join(sim.Text("sim", prompt, 0, sim.DefaultTokens), "")
}

func codexContinuePrompt(t *testing.T) string {
	t.Helper()
	d, err := harness.Builtin("codex")
	if err != nil {
		t.Fatal(err)
	}
	return d.ContinuePrompt
}

// The simulator drops the stream on both requests Codex makes (its first,
// and its one retry): Codex gives up with `stream disconnected before
// completion`, noderun resumes the recorded thread, and the node completes
// with the answer to the continue prompt, in one attempt.
func TestHarnessCodexNodeResumesDroppedThread(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1, 2}, Kind: sim.FaultClose, AfterEvents: 2}}})
	rig := codexGraph(t, srv.BaseURL(), harnessProfile{reconnects: 3, deadline: 60 * time.Second}, "", "")
	j := openJournal(t)
	res := runGraph(t, rig.g, j)
	ds := diagRecs(t, j, res.RunID, "agent")
	n := res.Nodes[0]
	if n.State != journal.NodeCompleted || res.Status != journal.RunCompleted {
		t.Fatalf("node %s (%v), run %s\n%s", n.State, n.Err, res.Status, dumpDiags(ds))
	}
	if want := simAnswer(codexContinuePrompt(t)); n.Output != want {
		t.Errorf("output\n got %q\nwant %q (the simulator's answer to the continue prompt)", n.Output, want)
	}

	// One attempt, carrying the thread id: resumed, never re-run from scratch.
	atts := attemptsOf(t, j, res.RunID, "agent")
	if len(atts) != 1 {
		t.Fatalf("%d attempts, want 1 (a resume is not a retry): %+v", len(atts), atts)
	}
	thread := atts[0].Ref
	if uuid.Validate(thread) != nil || atts[0].Mode != journal.ModeStart || atts[0].Outcome != journal.OutcomeOK {
		t.Errorf("attempt %+v, want a start attempt that ended ok, with the thread id as its ref", atts[0])
	}

	// The journal tells the story under its codes, in order.
	started := withCode(ds, diagnostics.ThreadStarted)
	if len(started) != 2 || started[0].Attrs["thread_id"] != thread || started[1].Attrs["thread_id"] != thread {
		t.Errorf("NR301 %v, want the thread %s reported by the start and by the resume", started, thread)
	}
	retrying := withCode(ds, diagnostics.HarnessRetrying)
	if len(retrying) != 1 || !strings.HasPrefix(retrying[0].Message, "Reconnecting... 1/1") {
		t.Errorf("NR302 %v, want Codex's own retry once", retrying)
	}
	failed := withCode(ds, diagnostics.HarnessFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "stream disconnected before completion") ||
		failed[0].Attrs["thread_id"] != thread || failed[0].Attrs["class"] != string(diagnostics.ClassDisconnect) {
		t.Errorf("NR305 %v, want Codex's failure once, a transport disconnect of thread %s", failed, thread)
	}
	resumed := withCode(ds, diagnostics.ThreadResumed)
	if len(resumed) != 1 || resumed[0].Attrs["thread_id"] != thread {
		t.Errorf("NR303 %v, want one resume of thread %s", resumed, thread)
	}
	order := []diagnostics.Code{diagnostics.ThreadStarted, diagnostics.HarnessRetrying, diagnostics.HarnessFailed,
		diagnostics.DisconnectDetected, diagnostics.ReconnectScheduled, diagnostics.ThreadResumed, diagnostics.Recovered}
	for i := 1; i < len(order); i++ {
		if a, b := firstIndex(ds, order[i-1]), firstIndex(ds, order[i]); a < 0 || b < 0 || a > b {
			t.Errorf("want %s before %s\n%s", order[i-1], order[i], dumpDiags(ds))
		}
	}
	for _, c := range []diagnostics.Code{diagnostics.RetryStarted, diagnostics.FellBackToRetry, diagnostics.ThreadMismatch, diagnostics.NodeFailed} {
		if len(withCode(ds, c)) != 0 {
			t.Errorf("unexpected %s\n%s", c, dumpDiags(ds))
		}
	}

	// The thread id is journaled before anything else of the attempt.
	evs, err := j.Events(context.Background(), res.RunID, journal.EventFilter{Node: "agent", AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	switch i := slices.IndexFunc(evs, func(e journal.Event) bool { return e.Attempt == 1 }); {
	case i < 0:
		t.Error("no event journaled for the attempt")
	case evs[i].Kind != "ref" || string(evs[i].Payload) != thread:
		t.Errorf("the attempt's first event is %s %q, not its thread id", evs[i].Kind, evs[i].Payload)
	}

	// Every Codex event is journaled, from both runs.
	raw := strings.Join(rawLines(t, j, res.RunID, "agent"), "\n")
	for _, want := range []string{`"thread.started"`, `"turn.failed"`, `"turn.completed"`, `"agent_message"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("no %s event journaled", want)
		}
	}
	if got := strings.Count(raw, `"thread_id":"`+thread+`"`); got != 2 {
		t.Errorf("thread.started of %s journaled %d times, want 2 (start and resume)", thread, got)
	}
	if got := srv.Stats().Requests[sim.EndpointResponsesCreate]; got != 3 {
		t.Errorf("%d requests, want 3 (two dropped, one by the resume)", got)
	}
}

// A 401 is deterministic: the node fails at once, with no resume, and says
// that the credentials were rejected.
func TestHarnessCodexNode401(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultStatus, Status: 401}}})
	rig := codexGraph(t, srv.BaseURL(), harnessProfile{reconnects: 3, deadline: 60 * time.Second}, "", "")
	j := openJournal(t)
	res := runGraph(t, rig.g, j)
	ds := diagRecs(t, j, res.RunID, "agent")
	n := res.Nodes[0]
	if n.State != journal.NodeFailed {
		t.Fatalf("node %s, want failed\n%s", n.State, dumpDiags(ds))
	}
	var ne *NodeError
	if !errors.As(n.Err, &ne) || ne.Code != diagnostics.DeterministicError || ne.Class != diagnostics.ClassDeterministic {
		t.Fatalf("error %v, want a deterministic NodeError (NR902)", n.Err)
	}
	msg := n.Err.Error()
	for _, want := range []string{"codex: the provider rejected the credentials (401)", "not retried"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	// A harness provider has no api_key_env (the graph rejects it): its key
	// is in the provider's env, under the model provider's env_key.
	if strings.Contains(msg, "api_key_env") {
		t.Errorf("the error points a harness node at api_key_env, which a harness provider cannot have:\n%s", msg)
	}
	if len(withCode(ds, diagnostics.ThreadResumed)) != 0 || len(withCode(ds, diagnostics.ReconnectScheduled)) != 0 {
		t.Errorf("a 401 was resumed\n%s", dumpDiags(ds))
	}
	if f := withCode(ds, diagnostics.HarnessFailed); len(f) != 1 || f[0].Attrs["class"] != string(diagnostics.ClassDeterministic) {
		t.Errorf("NR305 %v, want Codex's failure once, deterministic", f)
	}
	if len(withCode(ds, diagnostics.DeterministicError)) == 0 {
		t.Errorf("no NR902\n%s", dumpDiags(ds))
	}
	if atts := attemptsOf(t, j, res.RunID, "agent"); len(atts) != 1 || atts[0].ErrClass != diagnostics.ClassDeterministic {
		t.Errorf("attempts %+v, want one, deterministic", atts)
	}
	// Codex counts a 401 against stream_max_retries=1: two requests, no more from noderun.
	if got := srv.Stats().Requests[sim.EndpointResponsesCreate]; got != 2 {
		t.Errorf("%d requests, want 2 (Codex's own two, nothing from noderun)", got)
	}
}

// A resume that does not continue the recorded thread fails the node with
// NR304, never silently carries on in another thread.
func TestHarnessCodexNodeThreadMismatch(t *testing.T) {
	t.Parallel()
	drops := []sim.Fault{{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1, 2}, Kind: sim.FaultClose, AfterEvents: 2}}
	prof := harnessProfile{reconnects: 3, deadline: 60 * time.Second}

	// Codex takes a resume argument that is not a UUID as a thread name and,
	// finding no such thread, silently starts a new one. A descriptor derived
	// from the built-in one, whose resume passes "x<thread id>", makes the
	// real Codex do exactly that: the resume comes back with another thread.
	t.Run("new thread", func(t *testing.T) {
		t.Parallel()
		cpus.Take(t)
		srv := simtest.Start(t, sim.Config{Faults: drops})
		rig := codexGraph(t, srv.BaseURL(), prof, newThreadDescriptor(t), "")
		j := openJournal(t)
		res := runGraph(t, rig.g, j)
		ds := diagRecs(t, j, res.RunID, "agent")
		thread := checkMismatch(t, j, res, ds)
		mm := withCode(ds, diagnostics.ThreadMismatch)
		got, _ := mm[0].Attrs["got"].(string)
		if mm[0].Attrs["want"] != thread || uuid.Validate(got) != nil || got == thread ||
			mm[0].Message != fmt.Sprintf("resume came back with thread %s, not %s", got, thread) {
			t.Errorf("NR304 %+v, want the recorded thread %s and the new one", mm[0], thread)
		}
		if msg := res.Nodes[0].Err.Error(); !strings.Contains(msg, "resume came back with thread "+got+", not "+thread) ||
			!strings.Contains(msg, "started a new thread instead of continuing") {
			t.Errorf("error does not say the resume came back with another thread:\n%s", msg)
		}
	})

	// The thread's rollout disappears from CODEX_HOME (wiped, or another
	// CODEX_HOME) between the start and the resume: Codex says it has no such
	// thread. The simulator is mounted behind a hook that deletes
	// CODEX_HOME/sessions when Codex's own retry (request 2) arrives, that is
	// before that request is dropped, so before Codex gives up and long
	// before noderun's resume starts: no race.
	t.Run("rollout gone", func(t *testing.T) {
		t.Parallel()
		soak(t, "new thread (NR304 from the same resume)")
		cpus.Take(t)
		s := sim.New(sim.Config{Faults: drops})
		t.Cleanup(func() { _ = s.Close() })
		var sessions atomic.Pointer[string]
		var creates atomic.Int64
		deleted := make(chan error, 1)
		hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/responses" && creates.Add(1) == 2 {
				deleted <- os.RemoveAll(*sessions.Load())
			}
			s.Handler().ServeHTTP(w, r)
		})
		front := httptest.NewServer(hook)
		t.Cleanup(front.Close)
		rig := codexGraph(t, front.URL+"/v1", prof, "", "")
		sessions.Store(new(filepath.Join(rig.home, "sessions")))
		j := openJournal(t)
		res := runGraph(t, rig.g, j)
		ds := diagRecs(t, j, res.RunID, "agent")
		select {
		case err := <-deleted:
			if err != nil {
				t.Fatalf("deleting the sessions: %v", err)
			}
		default:
			t.Fatalf("Codex sent %d requests: the sessions were never deleted", creates.Load())
		}
		thread := checkMismatch(t, j, res, ds)
		mm := withCode(ds, diagnostics.ThreadMismatch)
		if mm[0].Attrs["want"] != thread || !strings.Contains(mm[0].Message, "resume found no thread "+thread) ||
			!strings.Contains(mm[0].Message, "no rollout found") {
			t.Errorf("NR304 %+v, want: no thread %s", mm[0], thread)
		}
		if msg := res.Nodes[0].Err.Error(); !strings.Contains(msg, "resume found no thread "+thread) {
			t.Errorf("error does not say the thread was not found:\n%s", msg)
		}
	})
}

// newThreadDescriptor writes the built-in Codex descriptor with its resume
// argv's thread id turned into a name no thread has ("x<id>").
func newThreadDescriptor(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "provider", "harness", "descriptors", "codex.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "  - \"{thread_id}\"\n", "  - \"x{thread_id}\"\n"
	if n := strings.Count(string(src), from); n != 1 {
		t.Fatalf("the codex descriptor has %d resume thread id items %q, want 1: update newThreadDescriptor", n, from)
	}
	path := filepath.Join(t.TempDir(), "codex-new-thread.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(src), from, to, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkMismatch checks what both mismatch cases share and returns the
// recorded thread id: the node failed with NR304 after one resume, in one
// attempt that keeps the thread id it started with.
func checkMismatch(t *testing.T, j *journal.Journal, res *Result, ds []diagRec) string {
	t.Helper()
	n := res.Nodes[0]
	if n.State != journal.NodeFailed {
		t.Fatalf("node %s (output %q), want failed\n%s", n.State, n.Output, dumpDiags(ds))
	}
	var ne *NodeError
	if !errors.As(n.Err, &ne) || ne.Class != diagnostics.ClassDeterministic {
		t.Fatalf("error %v, want a deterministic NodeError", n.Err)
	}
	var me *harness.MismatchError
	if !errors.As(n.Err, &me) {
		t.Errorf("error %v does not wrap a *harness.MismatchError", n.Err)
	}
	atts := attemptsOf(t, j, res.RunID, "agent")
	if len(atts) != 1 || uuid.Validate(atts[0].Ref) != nil || atts[0].Outcome != journal.OutcomeError {
		t.Fatalf("attempts %+v, want one that failed, with the thread id", atts)
	}
	thread := atts[0].Ref
	if me != nil && me.Want != thread {
		t.Errorf("mismatch wants %s, the attempt recorded %s", me.Want, thread)
	}
	if got := withCode(ds, diagnostics.ThreadMismatch); len(got) != 1 {
		t.Fatalf("%d NR304, want 1\n%s", len(got), dumpDiags(ds))
	}
	if r := withCode(ds, diagnostics.ThreadResumed); len(r) != 1 || r[0].Attrs["thread_id"] != thread {
		t.Errorf("NR303 %v, want one resume of %s", r, thread)
	}
	if firstIndex(ds, diagnostics.ThreadResumed) > firstIndex(ds, diagnostics.ThreadMismatch) {
		t.Errorf("NR304 before the resume\n%s", dumpDiags(ds))
	}
	// The other thread is not the node's: its id never replaces the recorded one.
	if s := withCode(ds, diagnostics.ThreadStarted); len(s) != 1 || s[0].Attrs["thread_id"] != thread {
		t.Errorf("NR301 %v, want only the recorded thread %s", s, thread)
	}
	if len(withCode(ds, diagnostics.Recovered)) != 0 || len(withCode(ds, diagnostics.RetryStarted)) != 0 {
		t.Errorf("a mismatch was recovered from or retried\n%s", dumpDiags(ds))
	}
	return thread
}

// A provider that never recovers: the resumes are bounded by the profile's
// reconnect budget, or cut by its recovery deadline, whichever comes first.
func TestHarnessCodexNodeResumesAreBounded(t *testing.T) {
	t.Parallel()
	// Every request is dropped: each Codex run gives up after two, quickly,
	// so the reconnect budget (2) runs out long before the deadline (60 s).
	// The node is then not retried from scratch: by default a harness node
	// is unsafe (NR905); when it may be replayed but has no retries, its
	// budget is spent (NR903).
	for _, tc := range []struct {
		name      string
		nodeExtra string
		code      diagnostics.Code
		reason    string
	}{
		{"unsafe", "", diagnostics.UnsafeReplayRefused, "the reconnect budget is spent"},
		{"idempotent", "    side_effects: idempotent\n    retries: 0\n", diagnostics.BudgetExhausted, "budget is spent"},
	} {
		t.Run("reconnects/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.code != diagnostics.UnsafeReplayRefused {
				soak(t, "reconnects/unsafe (the same resumes, until the same budget)")
			}
			cpus.Take(t)
			srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
				{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultClose, AfterEvents: 2}}})
			prof := harnessProfile{reconnects: 2, deadline: 60 * time.Second}
			rig := codexGraph(t, srv.BaseURL(), prof, "", tc.nodeExtra)
			j := openJournal(t)
			res := runGraph(t, rig.g, j)
			ds := diagRecs(t, j, res.RunID, "agent")
			ne := checkBounded(t, j, res, ds, prof, tc.code)
			if got := len(withCode(ds, diagnostics.ThreadResumed)); got != prof.reconnects {
				t.Errorf("%d resumes, want the whole budget of %d\n%s", got, prof.reconnects, dumpDiags(ds))
			}
			if !strings.Contains(ne.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", ne.Reason, tc.reason)
			}
			if got, want := srv.Stats().Requests[sim.EndpointResponsesCreate], int64(2*(1+prof.reconnects)); got != want {
				t.Errorf("%d requests, want %d (two per Codex run)", got, want)
			}
		})
	}

	// An outage: Codex waits for the network and is stopped after two of its
	// notices (~5 s), so the recovery deadline (8 s) ends it first, with a
	// large reconnect budget left.
	t.Run("deadline", func(t *testing.T) {
		t.Parallel() // no CPU slot: Codex mostly waits for the network here
		soak(t, "TestFailedNodeLeavesNothingRunning/deadline (the recovery deadline ends a node) and reconnects/unsafe")
		srv := simtest.Start(t, sim.Config{})
		if err := srv.SetOutage(true); err != nil {
			t.Fatal(err)
		}
		prof := harnessProfile{reconnects: 50, deadline: 8 * time.Second}
		rig := codexGraph(t, srv.BaseURL(), prof, "", "")
		j := openJournal(t)
		res := runGraph(t, rig.g, j)
		ds := diagRecs(t, j, res.RunID, "agent")
		checkBounded(t, j, res, ds, prof, diagnostics.DeadlineExceeded)
		if got := len(withCode(ds, diagnostics.ThreadResumed)); got == 0 || got >= prof.reconnects {
			t.Errorf("%d resumes, want some, cut by the deadline before the budget of %d\n%s", got, prof.reconnects, dumpDiags(ds))
		}
	})
}

// checkBounded checks a node that failed with code after resumes that never
// helped: one attempt, at most the reconnect budget of resumes, all of the
// recorded thread, and the failure within the deadline of the first one.
func checkBounded(t *testing.T, j *journal.Journal, res *Result, ds []diagRec, prof harnessProfile, code diagnostics.Code) *NodeError {
	t.Helper()
	n := res.Nodes[0]
	var ne *NodeError
	if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) {
		t.Fatalf("node %s (%v), want failed with a NodeError\n%s", n.State, n.Err, dumpDiags(ds))
	}
	if ne.Code != code {
		t.Errorf("failed with %s (%s), want %s\n%s", ne.Code, ne.Reason, code, dumpDiags(ds))
	}
	if len(withCode(ds, code)) != 1 || len(withCode(ds, diagnostics.NodeFailed)) != 1 {
		t.Errorf("want %s and NR901 journaled once\n%s", code, dumpDiags(ds))
	}
	atts := attemptsOf(t, j, res.RunID, "agent")
	if len(atts) != 1 || uuid.Validate(atts[0].Ref) != nil {
		t.Fatalf("attempts %+v, want one, with the thread id", atts)
	}
	resumed := withCode(ds, diagnostics.ThreadResumed)
	if len(resumed) > prof.reconnects {
		t.Errorf("%d resumes, more than the profile's %d", len(resumed), prof.reconnects)
	}
	for _, r := range resumed {
		if r.Attrs["thread_id"] != atts[0].Ref {
			t.Errorf("resumed %v, not the recorded thread %s", r.Attrs["thread_id"], atts[0].Ref)
		}
	}
	failed := withCode(ds, diagnostics.HarnessFailed)
	if len(failed) == 0 {
		t.Fatalf("no NR305\n%s", dumpDiags(ds))
	}
	for _, f := range failed {
		if f.Attrs["class"] != string(diagnostics.ClassDisconnect) {
			t.Errorf("NR305 %q of class %v, want transport", f.Message, f.Attrs["class"])
		}
	}
	// The recovery deadline runs from the first failure; a step cut by it
	// still has to stop Codex (SIGTERM, SIGKILL 3 s later).
	end := withCode(ds, diagnostics.NodeFailed)[0].Time
	took := end.Sub(failed[0].Time)
	if limit := prof.deadline + 3500*time.Millisecond; took > limit {
		t.Errorf("failed %s after the first failure, past the deadline %s (+3.5 s to stop Codex)", took, prof.deadline)
	}
	t.Logf("%d resume(s); failed with %s %s after the first failure (deadline %s)", len(resumed), ne.Code.ID,
		took.Round(time.Millisecond), prof.deadline)
	return ne
}
