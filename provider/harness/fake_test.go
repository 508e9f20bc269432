package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// These tests run the test binary as a fake agent (see TestMain) under the
// built-in Codex descriptor or a descriptor file, to pin down process
// handling and event mapping quickly and exactly. codex_test.go runs the
// real Codex CLI.

func fake(t *testing.T, harness, script, resumeScript string) (*Provider, Config) {
	t.Helper()
	cfg := Config{
		Harness: harness,
		Command: os.Args[0],
		Env: map[string]string{"NR_HARNESS_FAKE": "agent", "FAKE_SCRIPT": script,
			"FAKE_RESUME_SCRIPT": resumeScript, "FAKE_ECHO": "echoed",
			"GORACE": "atexit_sleep_ms=0"}, // a -race binary sleeps 1 s on exit(0) otherwise
		WorkDir:  t.TempDir(),
		StateDir: t.TempDir(),
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg
}

const otherAgent = "../../testdata/harness/other-agent.yaml"

func TestFakeStreamSuccess(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, "codex", `
out {"type":"thread.started","thread_id":"T1"}
out {"type":"turn.started"}
out {"type":"item.completed","item":{"id":"i0","type":"error","message":"Model metadata for x not found"}}
out {"type":"item.completed","item":{"id":"i1","type":"reasoning","text":"thinking"}}
out {"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"first"}}
out {"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: x)"}
out {"type":"item.completed","item":{"id":"i3","type":"agent_message","text":"final answer ✓"}}
out not json
out {"type":"turn.completed","usage":{"input_tokens":3,"cached_input_tokens":0,"output_tokens":7,"reasoning_output_tokens":2}}
`, "")
	r := &recorder{t: t}
	if err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "hi"}, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	if got := r.out.String(); got != "final answer ✓" {
		t.Errorf("output %q", got)
	}
	k := r.kinds()
	if len(k) < 3 || k[0] != "ref" || k[1] != "diagnostic:NR301" || k[2] != "raw" {
		t.Errorf("the thread id must come first: %v", k)
	}
	if tail := k[len(k)-3:]; !slices.Equal(tail, []string{"reset", "delta", "done"}) {
		t.Errorf("must end with reset, delta, done: %v", k)
	}
	if got := r.refs(); !slices.Equal(got, []string{"T1"}) {
		t.Errorf("refs %v", got)
	}
	if n := r.count(provider.KindRaw); n != 9 {
		t.Errorf("%d raw events, want every line (9)", n)
	}
	if n := r.count(provider.KindProgress); n != 3 {
		t.Errorf("%d progress events, want 3 (reasoning, two messages; not the warning)", n)
	}
	if d := r.diags(diagnostics.HarnessRetrying); len(d) != 1 || !strings.HasPrefix(d[0].Message, "Reconnecting... 1/5") {
		t.Errorf("retry diagnostics %v", d)
	}
	if n := len(r.diags(diagnostics.HarnessFailed)); n != 0 {
		t.Errorf("%d HarnessFailed on success", n)
	}
	done := r.events[len(r.events)-1]
	if done.Usage == nil || *done.Usage != (provider.Usage{InputTokens: 3, OutputTokens: 7, ReasoningTokens: 2}) {
		t.Errorf("usage %+v", done.Usage)
	}
}

// argvOf returns the argv, dir and env the fake agent reported.
func argvOf(t *testing.T, r *recorder) (argv []string, dir, env string) {
	t.Helper()
	for _, ev := range r.events {
		if ev.Kind != provider.KindRaw || !strings.Contains(string(ev.Raw), `"type":"argv"`) {
			continue
		}
		var a struct {
			Argv []string `json:"argv"`
			Dir  string   `json:"dir"`
			Env  string   `json:"env"`
		}
		if err := json.Unmarshal(ev.Raw, &a); err != nil {
			t.Fatal(err)
		}
		return a.Argv, a.Dir, a.Env
	}
	t.Fatalf("no argv event:\n%s", r.dump())
	return nil, "", ""
}

func TestFakeArgvEnvDir(t *testing.T) {
	t.Parallel()
	script := "argv\nout {\"type\":\"thread.started\",\"thread_id\":\"T1\"}\nout {\"type\":\"turn.completed\"}"
	p, cfg := fake(t, "codex", script, strings.Replace(script, "T1", "{thread}", 1))
	p.cfg.Args = []string{"-c", "model_provider=sim"}
	ctx := testCtx(t, 20*time.Second)

	req := provider.Request{Model: "m1", Prompt: "--help is not a flag here", System: "say \"hi\"\n\tok", ReasoningEffort: "high"}
	r := &recorder{t: t}
	if err := p.Stream(ctx, req, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	argv, dir, env := argvOf(t, r)
	want := []string{"exec", "--json", "--skip-git-repo-check", "--model", "m1",
		"--config", `model_reasoning_effort="high"`, "--config", `developer_instructions="say \"hi\"\n\tok"`,
		"-c", "model_provider=sim", "--", "--help is not a flag here"}
	if !slices.Equal(argv, want) {
		t.Errorf("start argv\n got %q\nwant %q", argv, want)
	}
	if dir != cfg.WorkDir || env != "echoed" {
		t.Errorf("dir %q env %q, want %q and the configured env", dir, env, cfg.WorkDir)
	}
	if r.out.String() != "" || r.count(provider.KindDelta) != 0 {
		t.Errorf("no agent message: want empty output, got %q", r.out.String())
	}

	// Resume: no model, no system → those groups disappear; the request's workdir wins.
	other := t.TempDir()
	r = &recorder{t: t}
	err := p.Resume(ctx, provider.Request{Prompt: "x", WorkDir: other}, provider.Cursor{Ref: "T1", Seq: -1}, r.emit)
	if err != nil {
		t.Fatalf("Resume: %v\n%s", err, r.dump())
	}
	argv, dir, _ = argvOf(t, r)
	want = []string{"exec", "resume", "--json", "--skip-git-repo-check", "-c", "model_provider=sim", "--", "T1",
		p.desc.ContinuePrompt}
	if !slices.Equal(argv, want) {
		t.Errorf("resume argv\n got %q\nwant %q", argv, want)
	}
	if dir != other {
		t.Errorf("dir %q, want the request's %q", dir, other)
	}
	if d := r.diags(diagnostics.ThreadResumed); len(d) != 1 || r.kinds()[0] != "diagnostic:NR303" {
		t.Errorf("resume must announce itself first: %v", r.kinds())
	}
}

func TestFakeFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string
		class        diagnostics.Class
		status       int
		msg          string // in the error
	}{
		{"drop", `out {"type":"thread.started","thread_id":"T1"}
out {"type":"error","message":"Reconnecting... 1/1 (stream disconnected before completion: x)"}
out {"type":"error","message":"stream disconnected before completion: stream closed before response.completed"}
out {"type":"turn.failed","error":{"message":"stream disconnected before completion: stream closed before response.completed"}}
exit 1`, diagnostics.ClassDisconnect, 0, "codex: stream disconnected before completion: stream closed before response.completed (exit code 1)"},
		{"401", `out {"type":"thread.started","thread_id":"T1"}
out {"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: bad key"}}
exit 1`, diagnostics.ClassDeterministic, 401, "rejected the credentials"},
		{"503", `out {"type":"turn.failed","error":{"message":"unexpected status 503 Service Unavailable: x"}}
exit 1`, diagnostics.ClassDisconnect, 503, "unexpected status 503"},
		{"error event, then exit", `out {"type":"thread.started","thread_id":"T1"}
out {"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}
exit 1`, diagnostics.ClassRateLimited, 429, "Codex ran out of retries"},
		{"stderr only", "err WARNING: whatever\nerr Error: boom happened\nerr Stack backtrace:\nerr    0: <unknown>\nexit 1",
			diagnostics.ClassDisconnect, 0, "codex: Error: boom happened (exit code 1)"},
		{"usage error", "err error: unexpected argument '--sandbox' found\nerr \nerr Usage: codex exec resume [OPTIONS]\nexit 2",
			diagnostics.ClassDeterministic, 0, "codex: Codex rejected its command line"},
		{"exit 0 without terminal event", `out {"type":"thread.started","thread_id":"T1"}`,
			diagnostics.ClassDisconnect, 0, "the process ended without turn.completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := fake(t, "codex", tc.script, "")
			r := &recorder{t: t}
			err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit)
			if err == nil {
				t.Fatalf("no error\n%s", r.dump())
			}
			ce := diagnostics.Classify(err)
			if ce.Class != tc.class || ce.Status != tc.status {
				t.Errorf("class %s status %d, want %s %d: %v", ce.Class, ce.Status, tc.class, tc.status, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if got := errors.Is(err, diagnostics.ErrDisconnected); got != (tc.class == diagnostics.ClassDisconnect) {
				t.Errorf("errors.Is(ErrDisconnected) = %v for class %s", got, tc.class)
			}
			var te *TurnError
			if !errors.As(err, &te) {
				t.Errorf("not a *TurnError: %T", err)
			}
			d := r.diags(diagnostics.HarnessFailed)
			if len(d) != 1 {
				t.Fatalf("%d HarnessFailed diagnostics\n%s", len(d), r.dump())
			}
			if r.done {
				t.Error("KindDone on failure")
			}
		})
	}
}

func TestFakeCancelKillsGroup(t *testing.T) {
	t.Parallel()
	for _, ignoreTerm := range []bool{false, true} {
		name := "sigterm"
		if ignoreTerm {
			name = "sigkill after ignored sigterm"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "child.pid")
			script := "spawn " + pidfile + "\nout {\"type\":\"thread.started\",\"thread_id\":\"T1\"}\nhang"
			if ignoreTerm {
				script = "ignore-term\n" + script
			}
			p, _ := fake(t, "codex", script, "")
			ctx, cancel := context.WithCancel(testCtx(t, 20*time.Second))
			defer cancel()
			r := &recorder{t: t}
			emit := func(ev provider.Event) error {
				if ev.Kind == provider.KindRef {
					cancel()
				}
				return r.emit(ev)
			}
			start := time.Now()
			err := p.Stream(ctx, provider.Request{Prompt: "x"}, emit)
			if !errors.Is(err, context.Canceled) || classOf(err) != diagnostics.ClassCanceled {
				t.Fatalf("err %v (class %s), want context.Canceled", err, classOf(err))
			}
			if el := time.Since(start); el > killDelay+5*time.Second {
				t.Errorf("took %s to stop", el)
			}
			gone(t, readPid(t, pidfile))
		})
	}
}

func TestFakeEmitErrorStopsProcess(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	p, _ := fake(t, "codex", "spawn "+pidfile+"\nout {\"type\":\"thread.started\",\"thread_id\":\"T1\"}\nhang", "")
	r := &recorder{t: t, failOn: provider.KindRef}
	err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit)
	if err != errEmit {
		t.Fatalf("err %v, want the emit error unchanged", err)
	}
	gone(t, readPid(t, pidfile))
}

func TestFakeChildOutsideGroupHoldsStdout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spawn string
		swept bool // killed by the marker sweep
	}{{"spawn-setsid", true}, {"spawn-setsid-clean-env", false}} {
		t.Run(tc.spawn, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "child.pid")
			p, _ := fake(t, "codex", tc.spawn+" "+pidfile+`
out {"type":"thread.started","thread_id":"T1"}
out {"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"ok"}}
out {"type":"turn.completed"}`, "")
			r := &recorder{t: t}
			start := time.Now()
			err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit)
			el := time.Since(start)
			pid := readPid(t, pidfile)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if err != nil || r.out.String() != "ok" {
				t.Fatalf("err %v output %q", err, r.out.String())
			}
			if el > drainWait+5*time.Second {
				t.Errorf("took %s: a child holding stdout must not block the call", el)
			}
			if tc.swept {
				gone(t, pid) // it left the process group, but carries the run's marker
			} else if syscall.Kill(pid, 0) != nil {
				t.Error("a child without the marker, outside the group, cannot be found: it should still run")
			}
		})
	}
}

func TestFakeLingersAfterSuccess(t *testing.T) {
	t.Parallel()
	// other-agent.yaml: exit_grace 1s.
	p, _ := fake(t, otherAgent, `out {"kind":"session","session":{"id":"S1"}}
out {"kind":"message","role":"assistant","content":[{"text":"done it"}]}
out {"kind":"finished","status":"ok","tokens":{"in":3,"out":5}}
hang`, "")
	r := &recorder{t: t}
	start := time.Now()
	if err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	if r.out.String() != "done it" || !slices.Equal(r.refs(), []string{"S1"}) {
		t.Errorf("output %q refs %v", r.out.String(), r.refs())
	}
	if el := time.Since(start); el > time.Second+killDelay+3*time.Second {
		t.Errorf("took %s", el)
	}
}

func TestFakeStdoutClosedButRunning(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, otherAgent, "out {\"kind\":\"session\",\"session\":{\"id\":\"S1\"}}\nclose-stdout\nhang", "")
	r := &recorder{t: t}
	err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit)
	if classOf(err) != diagnostics.ClassDisconnect || !strings.Contains(err.Error(), "ended without finished") {
		t.Fatalf("err %v (class %s)", err, classOf(err))
	}
}

func TestFakeOtherAgentFailure(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, otherAgent, `out {"kind":"session","session":{"id":"S1"}}
out {"kind":"finished","status":"error","reason":"HTTP 401 bad key"}
exit 3`, "")
	r := &recorder{t: t}
	err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit)
	ce := diagnostics.Classify(err)
	if ce.Class != diagnostics.ClassDeterministic || err.Error() != "deterministic: other: the key is wrong: HTTP 401 bad key (exit code 3)" {
		t.Fatalf("err %v (class %s)", err, ce.Class)
	}
}

func TestFakeGiveUp(t *testing.T) {
	t.Parallel()
	const wait = `out {"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`
	t.Run("stops after give_up_after notices in a row", func(t *testing.T) {
		t.Parallel()
		p, _ := fake(t, "codex", "out {\"type\":\"thread.started\",\"thread_id\":\"T1\"}\n"+wait+"\n"+wait+"\nhang", "")
		r := &recorder{t: t}
		err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit)
		if classOf(err) != diagnostics.ClassDisconnect || !strings.Contains(err.Error(), "stopped after 2 of its own retries") {
			t.Fatalf("err %v (class %s)\n%s", err, classOf(err), r.dump())
		}
		if n := len(r.diags(diagnostics.HarnessRetrying)); n != 2 {
			t.Errorf("%d HarnessRetrying, want 2", n)
		}
	})
	t.Run("progress starts the count over", func(t *testing.T) {
		t.Parallel()
		p, _ := fake(t, "codex", "out {\"type\":\"thread.started\",\"thread_id\":\"T1\"}\n"+wait+"\n"+
			`out {"type":"item.completed","item":{"id":"i1","type":"reasoning","text":"r"}}`+"\n"+wait+"\n"+
			`out {"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"fine"}}`+"\n"+
			`out {"type":"turn.completed"}`, "")
		r := &recorder{t: t}
		if err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, r.emit); err != nil || r.out.String() != "fine" {
			t.Fatalf("err %v output %q\n%s", err, r.out.String(), r.dump())
		}
	})
}

func TestFakeResume(t *testing.T) {
	t.Parallel()
	ok := `out {"type":"thread.started","thread_id":"{thread}"}
out {"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"resumed"}}
out {"type":"turn.completed"}`
	t.Run("same thread", func(t *testing.T) {
		t.Parallel()
		p, _ := fake(t, "codex", "", ok)
		r := &recorder{t: t}
		err := p.Resume(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, provider.Cursor{Ref: "T1", Seq: -1}, r.emit)
		if err != nil || r.out.String() != "resumed" {
			t.Fatalf("err %v output %q\n%s", err, r.out.String(), r.dump())
		}
		if len(r.diags(diagnostics.ThreadResumed)) != 1 || len(r.diags(diagnostics.ThreadStarted)) != 1 {
			t.Errorf("want NR303 then NR301: %v", r.kinds())
		}
	})
	t.Run("another thread", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		p, _ := fake(t, "codex", "", "spawn "+pidfile+"\nout {\"type\":\"thread.started\",\"thread_id\":\"NEW\"}\nhang")
		r := &recorder{t: t}
		err := p.Resume(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, provider.Cursor{Ref: "T1", Seq: -1}, r.emit)
		var me *MismatchError
		if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) || me.Got != "NEW" || me.Want != "T1" {
			t.Fatalf("err %v (class %s)", err, classOf(err))
		}
		if !strings.Contains(err.Error(), "resume came back with thread NEW, not T1") {
			t.Errorf("message %q", err)
		}
		if d := r.diags(diagnostics.ThreadMismatch); len(d) != 1 {
			t.Errorf("%d ThreadMismatch", len(d))
		}
		if len(r.refs()) != 0 {
			t.Errorf("the wrong thread was reported as the ref: %v", r.refs())
		}
		gone(t, readPid(t, pidfile))
	})
	t.Run("no such thread", func(t *testing.T) {
		t.Parallel()
		p, _ := fake(t, "codex", "", "err Error: thread/resume: thread/resume failed: no rollout found for thread id {thread} (code -32600)\nerr \nerr Stack backtrace:\nexit 1")
		r := &recorder{t: t}
		err := p.Resume(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, provider.Cursor{Ref: "T1", Seq: -1}, r.emit)
		var me *MismatchError
		if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) || me.Got != "" {
			t.Fatalf("err %v (class %s)", err, classOf(err))
		}
		if d := r.diags(diagnostics.ThreadMismatch); len(d) != 1 || !strings.Contains(d[0].Message, "no rollout found") {
			t.Errorf("ThreadMismatch %v", d)
		}
	})
	t.Run("no ref", func(t *testing.T) {
		t.Parallel()
		p, _ := fake(t, "codex", "", ok)
		err := p.Resume(t.Context(), provider.Request{}, provider.Cursor{Seq: -1}, (&recorder{t: t}).emit)
		if classOf(err) != diagnostics.ClassDeterministic {
			t.Fatalf("err %v", err)
		}
	})
}

func TestFakeCancelByRef(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, "codex", "out {\"type\":\"thread.started\",\"thread_id\":\"T1\"}\nhang", "")
	r := &recorder{t: t}
	emit := func(ev provider.Event) error {
		if ev.Kind == provider.KindRef {
			go p.Cancel(context.Background(), ev.Ref)
		}
		return r.emit(ev)
	}
	err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Prompt: "x"}, emit)
	if err == nil || !strings.Contains(err.Error(), "killed by") {
		t.Fatalf("err %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.live) != 0 {
		t.Errorf("live processes left registered: %v", p.live)
	}
}

func TestBinaryNotFound(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Harness: "codex", Command: filepath.Join(t.TempDir(), "codex")})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Stream(t.Context(), provider.Request{Prompt: "x"}, (&recorder{t: t}).emit)
	if classOf(err) != diagnostics.ClassDeterministic || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("err %v", err)
	}
	if _, err := p.LookPath(); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("LookPath: %v", err)
	}
	p, _ = New(Config{Harness: "codex", Command: os.Args[0]})
	if path, err := p.LookPath(); err != nil || path != os.Args[0] {
		t.Errorf("LookPath: %q %v", path, err)
	}
}

func TestCapabilities(t *testing.T) {
	p, err := New(Config{Harness: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Capabilities(); got != (provider.Capabilities{Resume: true, Cancel: true, IdleHandled: true}) {
		t.Errorf("capabilities %+v", got)
	}
}
