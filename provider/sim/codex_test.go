//go:build unix

package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/provider/harness"
)

// The Codex CLI tests run the real `codex exec` (v0.169.0) against the
// simulator, as a user's CI would.
//
// What Codex sends: POST /v1/responses with stream=true, store=false, no
// background, no instructions field, reasoning {"summary":"auto"} (no
// effort, so no reasoning item is generated), tools, tool_choice,
// include, prompt_cache_key and client_metadata, and an input array of
// message items: two "developer" messages (its long system prompt, skills
// and permissions), a "user" message holding <environment_context> (cwd,
// shell, date) and last the "user" message with the prompt as one
// input_text part. ResponsesInput takes that last user message, so the
// expected agent_message is simply
//
//	strings.Join(Text(model, prompt, cfg.Seed, cfg.Tokens), "")
//
// with model the -m value. The varying context (cwd, date, ids) never
// reaches the text, which is why the input is defined as the last user
// message.

// codexRun is what one `codex exec --json` printed.
type codexRun struct {
	events []map[string]any
	stdout string
	stderr string
	exit   int
}

// last returns the last event of type typ, nil if none.
func (r codexRun) last(typ string) map[string]any {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i]["type"] == typ {
			return r.events[i]
		}
	}
	return nil
}

// agentMessage is the text of the last completed agent_message item.
func (r codexRun) agentMessage() (string, bool) {
	for i := len(r.events) - 1; i >= 0; i-- {
		ev := r.events[i]
		item, _ := ev["item"].(map[string]any)
		if ev["type"] == "item.completed" && item["type"] == "agent_message" {
			s, ok := item["text"].(string)
			return s, ok
		}
	}
	return "", false
}

// runCodex runs `codex exec [extra flags] prompt` against s with its own CODEX_HOME and HOME, no
// shell, stdin on /dev/null, and a dead proxy for everything but 127.0.0.1
// so that it can talk to nothing else. The whole process group (the node
// wrapper and the native binary it spawns) is killed at the end.
func runCodex(t *testing.T, s *Server, prompt string, extra ...string) codexRun {
	t.Helper()
	bin := codexbin.Path(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	provider := fmt.Sprintf(`model_providers.sim={name="sim",base_url=%q,wire_api="responses",env_key="SIM_KEY",stream_max_retries=1,request_max_retries=0}`, s.BaseURL())
	cmd := exec.CommandContext(ctx, bin, "exec", "--json", "--skip-git-repo-check",
		"-c", "model_provider=sim", "-c", provider,
		"-c", "check_for_update_on_startup=false", "-m", "sim")
	cmd.Args = append(append(append(cmd.Args, harness.CodexQuietArgs()...), extra...), prompt)
	cmd.Dir = t.TempDir()
	cmd.Stdin = nil // /dev/null: Codex otherwise waits for more input
	const deadProxy = "http://127.0.0.1:9"
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "SIM_KEY=x",
		"HTTP_PROXY=" + deadProxy, "HTTPS_PROXY=" + deadProxy, "ALL_PROXY=" + deadProxy,
		"http_proxy=" + deadProxy, "https_proxy=" + deadProxy, "all_proxy=" + deadProxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group, if any
	}
	r := codexRun{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("codex timed out\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("codex: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			r.events = append(r.events, ev)
		}
	}
	return r
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestCodexCompletes: Codex finishes a turn against the simulator and its
// final agent message is the simulator's deterministic text.
func TestCodexCompletes(t *testing.T) {
	const prompt = "Say hello to noderun"
	cfg := Config{Seed: 21, Tokens: 48, TokensPerSecond: 2000, Logger: testLogger(t)}
	s := start(t, cfg)
	r := runCodex(t, s, prompt)
	if r.exit != 0 || r.last("turn.completed") == nil {
		t.Fatalf("exit %d, no turn.completed\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	got, ok := r.agentMessage()
	if w := want("sim", prompt, cfg.Seed, cfg.Tokens); !ok || got != w {
		t.Fatalf("agent_message\n got %q\nwant %q\nstdout:\n%s", got, w, r.stdout)
	}
	st := s.Stats()
	if st.Requests[EndpointResponsesCreate] != 1 || st.TokensGenerated != int64(cfg.Tokens) {
		t.Fatalf("stats %+v", st)
	}
}

// TestCodexReasoning: with a reasoning effort Codex sends reasoning.effort,
// the simulator emits a reasoning item, and Codex reports its summary.
func TestCodexReasoning(t *testing.T) {
	const prompt = "Think, then answer"
	cfg := Config{Seed: 2, Tokens: 16, Logger: testLogger(t)}
	s := start(t, cfg)
	r := runCodex(t, s, prompt, "-c", `model_reasoning_effort="high"`, "-c", `model_reasoning_summary="detailed"`)
	got, _ := r.agentMessage()
	if r.exit != 0 || got != want("sim", prompt, cfg.Seed, cfg.Tokens) {
		t.Fatalf("exit %d agent_message %q\nstdout:\n%s", r.exit, got, r.stdout)
	}
	var summary string
	for _, ev := range r.events {
		if item, _ := ev["item"].(map[string]any); ev["type"] == "item.completed" && item["type"] == "reasoning" {
			summary, _ = item["text"].(string)
		}
	}
	if w := strings.Join(ReasoningText("sim", prompt, cfg.Seed, "high"), ""); summary != w {
		t.Fatalf("reasoning\n got %q\nwant %q", summary, w)
	}
}

// TestCodexGivesUpAfterItsRetries: every stream closes cleanly after a few
// events; Codex retries stream_max_retries (1) times, then fails the turn
// with "stream disconnected before completion" and exits 1.
func TestCodexGivesUpAfterItsRetries(t *testing.T) {
	s := start(t, Config{Tokens: 48, Logger: testLogger(t), Faults: []Fault{
		{Endpoint: EndpointResponsesCreate, Requests: []int{1, 2, 3}, Kind: FaultClose, AfterEvents: 6},
	}})
	r := runCodex(t, s, "Say hello")
	failed := r.last("turn.failed")
	if r.exit != 1 || failed == nil {
		t.Fatalf("exit %d, turn.failed %v\nstdout:\n%s\nstderr:\n%s", r.exit, failed, r.stdout, r.stderr)
	}
	msg, _ := failed["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "stream disconnected before completion") {
		t.Fatalf("turn.failed message %q", msg)
	}
	if !strings.Contains(r.stdout, "Reconnecting... 1/1") {
		t.Fatalf("no Codex retry seen:\n%s", r.stdout)
	}
	if st := s.Stats(); st.Requests[EndpointResponsesCreate] != 2 || st.Faults["close"] != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCodexRetriesFromScratch: one reset mid-stream; Codex re-sends the
// whole request (its own stream retry) and completes, so the simulator
// generates the text twice; noderun's background resume avoids that.
func TestCodexRetriesFromScratch(t *testing.T) {
	cfg := Config{Seed: 4, Tokens: 30, Logger: testLogger(t), Faults: []Fault{
		{Endpoint: EndpointResponsesCreate, Requests: []int{1}, Kind: FaultReset, AfterEvents: 8},
	}}
	s := start(t, cfg)
	r := runCodex(t, s, "Retry me")
	got, _ := r.agentMessage()
	if r.exit != 0 || r.last("turn.completed") == nil || got != want("sim", "Retry me", cfg.Seed, cfg.Tokens) {
		t.Fatalf("exit %d agent_message %q\nstdout:\n%s\nstderr:\n%s", r.exit, got, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "Reconnecting... 1/1") {
		t.Fatalf("no Codex retry seen:\n%s", r.stdout)
	}
	// 4 tokens before the reset (created, in_progress, item, part, 4 deltas), then all 30 again
	if st := s.Stats(); st.Requests[EndpointResponsesCreate] != 2 || st.TokensGenerated != 34 {
		t.Fatalf("stats %+v", st)
	}
}
