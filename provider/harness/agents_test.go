package harness

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// The built-in claude and gemini descriptors on the fake agent, with lines
// copied from the real CLIs (Claude Code 2.1.328, Gemini CLI 0.61.0), and
// the descriptor features they use: env, files, {state_dir}, format, delta.

// envOf returns the values the fake agent printed with its env command.
func envOf(r *recorder) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for _, ev := range r.events {
		var v struct{ Type, Name, Value string }
		if ev.Kind == provider.KindRaw && json.Unmarshal(ev.Raw, &v) == nil && v.Type == "env" {
			out[v.Name] = v.Value
		}
	}
	return out
}

const claudeInit = `out {"type":"system","subtype":"init","cwd":"/w","session_id":"6f1c2d1e-0000-4000-8000-000000000001","model":"sim"}`

func TestFakeClaudeSuccess(t *testing.T) {
	t.Parallel()
	p, cfg := fake(t, "claude", claudeInit+`
env CLAUDE_CONFIG_DIR
env CLAUDE_CODE_MAX_RETRIES
env CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK
env ANTHROPIC_CUSTOM_HEADERS
out {"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":504,"error_status":null,"error":"unknown","session_id":"6f1c2d1e-0000-4000-8000-000000000001"}
out {"type":"assistant","message":{"content":[{"type":"text","text":"final ✓"}]},"session_id":"6f1c2d1e-0000-4000-8000-000000000001"}
out {"type":"result","subtype":"success","is_error":false,"result":"final ✓","terminal_reason":"completed","usage":{"input_tokens":6,"output_tokens":64},"session_id":"6f1c2d1e-0000-4000-8000-000000000001"}
`, "")
	state := p.cfg.StateDir
	r := &recorder{t: t}
	if err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Node: "n/1", Prompt: "hi"}, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	if got := r.out.String(); got != "final ✓" {
		t.Errorf("output %q", got)
	}
	if refs := r.refs(); len(refs) != 1 || refs[0] != "6f1c2d1e-0000-4000-8000-000000000001" {
		t.Errorf("refs %v", refs)
	}
	if d := r.diags(diagnostics.HarnessRetrying); len(d) != 1 || d[0].Message != "API retry 1/1 in 504 ms (error unknown, status null)" {
		t.Errorf("NR302 %v", d)
	}
	if r.count(provider.KindProgress) != 1 {
		t.Errorf("want the assistant message as progress\n%s", r.dump())
	}
	env := envOf(r)
	if want := filepath.Join(state, "claude", "n_1"); env["CLAUDE_CONFIG_DIR"] != want {
		t.Errorf("CLAUDE_CONFIG_DIR %q, want %q (the node's own store)", env["CLAUDE_CONFIG_DIR"], want)
	}
	if env["ANTHROPIC_CUSTOM_HEADERS"] != "X-Noderun-Node: n/1" {
		t.Errorf("ANTHROPIC_CUSTOM_HEADERS %q, want the node named", env["ANTHROPIC_CUSTOM_HEADERS"])
	}
	if env["CLAUDE_CODE_MAX_RETRIES"] != "1" || env["CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK"] != "1" {
		t.Errorf("retry bounds %v", env)
	}
	if fi, err := os.Stat(filepath.Join(state, "claude", "n_1")); err != nil || !fi.IsDir() {
		t.Errorf("state dir: %v", err)
	}

	// The provider's env overrides the descriptor's.
	cfg.Env["CLAUDE_CODE_MAX_RETRIES"] = "4"
	p2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r = &recorder{t: t}
	if err := p2.Stream(testCtx(t, 20*time.Second), provider.Request{Node: "n", Prompt: "hi"}, r.emit); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if v := envOf(r)["CLAUDE_CODE_MAX_RETRIES"]; v != "4" {
		t.Errorf("CLAUDE_CODE_MAX_RETRIES %q, want the provider's 4", v)
	}
}

// A failed turn ends with subtype "success" and is_error true: never success.
func TestFakeClaudeFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, line string
		class      diagnostics.Class
		says       string
	}{
		{"cut", `out {"type":"result","subtype":"success","is_error":true,"result":"API Error: Connection to the API was lost (StreamTruncated). This is usually temporary — try again.","terminal_reason":"api_error"}`,
			diagnostics.ClassDisconnect, "(StreamTruncated)"},
		{"auth", `out {"type":"result","subtype":"success","is_error":true,"result":"Failed to authenticate. API Error: 401 invalid x-api-key","terminal_reason":"api_error"}`,
			diagnostics.ClassDeterministic, "rejected the credentials (401)"},
		{"overloaded", `out {"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.","terminal_reason":"api_error"}`,
			diagnostics.ClassServer, "API Error: 529"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := fake(t, "claude", claudeInit+"\n"+tc.line+"\nexit 1\n", "")
			r := &recorder{t: t}
			err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Node: "n", Prompt: "hi"}, r.emit)
			if err == nil || classOf(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v (class %s), want %s saying %q\n%s", err, classOf(err), tc.class, tc.says, r.dump())
			}
			if r.count(provider.KindDone) != 0 {
				t.Error("a failed turn was reported done")
			}
		})
	}
}

func TestFakeClaudeResumeNoSession(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, "claude", "", `
out {"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"6f1c2d1e-0000-4000-8000-000000000002","errors":["No conversation found with session ID: 6f1c2d1e-0000-4000-8000-000000000002"]}
err No conversation found with session ID: 6f1c2d1e-0000-4000-8000-000000000002
exit 1
`)
	r := &recorder{t: t}
	err := p.Resume(testCtx(t, 20*time.Second), provider.Request{Node: "n", Prompt: "hi"},
		provider.Cursor{Ref: "6f1c2d1e-0000-4000-8000-000000000002", Seq: -1}, r.emit)
	var me *MismatchError
	if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) || !strings.Contains(me.Message, "No conversation found") {
		t.Fatalf("err %v\n%s", err, r.dump())
	}
	if len(r.diags(diagnostics.ThreadMismatch)) != 1 {
		t.Errorf("want NR304\n%s", r.dump())
	}
}

func TestFakeGeminiDeltasAndSettings(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, "gemini", `
out {"type":"init","timestamp":"t","session_id":"9a31c761-a8e8-4b9a-8e75-fbab647be838","model":"sim"}
out {"type":"message","timestamp":"t","role":"user","content":"hi"}
env GEMINI_CLI_HOME
env GEMINI_CLI_CUSTOM_HEADERS
env GEMINI_CLI_NO_RELAUNCH
out {"type":"message","timestamp":"t","role":"assistant","content":"Señor","delta":true}
out {"type":"message","timestamp":"t","role":"assistant","content":" stream ✓","delta":true}
out {"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":70,"input_tokens":6,"output_tokens":64}}
`, "")
	r := &recorder{t: t}
	if err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Node: "n", Prompt: "hi"}, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	if got := r.out.String(); got != "Señor stream ✓" {
		t.Errorf("output %q, want the deltas joined", got)
	}
	home := filepath.Join(p.cfg.StateDir, "gemini", "n")
	if got := envOf(r)["GEMINI_CLI_HOME"]; got != home {
		t.Errorf("GEMINI_CLI_HOME %q, want %q", got, home)
	}
	if got := envOf(r)["GEMINI_CLI_CUSTOM_HEADERS"]; got != "X-Noderun-Node: n" {
		t.Errorf("GEMINI_CLI_CUSTOM_HEADERS %q, want the node named", got)
	}
	if got := envOf(r)["GEMINI_CLI_NO_RELAUNCH"]; got != "true" {
		t.Errorf("GEMINI_CLI_NO_RELAUNCH %q, want true (one process per node)", got)
	}
	b, err := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	var settings struct {
		Security struct{ Auth struct{ SelectedType string } }
		General  struct{ MaxAttempts int }
	}
	if err != nil || json.Unmarshal(b, &settings) != nil || settings.Security.Auth.SelectedType != "gemini-api-key" ||
		settings.General.MaxAttempts != 1 {
		t.Errorf("settings.json: %v %s", err, b)
	}
	if d := r.events[len(r.events)-1]; d.Kind != provider.KindDone || d.Usage == nil || d.Usage.OutputTokens != 64 {
		t.Errorf("last event %+v", d)
	}
}

func TestFakeGeminiCutTurn(t *testing.T) {
	t.Parallel()
	p, _ := fake(t, "gemini", `
out {"type":"init","timestamp":"t","session_id":"9a31c761-a8e8-4b9a-8e75-fbab647be838","model":"sim"}
out {"type":"message","timestamp":"t","role":"assistant","content":"Señor","delta":true}
out {"type":"error","timestamp":"t","severity":"error","message":"Model stream ended without a finish reason."}
out {"type":"result","timestamp":"t","status":"error","stats":{"input_tokens":6,"output_tokens":1}}
`, "")
	r := &recorder{t: t}
	err := p.Stream(testCtx(t, 20*time.Second), provider.Request{Node: "n", Prompt: "hi"}, r.emit)
	if classOf(err) != diagnostics.ClassDisconnect || !strings.Contains(err.Error(), "Model stream ended without a finish reason") {
		t.Fatalf("err %v (class %s)\n%s", err, classOf(err), r.dump())
	}
}

// The dropped rule of the gemini descriptor on the fake agent: a resume that
// Gemini CLI answers with "No previous sessions found" while the node's
// store holds the session's record is a dropped session (class stuck, no
// effects); the record is set aside and the next Stream runs the restart
// argv (--session-id) with the node's prompt under the same id, once.
func TestFakeGeminiDroppedSessionRestarts(t *testing.T) {
	t.Parallel()
	const id = "9a31c761-a8e8-4b9a-8e75-fbab647be838"
	const init = `out {"type":"init","timestamp":"t","session_id":"` + id + `","model":"sim"}`
	for _, tc := range []struct {
		name, record string
		effects      bool
	}{
		{"no tool call", `{"sessionId":"` + id + `"}` + "\n" + `{"$set":{"messages":[]}}`, false},
		{"tool call", `{"sessionId":"` + id + `"}` + "\n" + `{"id":"m1","type":"gemini","toolCalls": [{"name":"write_file"}]}` + "\n" + `{"$set":{"messages":[]}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, cfg := fake(t, "gemini", init+`
argv
out {"type":"message","timestamp":"t","role":"assistant","content":"fresh","delta":true}
out {"type":"result","timestamp":"t","status":"success","stats":{"input_tokens":6,"output_tokens":1}}
`, `
err Error resuming session: No previous sessions found for this project.
exit 42
`)
			cfg.Env["FAKE_RESTART_SCRIPT"] = init + `
argv
out {"type":"message","timestamp":"t","role":"assistant","content":"again ✓","delta":true}
out {"type":"result","timestamp":"t","status":"success","stats":{"input_tokens":6,"output_tokens":2}}
`
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			node := filepath.Join(cfg.StateDir, "gemini", "n")
			chats := filepath.Join(node, ".gemini", "tmp", "work", "chats")
			record := filepath.Join(chats, "session-2026-11-30T17-25-9a31c761.jsonl")
			other := filepath.Join(chats, "session-2026-11-30T17-20-00000000.jsonl")
			if err := os.MkdirAll(chats, 0o700); err != nil {
				t.Fatal(err)
			}
			for f, body := range map[string]string{record: tc.record, other: `{"sessionId":"00000000-0000-4000-8000-000000000000"}`} {
				if err := os.WriteFile(f, []byte(body+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			req := provider.Request{Node: "n", Model: "sim", Prompt: "the prompt"}
			ctx := testCtx(t, 20*time.Second)

			// An unknown session is not dropped: nothing records it.
			r := &recorder{t: t}
			err = p.Resume(ctx, req, provider.Cursor{Ref: "6f1c2d1e-0000-4000-8000-000000000009", Seq: -1}, r.emit)
			var me *MismatchError
			if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) {
				t.Fatalf("unknown session: err %v\n%s", err, r.dump())
			}

			r = &recorder{t: t}
			err = p.Resume(ctx, req, provider.Cursor{Ref: id, Seq: -1}, r.emit)
			var de *DroppedError
			if classOf(err) != diagnostics.ClassStuck || !errors.As(err, &de) || de.Thread != id || de.Effects != tc.effects ||
				errors.Is(err, provider.ErrNoEffects) == tc.effects {
				t.Fatalf("err %v (effects %v)\n%s", err, tc.effects, r.dump())
			}
			if d := r.diags(diagnostics.ThreadDropped); len(d) != 1 || len(r.diags(diagnostics.ThreadMismatch)) != 0 {
				t.Errorf("want NR306 and no NR304\n%s", r.dump())
			}
			if _, err := os.Stat(record); !os.IsNotExist(err) {
				t.Errorf("the dropped record is still in chats/: %v", err)
			}
			if _, err := os.Stat(other); err != nil {
				t.Errorf("another session's record was moved: %v", err)
			}
			if _, err := os.Stat(filepath.Join(node, droppedDir, filepath.Base(record))); err != nil {
				t.Errorf("the record is not set aside: %v", err)
			}

			// A resume again (the process that set it aside was stopped
			// before the restart; `noderun resume` re-attaches): still dropped.
			r = &recorder{t: t}
			err = p.Resume(ctx, req, provider.Cursor{Ref: id, Seq: -1}, r.emit)
			if classOf(err) != diagnostics.ClassStuck || !errors.As(err, &de) || de.Effects != tc.effects {
				t.Fatalf("second resume: err %v\n%s", err, r.dump())
			}

			// The next attempt starts the prompt again under the same id ...
			r = &recorder{t: t}
			if err := p.Stream(ctx, req, r.emit); err != nil {
				t.Fatalf("restart: %v\n%s", err, r.dump())
			}
			argv, _, _ := argvOf(t, r)
			if i := slices.Index(argv, "--session-id"); i < 0 || i+1 >= len(argv) || argv[i+1] != id ||
				argv[len(argv)-1] != "the prompt" || slices.Contains(argv, "--resume") {
				t.Errorf("restart argv %q", argv)
			}
			if got := r.out.String(); got != "again ✓" {
				t.Errorf("output %q", got)
			}
			if refs := r.refs(); len(refs) != 1 || refs[0] != id {
				t.Errorf("refs %v, want %s", refs, id)
			}
			// ... once: the attempt after it is a new session.
			r = &recorder{t: t}
			if err := p.Stream(ctx, req, r.emit); err != nil {
				t.Fatalf("Stream: %v\n%s", err, r.dump())
			}
			if argv, _, _ := argvOf(t, r); slices.Contains(argv, "--session-id") || r.out.String() != "fresh" {
				t.Errorf("after the restart: argv %q, output %q", argv, r.out.String())
			}
		})
	}
}

func TestPathSafe(t *testing.T) {
	for in, want := range map[string]string{"": "_", "a-b_c.d": "a-b_c.d", "a/b": "a_b", "..": "_..", ".": "_.", "é": "__"} {
		if got := pathSafe(in); got != want {
			t.Errorf("pathSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
