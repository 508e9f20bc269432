package harness

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
	p, _ := fake(t, "claude", `
out {"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"6f1c2d1e-0000-4000-8000-000000000002","errors":["No conversation found with session ID: 6f1c2d1e-0000-4000-8000-000000000002"]}
err No conversation found with session ID: 6f1c2d1e-0000-4000-8000-000000000002
exit 1
`, "")
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

func TestPathSafe(t *testing.T) {
	for in, want := range map[string]string{"": "_", "a-b_c.d": "a-b_c.d", "a/b": "a_b", "..": "_..", ".": "_.", "é": "__"} {
		if got := pathSafe(in); got != want {
			t.Errorf("pathSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
