// Package codexbin finds the agent CLIs that the tests run: Codex
// ($NODERUN_CODEX), Claude Code ($NODERUN_CLAUDE) and Gemini CLI
// ($NODERUN_GEMINI), else the copies `make tools` installs under
// <repository root>/.tools. The tests that need them fail, never skip, when
// one is missing: they are acceptance tests that CI must run.
package codexbin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
)

// Path returns the Codex binary or fails t with how to install it.
func Path(t testing.TB) string {
	t.Helper()
	return tool(t, "codex", "NODERUN_CODEX", "@openai/codex@0.169.0")
}

// Claude returns the Claude Code binary or fails t with how to install it.
func Claude(t testing.TB) string {
	t.Helper()
	return tool(t, "claude", "NODERUN_CLAUDE", "@anthropic-ai/claude-code@2.1.328")
}

// Gemini returns the Gemini CLI binary or fails t with how to install it.
func Gemini(t testing.TB) string {
	t.Helper()
	return tool(t, "gemini", "NODERUN_GEMINI", "@google/gemini-cli@0.61.0")
}

func tool(t testing.TB, name, env, pkg string) string {
	t.Helper()
	testkit.RealPeer(t, name)
	p, err := find(name, env)
	if err != nil {
		t.Fatalf("%v: run `make tools` (installs %s into .tools/) or set %s", err, pkg, env)
	}
	return p
}

func find(name, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	dir, err := testkit.RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, ".tools", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the %s CLI is not at %s", name, p)
	}
	return p, nil
}
