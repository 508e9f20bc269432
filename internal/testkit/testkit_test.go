package testkit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/noderun/noderun/journal"
)

// Writers and a reader at once lose nothing (and the race detector sees no race).
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("ab"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); len(got) != 1600 || strings.Trim(got, "ab") != "" {
		t.Errorf("%d bytes, want 1600 of ab", len(got))
	}
}

// A test's journal works while it runs and is closed when it ends.
func TestTempJournalClosedWhenTheTestEnds(t *testing.T) {
	var kept *journal.Journal
	t.Run("user", func(t *testing.T) {
		j := TempJournal(t, "j.db")
		if err := j.Flush(context.Background()); err != nil {
			t.Fatalf("the open journal: %v", err)
		}
		kept = j
	})
	if err := kept.Flush(context.Background()); err == nil {
		t.Error("the journal is still open after its test ended")
	}
}

// The command is built once, runs, and is gone after Remove.
func TestCLI(t *testing.T) {
	var c CLI
	defer c.Remove()
	p := c.Path(t)
	if again := c.Path(t); again != p {
		t.Errorf("built again: %s, then %s", p, again)
	}
	if out, err := exec.Command(p, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "noderun") {
		t.Errorf("%s --help: %v\n%s", p, err, out)
	}
	c.Remove()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("%s after Remove: %v, want it gone", p, err)
	}
}

// The root is the module's: two directories above this package.
func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if root != want {
		t.Errorf("RepoRoot %s, want %s", root, want)
	}
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(mod), "module github.com/noderun/noderun\n") {
		t.Errorf("%s/go.mod: %v\n%.60s", root, err, mod)
	}
}
