package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// These tests run the real Codex CLI (npm @openai/codex 0.169.0) against the
// provider simulator's Responses endpoint on 127.0.0.1.

type codexRig struct {
	sim  *sim.Server
	prov *Provider
	home string
}

// newCodex starts a simulator and a Codex provider pointed at it, with its
// own CODEX_HOME and working directory. Codex retries a dropped stream once
// by itself (stream_max_retries=1), and never re-sends a failed request.
func newCodex(t *testing.T) *codexRig {
	t.Helper()
	bin := codexbin.Path(t)
	s := simtest.Start(t, sim.Config{})
	home := t.TempDir()
	settings := fmt.Sprintf(`model_providers.sim={name="sim",base_url=%q,wire_api="responses",env_key="SIM_KEY",`+
		`stream_max_retries=1,request_max_retries=0,stream_idle_timeout_ms=20000}`, s.BaseURL())
	p, err := New(Config{
		Harness: "codex",
		Command: bin,
		// Quiet (no shell snapshot among others): Codex would start the
		// machine's login shell to capture its environment, and what that
		// shell's rc starts in the background (pyenv's rehash here) can
		// outlive Codex and fail the leak check below for a process that is
		// neither Codex's nor ours.
		Args:    append([]string{"-c", "model_provider=sim", "-c", settings}, CodexQuietArgs()...),
		Env:     map[string]string{"CODEX_HOME": home, "SIM_KEY": "sim-test-key"},
		WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noProcessesIn(t, "CODEX_HOME="+home) })
	return &codexRig{sim: s, prov: p, home: home}
}

// noProcessesIn fails if a process with the environment entry env (such as
// CODEX_HOME=dir) is still running.
func noProcessesIn(t *testing.T, env string) {
	t.Helper()
	needle := []byte(env + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), string(needle)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "stat"))
		if zombie(stat) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
		t.Errorf("a process of the test's agent CLI is left running: %s: %s", filepath.Dir(f),
			strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

var codexReq = provider.Request{Node: "n", Model: "sim", Prompt: "Write the release notes."}

// simText is the simulator's answer to the last user message prompt.
func simText(prompt string) string {
	return strings.Join(sim.Text("sim", prompt, 0, sim.DefaultTokens), "")
}

func TestCodexStream(t *testing.T) {
	t.Parallel()
	rig := newCodex(t)
	r := &recorder{t: t}
	if err := rig.prov.Stream(testCtx(t, 60*time.Second), codexReq, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	if got, want := r.out.String(), simText(codexReq.Prompt); got != want {
		t.Errorf("output\n got %q\nwant %q", got, want)
	}
	refs := r.refs()
	if len(refs) != 1 || uuid.Validate(refs[0]) != nil {
		t.Errorf("refs %v, want one thread id", refs)
	}
	if k := r.kinds(); k[0] != "ref" {
		t.Errorf("the thread id must be the first event: %v", k)
	}
	if len(r.diags(diagnostics.ThreadStarted)) != 1 || r.count(provider.KindProgress) == 0 {
		t.Errorf("want NR301 and progress\n%s", r.dump())
	}
	if done := r.events[len(r.events)-1]; done.Kind != provider.KindDone || done.Usage == nil || done.Usage.OutputTokens == 0 {
		t.Errorf("last event %+v, want done with usage", done)
	}
}

// The simulator drops the stream on two requests in a row; Codex retries
// once and gives up. The thread is then resumed and completes.
func TestCodexDropThenResume(t *testing.T) {
	t.Parallel()
	rig := newCodex(t)
	rig.sim.AddFault(sim.Fault{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultClose, AfterEvents: 2, Times: 2})
	ctx := testCtx(t, 90*time.Second)

	r := &recorder{t: t}
	err := rig.prov.Stream(ctx, codexReq, r.emit)
	if err == nil {
		t.Fatalf("Stream succeeded through two drops\n%s", r.dump())
	}
	if classOf(err) != diagnostics.ClassDisconnect || !errors.Is(err, diagnostics.ErrDisconnected) ||
		!strings.Contains(err.Error(), "stream disconnected before completion") {
		t.Fatalf("err %v (class %s), want a transport disconnect\n%s", err, classOf(err), r.dump())
	}
	refs := r.refs()
	if len(refs) != 1 {
		t.Fatalf("refs %v, want the thread id\n%s", refs, r.dump())
	}
	if d := r.diags(diagnostics.HarnessRetrying); len(d) != 1 || !strings.HasPrefix(d[0].Message, "Reconnecting... 1/1") {
		t.Errorf("want Codex's own retry as NR302: %v", d)
	}
	if len(r.diags(diagnostics.HarnessFailed)) != 1 {
		t.Errorf("want NR305\n%s", r.dump())
	}

	r2 := &recorder{t: t}
	if err := rig.prov.Resume(ctx, codexReq, provider.Cursor{Ref: refs[0], Seq: -1}, r2.emit); err != nil {
		t.Fatalf("Resume: %v\n%s", err, r2.dump())
	}
	if got, want := r2.out.String(), simText(rig.prov.Descriptor().ContinuePrompt); got != want {
		t.Errorf("output after resume\n got %q\nwant %q", got, want)
	}
	if got := r2.refs(); len(got) != 1 || got[0] != refs[0] {
		t.Errorf("resume reported thread %v, want %s", got, refs[0])
	}
	if len(r2.diags(diagnostics.ThreadResumed)) != 1 {
		t.Errorf("want NR303\n%s", r2.dump())
	}
	if n := rig.sim.Stats().Requests[sim.EndpointResponsesCreate]; n != 3 {
		t.Errorf("%d requests, want 3 (two dropped, one after the resume)", n)
	}
}

func TestCodex401(t *testing.T) {
	t.Parallel()
	rig := newCodex(t)
	rig.sim.AddFault(sim.Fault{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultStatus, Status: 401})
	r := &recorder{t: t}
	err := rig.prov.Stream(testCtx(t, 60*time.Second), codexReq, r.emit)
	ce := diagnostics.Classify(err)
	if ce.Class != diagnostics.ClassDeterministic || ce.Status != 401 {
		t.Fatalf("err %v (class %s, status %d), want deterministic 401\n%s", err, ce.Class, ce.Status, r.dump())
	}
	if !strings.Contains(err.Error(), "codex: the provider rejected the credentials (401)") {
		t.Errorf("unclear message: %v", err)
	}
	if errors.Is(err, diagnostics.ErrDisconnected) {
		t.Error("a 401 must not look like a disconnect")
	}
	if len(r.diags(diagnostics.HarnessFailed)) != 1 {
		t.Errorf("want NR305\n%s", r.dump())
	}
}

func TestCodexResumeUnknownThread(t *testing.T) {
	t.Parallel()
	rig := newCodex(t)
	t.Run("unknown id", func(t *testing.T) {
		t.Parallel()
		want := uuid.NewString()
		r := &recorder{t: t}
		err := rig.prov.Resume(testCtx(t, 60*time.Second), codexReq, provider.Cursor{Ref: want, Seq: -1}, r.emit)
		var me *MismatchError
		if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) || me.Want != want {
			t.Fatalf("err %v (class %s)\n%s", err, classOf(err), r.dump())
		}
		if d := r.diags(diagnostics.ThreadMismatch); len(d) != 1 {
			t.Errorf("want NR304\n%s", r.dump())
		}
	})
	t.Run("unknown name", func(t *testing.T) {
		// Codex takes a non-UUID as a thread name and, finding none, silently starts a new thread.
		t.Parallel()
		r := &recorder{t: t}
		err := rig.prov.Resume(testCtx(t, 60*time.Second), codexReq, provider.Cursor{Ref: "no-such-thread", Seq: -1}, r.emit)
		var me *MismatchError
		if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) || me.Got == "" {
			t.Fatalf("err %v (class %s)\n%s", err, classOf(err), r.dump())
		}
		if !strings.Contains(err.Error(), "resume came back with thread "+me.Got+", not no-such-thread") {
			t.Errorf("message: %v", err)
		}
		if d := r.diags(diagnostics.ThreadMismatch); len(d) != 1 || len(r.refs()) != 0 {
			t.Errorf("want NR304 and no ref\n%s", r.dump())
		}
	})
}

// A provider that never comes back: Codex would wait for the network forever;
// each call must still end, in bounded time, with a transport error.
func TestCodexOutage(t *testing.T) {
	t.Parallel()
	rig := newCodex(t)
	if err := rig.sim.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 90*time.Second)
	const bound = 40 * time.Second // Codex start, its 5 s network wait, our SIGTERM → SIGKILL

	start := time.Now()
	r := &recorder{t: t}
	err := rig.prov.Stream(ctx, codexReq, r.emit)
	if classOf(err) != diagnostics.ClassDisconnect || !strings.Contains(err.Error(), "stopped after 2 of its own retries") {
		t.Fatalf("err %v (class %s)\n%s", err, classOf(err), r.dump())
	}
	if el := time.Since(start); el > bound {
		t.Errorf("Stream took %s", el)
	} else {
		t.Logf("Stream ended in %s: %v", el.Round(time.Millisecond), err)
	}
	refs := r.refs()
	if len(refs) != 1 {
		t.Fatalf("refs %v\n%s", refs, r.dump())
	}

	start = time.Now()
	r = &recorder{t: t}
	err = rig.prov.Resume(ctx, codexReq, provider.Cursor{Ref: refs[0], Seq: -1}, r.emit)
	if classOf(err) != diagnostics.ClassDisconnect {
		t.Fatalf("Resume: err %v (class %s)\n%s", err, classOf(err), r.dump())
	}
	if el := time.Since(start); el > bound {
		t.Errorf("Resume took %s", el)
	} else {
		t.Logf("Resume ended in %s: %v", el.Round(time.Millisecond), err)
	}
	if got := r.refs(); len(got) != 1 || got[0] != refs[0] {
		t.Errorf("resume reported %v, want %s\n%s", got, refs[0], r.dump())
	}
}
