package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/graph"
)

// Issue 16's acceptance at the node level: graphs with a `kind: harness`
// provider run the real Claude Code (npm @anthropic-ai/claude-code 2.1.328)
// and Gemini CLI (npm @google/gemini-cli 0.61.0) against the simulator's
// Anthropic Messages and Gemini endpoints on 127.0.0.1, through Run, with
// the built-in descriptors' own retry bounds (Claude Code: one retry, no
// non-streaming fallback; Gemini CLI: none).

// agentRig is one test's agent harness graph.
type agentRig struct {
	g     *Graph
	state string // the provider's state_dir: every node's session store
	work  string
}

// agentGraph writes the profiles file and a graph of one node "agent" on the
// built-in harness name (claude or gemini) pointed at the simulator at
// base ("http://127.0.0.1:PORT", the simulator's root).
func agentGraph(t *testing.T, name, base string, prof harnessProfile) *agentRig {
	t.Helper()
	var bin string
	env := map[string]string{}
	switch name {
	case "claude":
		bin = codexbin.Claude(t)
		env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"] = base, "sim-test-key"
	case "gemini":
		bin = codexbin.Gemini(t)
		env["GOOGLE_GEMINI_BASE_URL"], env["GEMINI_API_KEY"] = base, "sim-test-key"
		env["TMPDIR"] = t.TempDir() // its error reports
	}
	dir := t.TempDir()
	rig := &agentRig{state: filepath.Join(dir, "state"), work: filepath.Join(dir, "work")}
	if err := os.Mkdir(rig.work, 0o755); err != nil {
		t.Fatal(err)
	}
	profiles := harnessProfiles(t, dir, prof)
	envJSON, _ := json.Marshal(env)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	rig.g = parseTestGraph(t, fmt.Sprintf(`name: agents
profile: ci-harness
profiles: %s
providers:
  agent:
    kind: harness
    harness: %s
    command: %s
    model: sim
    env: %s
    workdir: %s
    state_dir: %s
nodes:
  - id: agent
    prompt: %s
`, q(profiles), name, q(bin), envJSON, q(rig.work), q(rig.state), q(harnessPrompt)))
	t.Cleanup(func() { agentLeftovers(t, rig.state) })
	return rig
}

// run runs the rig's graph with a new journal and returns it, the result
// and the node's diagnostics.
func (rig *agentRig) run(t *testing.T) (*journal.Journal, *Result, []diagRec) {
	t.Helper()
	j := openJournal(t)
	// Not runGraph's minute: a node that runs the CLI a dozen times
	// (TestHarnessGeminiNodeOutageIsBounded/retries) has taken more on a
	// loaded machine. The bounds a test checks are its profile's, within
	// this.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, rig.g, Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	return j, res, diagRecs(t, j, res.RunID, "agent")
}

// checkCompleted fails unless the graph's only node completed with want.
func checkCompleted(t *testing.T, res *Result, ds []diagRec, want string) {
	t.Helper()
	n := res.Nodes[0]
	if n.State != journal.NodeCompleted {
		t.Fatalf("node %s (%v)\n%s", n.State, n.Err, dumpDiags(ds))
	}
	if n.Output != want {
		t.Errorf("output\n got %q\nwant %q", n.Output, want)
	}
}

// agentLeftovers fails if a process whose environment names the state dir
// (CLAUDE_CONFIG_DIR, GEMINI_CLI_HOME) still runs.
func agentLeftovers(t *testing.T, state string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "="+state+"/") {
			continue
		}
		dir := filepath.Dir(f)
		stat, _ := os.ReadFile(filepath.Join(dir, "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		t.Errorf("a process of the node's agent CLI is left running: %s: %s", dir, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

func continuePrompt(t *testing.T, name string) string {
	t.Helper()
	d, err := harness.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return d.ContinuePrompt
}

// simRoot is the simulator's root URL, which Claude Code and Gemini CLI
// take as their base URL.
func simRoot(s *sim.Server) string { return "http://" + s.Addr() }

var agentProf = harnessProfile{reconnects: 3, deadline: 60 * time.Second}

func TestHarnessAgentNodeCleanTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, endpoint string }{
		{"claude", sim.EndpointMessages},
		{"gemini", sim.EndpointGeminiStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cpus.Take(t)
			srv := simtest.Start(t, sim.Config{})
			rig := agentGraph(t, tc.name, simRoot(srv), agentProf)
			j, res, ds := rig.run(t)
			checkCompleted(t, res, ds, simAnswer(harnessPrompt))
			atts := attemptsOf(t, j, res.RunID, "agent")
			if len(atts) != 1 || uuid.Validate(atts[0].Ref) != nil || atts[0].Outcome != journal.OutcomeOK {
				t.Errorf("attempts %+v, want one that ended ok, with the session id", atts)
			}
			if s := withCode(ds, diagnostics.ThreadStarted); len(s) != 1 || s[0].Attrs["thread_id"] != atts[0].Ref {
				t.Errorf("NR301 %v, want the session %s", s, atts[0].Ref)
			}
			if got := srv.Stats().Requests[tc.endpoint]; got != 1 {
				t.Errorf("%d requests, want 1", got)
			}
			if _, err := os.Stat(rig.state); err != nil {
				t.Errorf("the node's session store: %v", err)
			}
		})
	}
}

// Claude Code retries a cut stream once (CLAUDE_CODE_MAX_RETRIES=1) and
// then gives up without its non-streaming fallback; noderun resumes the
// same session and the node completes with the answer to the continue prompt.
func TestHarnessClaudeNodeResumesCutSession(t *testing.T) {
	t.Parallel()
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			if kind == sim.FaultReset {
				soak(t, "the close row: the same resume of the same session")
			}
			cpus.Take(t)
			srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
				{Endpoint: sim.EndpointMessages, Requests: []int{1, 2}, Kind: kind, AfterEvents: 4}}})
			rig := agentGraph(t, "claude", simRoot(srv), agentProf)
			j, res, ds := rig.run(t)
			// The cut turn's answer is not kept in the session, so the resume
			// sends the original prompt and the continue prompt as one user
			// message (Claude Code ends the first block with a newline): the
			// answer is the answer to both.
			checkCompleted(t, res, ds, simAnswer(harnessPrompt+"\n\n"+continuePrompt(t, "claude")))
			atts := attemptsOf(t, j, res.RunID, "agent")
			if len(atts) != 1 || atts[0].Outcome != journal.OutcomeOK {
				t.Fatalf("attempts %+v, want one (a resume is not a retry)", atts)
			}
			session := atts[0].Ref
			started := withCode(ds, diagnostics.ThreadStarted)
			if len(started) != 2 || started[0].Attrs["thread_id"] != session || started[1].Attrs["thread_id"] != session {
				t.Errorf("NR301 %v, want the session %s from the start and from the resume", started, session)
			}
			if r := withCode(ds, diagnostics.HarnessRetrying); len(r) != 1 || !strings.HasPrefix(r[0].Message, "API retry 1/1") {
				t.Errorf("NR302 %v, want Claude Code's own retry once", r)
			}
			cause := map[sim.FaultKind]string{sim.FaultClose: "StreamTruncated", sim.FaultReset: "ECONNRESET"}[kind]
			failed := withCode(ds, diagnostics.HarnessFailed)
			if len(failed) != 1 || !strings.Contains(failed[0].Message, "Connection to the API was lost ("+cause+")") ||
				failed[0].Attrs["class"] != string(diagnostics.ClassDisconnect) {
				t.Errorf("NR305 %v, want Claude Code's failure once, a transport disconnect (%s)", failed, cause)
			}
			if r := withCode(ds, diagnostics.ThreadResumed); len(r) != 1 || r[0].Attrs["thread_id"] != session {
				t.Errorf("NR303 %v, want one resume of %s", r, session)
			}
			order := []diagnostics.Code{diagnostics.ThreadStarted, diagnostics.HarnessRetrying, diagnostics.HarnessFailed,
				diagnostics.ThreadResumed, diagnostics.Recovered}
			for i := 1; i < len(order); i++ {
				if a, b := firstIndex(ds, order[i-1]), firstIndex(ds, order[i]); a < 0 || b < 0 || a > b {
					t.Errorf("want %s before %s\n%s", order[i-1], order[i], dumpDiags(ds))
				}
			}
			// The session id is journaled before anything else of the attempt.
			evs, err := j.Events(context.Background(), res.RunID, journal.EventFilter{Node: "agent", AfterSeq: -1})
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(evs, func(e journal.Event) bool { return e.Attempt == 1 }); i < 0 ||
				evs[i].Kind != "ref" || string(evs[i].Payload) != session {
				t.Errorf("the attempt's first event is not its session id %s", session)
			}
			raw := strings.Join(rawLines(t, j, res.RunID, "agent"), "\n")
			if got := strings.Count(raw, `"subtype":"init"`); got != 2 {
				t.Errorf("%d system/init events journaled, want 2 (start and resume)", got)
			}
			if got := srv.Stats().Requests[sim.EndpointMessages]; got != 3 {
				t.Errorf("%d requests, want 3 (two cut, one by the resume)", got)
			}
		})
	}
}

// A 401 is deterministic: the node fails without a resume and says the
// credentials were rejected.
func TestHarnessAgentNode401(t *testing.T) {
	t.Parallel()
	soak(t, "TestHarnessCodexNode401 (a harness's 401 fails at once, not resumed) and provider/harness's TestFakeClaudeFailures")
	for _, tc := range []struct{ name, endpoint, says string }{
		{"claude", sim.EndpointMessages, "claude: the provider rejected the credentials (401)"},
		{"gemini", sim.EndpointGeminiStream, "gemini: the provider rejected the credentials (401)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cpus.Take(t)
			srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{{Endpoint: tc.endpoint, Kind: sim.FaultStatus, Status: 401}}})
			rig := agentGraph(t, tc.name, simRoot(srv), agentProf)
			_, res, ds := rig.run(t)
			n := res.Nodes[0]
			var ne *NodeError
			if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) || ne.Class != diagnostics.ClassDeterministic {
				t.Fatalf("node %s (%v), want failed, deterministic\n%s", n.State, n.Err, dumpDiags(ds))
			}
			if msg := n.Err.Error(); !strings.Contains(msg, tc.says) {
				t.Errorf("error does not say %q:\n%s", tc.says, msg)
			}
			if len(withCode(ds, diagnostics.ThreadResumed)) != 0 {
				t.Errorf("a 401 was resumed\n%s", dumpDiags(ds))
			}
			t.Logf("%d requests; %v", srv.Stats().Requests[tc.endpoint], n.Err)
		})
	}
}

// The session disappears from the node's store between the start and the
// resume (wiped, or another CLAUDE_CONFIG_DIR): the resume finds no such
// session and the node fails with NR304, never carries on in a new one.
// Claude Code writes its transcript until it exits, so the store is deleted
// by a wrapper around the real CLI just before a resume runs it: no race.
func TestHarnessClaudeNodeSessionGone(t *testing.T) {
	t.Parallel()
	soak(t, "provider/harness's TestFakeClaudeResumeNoSession (Claude Code's answer) and TestHarnessCodexNodeThreadMismatch/new_thread (NR304 through Run)")
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
		{Endpoint: sim.EndpointMessages, Requests: []int{1, 2}, Kind: sim.FaultClose, AfterEvents: 4}}})
	rig := agentGraph(t, "claude", simRoot(srv), agentProf)
	wrapper := filepath.Join(t.TempDir(), "claude-wiped")
	script := fmt.Sprintf("#!/bin/sh\ncase \" $* \" in *\" --resume \"*) rm -rf \"$CLAUDE_CONFIG_DIR/projects\";; esac\nexec %s \"$@\"\n",
		codexbin.Claude(t))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rig.g.Providers["agent"].Command = wrapper
	j, res, ds := rig.run(t)
	checkAgentMismatch(t, j, res, ds, "No conversation found with session ID")
	if got := srv.Stats().Requests[sim.EndpointMessages]; got != 2 {
		t.Errorf("%d requests, want 2 (the resume sends none)", got)
	}
}

// Gemini CLI rolls a failed turn back out of its session record, so a
// session whose only turn was cut has nothing to resume: `--resume <id>`
// answers "No previous sessions found for this project" although the
// record is in the node's store. noderun resumes the recorded session
// first, finds it dropped (NR306), sets the record aside and starts the
// prompt again under the same session id (`--session-id`), as a retry
// (NR205): the record shows no tool call, so even the harness default
// side_effects: unsafe allows it. The node completes with the answer to the
// prompt.
func TestHarnessGeminiNodeRestartsDroppedSession(t *testing.T) {
	t.Parallel()
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			if kind == sim.FaultReset {
				soak(t, "the close row: the same restart of the same dropped session")
			}
			cpus.Take(t)
			srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
				{Endpoint: sim.EndpointGeminiStream, Requests: []int{1}, Kind: kind, AfterEvents: 3}}})
			rig := agentGraph(t, "gemini", simRoot(srv), agentProf)
			j, res, ds := rig.run(t)
			checkCompleted(t, res, ds, simAnswer(harnessPrompt))
			checkGeminiRestart(t, j, res, ds, rig, false)
			if got := srv.Stats().Requests[sim.EndpointGeminiStream]; got != 2 {
				t.Errorf("%d requests, want 2 (the cut one and the restart; the resume sends none)", got)
			}
		})
	}
}

// checkGeminiRestart checks a node whose Gemini session was cut in its only
// turn, found dropped by a resume, and started again under its id.
func checkGeminiRestart(t *testing.T, j *journal.Journal, res *Result, ds []diagRec, rig *agentRig, effects bool) {
	t.Helper()
	atts := attemptsOf(t, j, res.RunID, "agent")
	if len(atts) != 2 || uuid.Validate(atts[0].Ref) != nil || atts[1].Ref != atts[0].Ref || atts[1].Outcome != journal.OutcomeOK {
		t.Fatalf("attempts %+v, want two under one session id, the second ok", atts)
	}
	session := atts[0].Ref
	started := withCode(ds, diagnostics.ThreadStarted)
	if len(started) != 2 || started[0].Attrs["thread_id"] != session || started[1].Attrs["thread_id"] != session ||
		!strings.Contains(started[1].Message, "started again under its own id") {
		t.Errorf("NR301 %v, want the session %s from the start and from the restart", started, session)
	}
	failed := withCode(ds, diagnostics.HarnessFailed)
	if len(failed) != 1 || failed[0].Attrs["class"] != string(diagnostics.ClassDisconnect) {
		t.Errorf("NR305 %v, want Gemini CLI's failure once, a transport disconnect", failed)
	}
	if r := withCode(ds, diagnostics.ThreadResumed); len(r) != 1 || r[0].Attrs["thread_id"] != session {
		t.Errorf("NR303 %v, want one resume of %s", r, session)
	}
	dropped := withCode(ds, diagnostics.ThreadDropped)
	if len(dropped) != 1 || dropped[0].Attrs["thread_id"] != session || dropped[0].Attrs["effects"] != effects ||
		!strings.Contains(dropped[0].Message, "No previous sessions found for this project") {
		t.Errorf("NR306 %v, want session %s dropped once (effects %v)", dropped, session, effects)
	}
	// The retry repeats nothing unless the record showed a tool call.
	if r := withCode(ds, diagnostics.FellBackToRetry); len(r) != 1 || r[0].Attrs["replays"] != effects {
		t.Errorf("NR205 %v, want one retry (replays: %v)", r, effects)
	}
	if len(withCode(ds, diagnostics.ThreadMismatch)) != 0 || len(withCode(ds, diagnostics.Recovered)) != 1 {
		t.Errorf("want no NR304 and one NR108\n%s", dumpDiags(ds))
	}
	order := []diagnostics.Code{diagnostics.ThreadStarted, diagnostics.HarnessFailed, diagnostics.ThreadResumed,
		diagnostics.ThreadDropped, diagnostics.FellBackToRetry, diagnostics.Recovered}
	for i := 1; i < len(order); i++ {
		if a, b := firstIndex(ds, order[i-1]), firstIndex(ds, order[i]); a < 0 || b < 0 || a > b {
			t.Errorf("want %s before %s\n%s", order[i-1], order[i], dumpDiags(ds))
		}
	}
	node := filepath.Join(rig.state, "gemini", "agent")
	aside, _ := filepath.Glob(filepath.Join(node, "noderun-dropped", "session-*.jsonl"))
	live, _ := filepath.Glob(filepath.Join(node, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	if len(aside) != 1 || len(live) != 1 {
		t.Errorf("set aside %v, live %v: want the dropped record set aside and the restarted one live", aside, live)
	}
	if _, err := os.Stat(filepath.Join(node, "noderun-restart")); !os.IsNotExist(err) {
		t.Errorf("the restart marker is left behind: %v", err)
	}
}

// geminiWrapper is a command that runs the real Gemini CLI after running
// script (sh) whenever it is called to resume (--resume): it changes the
// node's session store the way nothing in the simulator can.
func geminiWrapper(t *testing.T, script string) string {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "gemini-wrapped")
	body := fmt.Sprintf("#!/bin/sh\ncase \" $* \" in *\" --resume \"*) %s;; esac\nexec %s \"$@\"\n", script, codexbin.Gemini(t))
	if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// A dropped session whose record shows a tool call (appended, then rolled
// back, as Gemini CLI records an interrupted turn that had called a tool)
// may have had effects: a side_effects: unsafe node is not started again
// (NR905); an idempotent one is.
func TestHarnessGeminiNodeDroppedAfterToolCall(t *testing.T) {
	t.Parallel()
	soak(t, "provider/harness's TestFakeGeminiDroppedSessionRestarts (a dropped record with and without a tool call) and TestHarnessGeminiNodeRestartsDroppedSession/close")
	// Appended to the record before the resume runs.
	const toolCall = `{"id":"nr-tool-1","timestamp":"2026-11-30T00:00:00.000Z","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"write_file","args":{},"status":"success"}]}`
	const rollback = `{"$set":{"messages":[]}}`
	script := fmt.Sprintf(`for f in "$GEMINI_CLI_HOME"/.gemini/tmp/*/chats/session-*.jsonl; do printf '%%s\n%%s\n' '%s' '%s' >> "$f"; done`, toolCall, rollback)
	for _, side := range []graph.SideEffects{graph.SideUnsafe, graph.SideIdempotent} {
		t.Run(string(side), func(t *testing.T) {
			t.Parallel()
			cpus.TakeFirst(t) // among the longest: never last
			srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
				{Endpoint: sim.EndpointGeminiStream, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 3}}})
			rig := agentGraph(t, "gemini", simRoot(srv), agentProf)
			rig.g.Providers["agent"].Command = geminiWrapper(t, script)
			rig.g.Nodes[0].SideEffects = side
			j, res, ds := rig.run(t)
			n := res.Nodes[0]
			if side == graph.SideIdempotent {
				if n.State != journal.NodeCompleted || n.Output != simAnswer(harnessPrompt) {
					t.Fatalf("node %s (%v), output %q\n%s", n.State, n.Err, n.Output, dumpDiags(ds))
				}
				checkGeminiRestart(t, j, res, ds, rig, true)
				return
			}
			var ne *NodeError
			if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) || ne.Code != diagnostics.UnsafeReplayRefused {
				t.Fatalf("node %s (%v), want failed with NR905\n%s", n.State, n.Err, dumpDiags(ds))
			}
			if d := withCode(ds, diagnostics.ThreadDropped); len(d) != 1 || d[0].Attrs["effects"] != true ||
				!strings.Contains(d[0].Message, "the turn may have had effects") {
				t.Errorf("NR306 %v, want the dropped session with effects", d)
			}
			if atts := attemptsOf(t, j, res.RunID, "agent"); len(atts) != 1 {
				t.Errorf("attempts %+v, want one: nothing is started again", atts)
			}
			if got := srv.Stats().Requests[sim.EndpointGeminiStream]; got != 1 {
				t.Errorf("%d requests, want 1", got)
			}
		})
	}
}

// The session's record disappears from the node's store before the resume
// (wiped, or another GEMINI_CLI_HOME): Gemini CLI says it has no sessions,
// nothing in the store records the id, and the node fails with NR304 —
// never carries on in a new session.
func TestHarnessGeminiNodeSessionGone(t *testing.T) {
	t.Parallel()
	soak(t, "provider/harness's fake Gemini CLI tests (its \"No previous sessions found\") and TestHarnessCodexNodeThreadMismatch/new_thread (NR304 through Run)")
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
		{Endpoint: sim.EndpointGeminiStream, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 3}}})
	rig := agentGraph(t, "gemini", simRoot(srv), agentProf)
	rig.g.Providers["agent"].Command = geminiWrapper(t, `rm -rf "$GEMINI_CLI_HOME/.gemini/tmp"`)
	j, res, ds := rig.run(t)
	checkAgentMismatch(t, j, res, ds, "No previous sessions found for this project")
	if len(withCode(ds, diagnostics.ThreadDropped)) != 0 {
		t.Errorf("a session with no record was taken as dropped\n%s", dumpDiags(ds))
	}
	if got := srv.Stats().Requests[sim.EndpointGeminiStream]; got != 1 {
		t.Errorf("%d requests, want 1 (the resume sends none)", got)
	}
}

// A provider that never comes back: every Gemini CLI run fails, each
// session is found dropped and started again, and the retry budget (or
// the recovery deadline) ends it.
func TestHarnessGeminiNodeOutageIsBounded(t *testing.T) {
	t.Parallel()
	soak(t, "TestHarnessGeminiNodeRestartsDroppedSession/close (the restart each cycle makes) and TestHarnessCodexNodeResumesAreBounded/reconnects/unsafe (a harness's recovery bounded)")
	for _, tc := range []struct {
		name string
		prof harnessProfile
		code diagnostics.Code
	}{
		{"retries", harnessProfile{reconnects: 10, deadline: 120 * time.Second}, diagnostics.BudgetExhausted},
		// Every cycle is a resume (which finds the session dropped) and a
		// retry: the reconnect count runs out first, and the unsafe node
		// whose last failure was the restart's own turn stops.
		{"reconnects", harnessProfile{reconnects: 2, deadline: 120 * time.Second}, diagnostics.UnsafeReplayRefused},
		{"deadline", harnessProfile{reconnects: 3, deadline: 4 * time.Second}, diagnostics.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cpus.TakeFirst(t) // the longest of all: up to 30 s of Gemini CLI runs
			srv := simtest.Start(t, sim.Config{})
			if err := srv.SetOutage(true); err != nil {
				t.Fatal(err)
			}
			rig := agentGraph(t, "gemini", simRoot(srv), tc.prof)
			j, res, ds := rig.run(t)
			n := res.Nodes[0]
			var ne *NodeError
			if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) || ne.Code != tc.code {
				t.Fatalf("node %s (%v), want failed with %s\n%s", n.State, n.Err, tc.code, dumpDiags(ds))
			}
			atts := attemptsOf(t, j, res.RunID, "agent")
			const retries = 3 // the ci-harness profile's
			if len(atts) < 1 || len(atts) > 1+retries {
				t.Errorf("%d attempts, want 1 to %d", len(atts), 1+retries)
			}
			for _, a := range atts {
				if a.Ref != "" && a.Ref != atts[0].Ref { // "": cut by the deadline before it reported the session
					t.Errorf("attempt %d ran session %s, not %s", a.N, a.Ref, atts[0].Ref)
				}
			}
			if tc.code == diagnostics.BudgetExhausted && len(atts) != 1+retries {
				t.Errorf("%d attempts, want the whole budget: %d", len(atts), 1+retries)
			}
			if got := len(withCode(ds, diagnostics.ThreadResumed)); got > tc.prof.reconnects {
				t.Errorf("%d resumes, more than the profile's %d", got, tc.prof.reconnects)
			}
			failed := withCode(ds, diagnostics.HarnessFailed)
			if len(failed) == 0 {
				t.Fatalf("no NR305\n%s", dumpDiags(ds))
			}
			end := withCode(ds, diagnostics.NodeFailed)[0].Time
			if tc.code == diagnostics.DeadlineExceeded {
				// A step cut by the deadline still has to stop the CLI (SIGTERM, SIGKILL 3 s later).
				if took, limit := end.Sub(failed[0].Time), tc.prof.deadline+3500*time.Millisecond; took > limit {
					t.Errorf("failed %s after the first failure, past the deadline %s", took, tc.prof.deadline)
				}
			}
		})
	}
}

// checkAgentMismatch checks a node that failed with NR304 after one resume
// of its recorded session, which the CLI said it does not have (says).
func checkAgentMismatch(t *testing.T, j *journal.Journal, res *Result, ds []diagRec, says string) {
	t.Helper()
	n := res.Nodes[0]
	var ne *NodeError
	var me *harness.MismatchError
	if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) || ne.Class != diagnostics.ClassDeterministic || !errors.As(n.Err, &me) {
		t.Fatalf("node %s (%v), want failed with a deterministic thread mismatch\n%s", n.State, n.Err, dumpDiags(ds))
	}
	atts := attemptsOf(t, j, res.RunID, "agent")
	if len(atts) != 1 || uuid.Validate(atts[0].Ref) != nil {
		t.Fatalf("attempts %+v, want one, with the session id", atts)
	}
	session := atts[0].Ref
	if s := withCode(ds, diagnostics.ThreadStarted); len(s) != 1 || s[0].Attrs["thread_id"] != session {
		t.Errorf("NR301 %v, want the session %s once", s, session)
	}
	if r := withCode(ds, diagnostics.ThreadResumed); len(r) != 1 || r[0].Attrs["thread_id"] != session {
		t.Errorf("NR303 %v, want one resume of %s", r, session)
	}
	mm := withCode(ds, diagnostics.ThreadMismatch)
	if len(mm) != 1 || mm[0].Attrs["want"] != session || !strings.Contains(mm[0].Message, "resume found no thread "+session) ||
		!strings.Contains(mm[0].Message, says) {
		t.Errorf("NR304 %v, want: no session %s (%q)", mm, session, says)
	}
	if firstIndex(ds, diagnostics.ThreadStarted) > firstIndex(ds, diagnostics.ThreadResumed) ||
		firstIndex(ds, diagnostics.ThreadResumed) > firstIndex(ds, diagnostics.ThreadMismatch) {
		t.Errorf("want NR301, NR303, NR304 in that order\n%s", dumpDiags(ds))
	}
	if len(withCode(ds, diagnostics.Recovered)) != 0 || len(withCode(ds, diagnostics.RetryStarted)) != 0 {
		t.Errorf("a mismatch was recovered from or retried\n%s", dumpDiags(ds))
	}
}

// A provider that never recovers: Claude Code's resumes are bounded by the
// profile's reconnect budget, or cut by its recovery deadline.
func TestHarnessClaudeNodeResumesAreBounded(t *testing.T) {
	t.Parallel()
	soak(t, "TestHarnessCodexNodeResumesAreBounded/reconnects/unsafe (a harness's resumes bounded by the reconnect budget)")
	t.Run("reconnects", func(t *testing.T) {
		t.Parallel()
		cpus.Take(t)
		srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{
			{Endpoint: sim.EndpointMessages, Kind: sim.FaultClose, AfterEvents: 4}}})
		prof := harnessProfile{reconnects: 2, deadline: 60 * time.Second}
		rig := agentGraph(t, "claude", simRoot(srv), prof)
		j, res, ds := rig.run(t)
		ne := checkBounded(t, j, res, ds, prof, diagnostics.UnsafeReplayRefused)
		if got := len(withCode(ds, diagnostics.ThreadResumed)); got != prof.reconnects {
			t.Errorf("%d resumes, want the whole budget of %d\n%s", got, prof.reconnects, dumpDiags(ds))
		}
		if !strings.Contains(ne.Reason, "the reconnect budget is spent") {
			t.Errorf("reason %q", ne.Reason)
		}
		if got, want := srv.Stats().Requests[sim.EndpointMessages], int64(2*(1+prof.reconnects)); got != want {
			t.Errorf("%d requests, want %d (two per Claude Code run)", got, want)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		cpus.Take(t)
		srv := simtest.Start(t, sim.Config{})
		if err := srv.SetOutage(true); err != nil {
			t.Fatal(err)
		}
		prof := harnessProfile{reconnects: 50, deadline: 4 * time.Second}
		rig := agentGraph(t, "claude", simRoot(srv), prof)
		j, res, ds := rig.run(t)
		checkBounded(t, j, res, ds, prof, diagnostics.DeadlineExceeded)
		if got := len(withCode(ds, diagnostics.ThreadResumed)); got == 0 || got >= prof.reconnects {
			t.Errorf("%d resumes, want some, cut by the deadline before the budget of %d\n%s", got, prof.reconnects, dumpDiags(ds))
		}
	})
}

// testdata/graphs/agents.yaml runs a Codex, a Claude Code and a Gemini CLI
// node side by side on one simulator with testdata/faults/agents.yaml: each
// node is cut more often than its CLI retries; the Codex and Claude Code
// sessions are resumed, Gemini CLI's (dropped) is started again under its
// id; all three complete.
func TestAgentsExampleGraph(t *testing.T) {
	t.Parallel()
	soak(t, "each CLI's own resume test (TestHarnessCodexNodeResumesDroppedThread, TestHarnessClaudeNodeResumesCutSession, TestHarnessGeminiNodeRestartsDroppedSession)")
	cpus.TakeFirst(t) // three CLIs: among the longest, never last
	cfg, err := sim.LoadConfig(filepath.Join("..", "testdata", "faults", "agents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := simtest.Start(t, cfg)
	src, err := os.ReadFile(filepath.Join("..", "testdata", "graphs", "agents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const addr = "127.0.0.1:8788"
	if !strings.Contains(string(src), addr) {
		t.Fatalf("the example no longer points at %s: update the test", addr)
	}
	g := parseTestGraph(t, strings.ReplaceAll(string(src), addr, srv.Addr()))
	state := t.TempDir()
	bins := map[string]string{"codex": codexbin.Path(t), "claude": codexbin.Claude(t), "gemini": codexbin.Gemini(t)}
	for name, p := range g.Providers {
		p.Command, p.StateDir, p.WorkDir = bins[name], state, t.TempDir()
		p.Env["TMPDIR"] = t.TempDir()
		if name == "codex" {
			p.Args = append(p.Args, harness.CodexQuietArgs()...) // no login shell, no network but the simulator
			p.Env["CODEX_HOME"] = filepath.Join(state, "codex-home")
			if err := os.Mkdir(p.Env["CODEX_HOME"], 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { agentLeftovers(t, state) })
	j := openJournal(t)
	res := runGraph(t, g, j)
	for _, n := range res.Nodes {
		ds := diagRecs(t, j, res.RunID, n.ID)
		if n.State != journal.NodeCompleted || n.Output == "" {
			t.Errorf("node %s: %s (%v)\n%s", n.ID, n.State, n.Err, dumpDiags(ds))
			continue
		}
		if got := len(withCode(ds, diagnostics.ThreadResumed)); got != 1 {
			t.Errorf("node %s: %d resumes, want 1\n%s", n.ID, got, dumpDiags(ds))
		}
		// Gemini CLI's session is found dropped and started again under its id.
		want := map[string]int{"notes-gemini": 1}[n.ID]
		if got := len(withCode(ds, diagnostics.ThreadDropped)); got != want {
			t.Errorf("node %s: %d dropped sessions, want %d\n%s", n.ID, got, want, dumpDiags(ds))
		}
	}
	if res.Status != journal.RunCompleted {
		t.Errorf("run %s", res.Status)
	}
}

// state_dir is made absolute against the graph file's directory and is a
// harness field only.
func TestGraphStateDir(t *testing.T) {
	src := "name: s\nproviders:\n  agent:\n    kind: harness\n    harness: gemini\n    state_dir: st\nnodes:\n  - id: a\n    prompt: x\n"
	g, err := ParseGraph(filepath.Join("some", "g.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs(filepath.Join("some", "st")); g.Providers["agent"].StateDir != want {
		t.Errorf("StateDir %q, want %q", g.Providers["agent"].StateDir, want)
	}
	src = strings.Replace(src, "kind: harness\n    harness: gemini", "kind: openai", 1)
	if _, err := ParseGraph("g.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), `field "state_dir" is not valid for kind "openai"`) {
		t.Errorf("state_dir on an openai provider: %v", err)
	}
}

// `run --sim` (and so `noderun chaos`) points every built-in harness at the
// simulator, whatever base URLs and keys the graph's providers name: the
// agents example (whose URLs point at a port nobody listens on here) runs
// with the real Codex CLI, Claude Code and Gemini CLI, each answering with
// the simulator's text, each request named by its node.
func TestRunSimPointsEveryHarnessAtTheSimulator(t *testing.T) {
	t.Parallel()
	soak(t, "TestSimulate (--sim points a harness at the simulator) and each CLI's TestHarnessAgentNodeCleanTurn and TestHarnessCodexNodeResumesDroppedThread")
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{})
	g, err := LoadGraph(filepath.Join("..", "testdata", "graphs", "agents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{"codex": codexbin.Path(t), "claude": codexbin.Claude(t), "gemini": codexbin.Gemini(t)}
	for name, p := range g.Providers {
		p.Command, p.WorkDir = bins[name], t.TempDir()
		p.Env["TMPDIR"] = t.TempDir()
	}
	j := openJournal(t)
	res := runSimGraph(t, g, j, srv)
	for _, n := range res.Nodes {
		if n.State != journal.NodeCompleted || n.Output != simAnswer(g.Node(n.ID).Prompt) {
			t.Errorf("node %s: %s, output %q (%v)\n%s", n.ID, n.State, head(n.Output), n.Err, dumpDiags(diagRecs(t, j, res.RunID, n.ID)))
		}
	}
	st := srv.Stats()
	for node, ep := range map[string]string{"notes-codex": sim.EndpointResponsesCreate, "notes-claude": sim.EndpointMessages,
		"notes-gemini": sim.EndpointGeminiStream} {
		if st.Nodes[node].Requests[ep] < 1 {
			t.Errorf("node %s sent no %s request to the simulator: %+v", node, ep, st.Nodes[node])
		}
	}
}
