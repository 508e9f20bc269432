package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// An Anthropic run's usage, as diagnose --json shows it: the system prompt
// written to the prompt cache by the first node and read from it by the
// second, thinking counted as reasoning.
func TestAnthropicUsageInDiagnose(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 2, Tokens: 30})
	system := strings.Repeat("You are a careful technical writer. ", 20)
	graph, db := writeGraph(t, fmt.Sprintf(`name: cached
providers:
  p: {kind: anthropic, base_url: %q, api_key_env: NODERUN_TEST_ANTHROPIC_KEY, model: claude-sonnet-4-5}
nodes:
  - {id: a, provider: p, system: %q, prompt: hello, reasoning_effort: low}
  - {id: b, provider: p, system: %q, prompt: hello again, needs: [a]}
`, srv.BaseURL(), system, system))
	t.Setenv("NODERUN_TEST_ANTHROPIC_KEY", "sk-ant-test")
	if code, out, errs := runCLI(t, "run", "--db", db, graph); code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	a := diagnoseJSON(t, db)
	tok := a.Totals.Tokens
	if tok.CacheWrite == 0 || tok.CacheRead != tok.CacheWrite || tok.Reasoning == 0 || tok.Input == 0 || tok.Estimated {
		t.Errorf("tokens %+v: want the system prompt written then read, reasoning and input reported", tok)
	}
	// thinking is not in the output
	code, out, _ := runCLI(t, "show", "last", "a", "--db", db)
	thinking := strings.Join(sim.Text("claude-sonnet-4-5", "thinking:hello", 2, sim.ThinkingTokens), "")
	if code != exitOK || strings.Contains(out, thinking) || !strings.Contains(out, strings.Join(sim.Text("claude-sonnet-4-5", "hello", 2, 30), "")) {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "show", "last", "a", "--db", db, "--thinking"); code != exitOK || out != thinking {
		t.Errorf("show --thinking: exit %d\n%q, want %q", code, out, thinking)
	}
}

// `noderun chaos` on an Anthropic graph: every default case and the
// Anthropic error-event cases hold, with no API key.
func TestChaosAnthropicCLI(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := chaosCLI(t, "../../testdata/chaos/anthropic.yaml", "--faults", "../../testdata/chaos/anthropic-matrix.yaml")
	if code != 0 || !strings.Contains(stdout, "54 passed, every case held") {
		t.Fatalf("chaos anthropic.yaml: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
