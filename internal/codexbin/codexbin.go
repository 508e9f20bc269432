// Package codexbin finds the Codex CLI that the tests run: $NODERUN_CODEX,
// else the copy `make tools` installs under <repository root>/.tools. The
// tests that need it fail, never skip, when it is missing: they are
// acceptance tests that CI must run.
package codexbin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Path returns the Codex binary or fails t with how to install it.
func Path(t testing.TB) string {
	t.Helper()
	p, err := find()
	if err != nil {
		t.Fatalf("%v: run `make tools` (installs @openai/codex@0.169.0 into .tools/) or set NODERUN_CODEX", err)
	}
	return p
}

func find() (string, error) {
	if p := os.Getenv("NODERUN_CODEX"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("NODERUN_CODEX=%s: %w", p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root (go.mod) not found above the test's directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, ".tools", "node_modules", ".bin", "codex")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the Codex CLI is not at %s", p)
	}
	return p, nil
}
