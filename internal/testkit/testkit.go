// Package testkit holds the helpers that tests in several packages share:
// journals in temporary directories, a buffer a process writes to while a
// test reads it, the noderun command built for tests that need it as a real
// process, and the repository's root (where `make tools` installs what the
// tests run). The simulator has its own: provider/sim/simtest.
package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/noderun/noderun/journal"
)

// OpenJournal opens the journal at path, failing the test if it cannot, and
// closes it when the test ends. A test may close it sooner (Close is
// idempotent), where the file must be left to another process.
func OpenJournal(tb testing.TB, path string, opts ...journal.Option) *journal.Journal {
	tb.Helper()
	j, err := journal.Open(context.Background(), path, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = j.Close() })
	return j
}

// TempJournal opens a new journal, named name, in a temporary directory of
// its own, and closes it when the test ends (before the directory goes).
func TempJournal(tb testing.TB, name string) *journal.Journal {
	tb.Helper()
	return OpenJournal(tb, filepath.Join(tb.TempDir(), name))
}

// Buffer collects what a process or a logger writes while the test reads
// it: a bytes.Buffer safe for concurrent use. The zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what has been written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CLI is the noderun command, built for the tests that need it as a real
// process (to kill -9 it, to run it as a Temporal worker). A test package
// keeps one: it is built once, on first use, and Remove (from TestMain)
// deletes it. The zero value is ready.
//
// With $NODERUN_TEST_BIN set (make test builds bin/noderun first and sets
// it), every package runs that binary instead: one link of the command per
// make test, not one per package that needs it, each at its start, beside
// the other packages' tests.
type CLI struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the command if it has not been built yet and returns its
// path, failing the test if it cannot be built. Under -short it skips the
// test: a noderun process of its own (killed -9, or a Temporal worker) is a
// link of the command and seconds of waiting, left to the full suite.
func (c *CLI) Path(tb testing.TB) string {
	tb.Helper()
	SkipInShort(tb, "runs noderun as a process of its own")
	c.once.Do(func() { c.err = c.build() })
	if c.err != nil {
		tb.Fatal(c.err)
	}
	return c.path
}

// build runs go build by import path, so that it works from any package's
// directory in the module.
func (c *CLI) build() error {
	if p := os.Getenv(TestBinEnv); p != "" {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("$%s %q: not an absolute path (the tests run in each package's directory)", TestBinEnv, p)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("$%s: %w; unset it to build the command", TestBinEnv, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("$%s %q: not an executable file; unset it to build the command", TestBinEnv, p)
		}
		c.path = p
		return nil
	}
	dir, err := os.MkdirTemp("", "noderun-bin-")
	if err != nil {
		return err
	}
	c.dir = dir
	c.path = filepath.Join(dir, "noderun")
	if out, err := exec.Command("go", "build", "-o", c.path, "github.com/noderun/noderun/cmd/noderun").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %w\n%s", err, out)
	}
	return nil
}

// TestBinEnv names a noderun binary built beforehand for every package's
// tests (CLI): make test sets it.
const TestBinEnv = "NODERUN_TEST_BIN"

// Remove deletes the built command, if any (never $NODERUN_TEST_BIN's). Call it once every test is done.
func (c *CLI) Remove() {
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// RepoRoot is the repository's root: the directory of go.mod above the
// test's working directory (its package's directory), where `make tools`
// installs what the tests run (.tools).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod) not found above the test's directory")
		}
		dir = parent
	}
}

// Check returns a function that fails tb at once on an error: for a test
// whose every step must succeed before the next means anything.
func Check(tb testing.TB) func(error) {
	return func(err error) {
		if err != nil {
			tb.Helper()
			tb.Fatal(err)
		}
	}
}
