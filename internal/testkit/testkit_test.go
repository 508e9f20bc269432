package testkit

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
	t.Setenv(TestBinEnv, "") // built here, whatever make test built
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

// With $NODERUN_TEST_BIN set, CLI runs that binary, never removes it, and
// refuses a path it could not run from every package's directory.
func TestCLIFromTestBinEnv(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "noderun") // any executable: CLI does not run it
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TestBinEnv, bin)
	var c CLI
	if p := c.Path(t); p != bin {
		t.Errorf("Path %s, want $%s %s", p, TestBinEnv, bin)
	}
	c.Remove()
	if _, err := os.Stat(bin); err != nil {
		t.Errorf("$%s after Remove: %v, want it kept", TestBinEnv, err)
	}

	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"bin/noderun", dir, plain, filepath.Join(dir, "missing")} {
		t.Setenv(TestBinEnv, bad)
		var c CLI
		if err := c.build(); err == nil || !strings.Contains(err.Error(), TestBinEnv) {
			t.Errorf("$%s=%s: %v, want an error naming it", TestBinEnv, bad, err)
		}
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

// At most GOMAXPROCS tests hold a slot of a CPUs at once, however many run
// at once (here subtests run from goroutines of their own, which -parallel
// does not bound); the slot is held through the cleanups registered after it.
func TestCPUs(t *testing.T) {
	var c CPUs
	var mu sync.Mutex
	running, most := 0, 0
	var wg sync.WaitGroup
	for i := range 4 * slots() {
		wg.Go(func() {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				c.Take(t)
				mu.Lock()
				running++
				most = max(most, running)
				mu.Unlock()
				t.Cleanup(func() {
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					running--
					mu.Unlock()
				})
			})
		})
	}
	wg.Wait()
	if most < 1 || most > slots() {
		t.Errorf("%d tests held a slot at once, want 1 to %d", most, slots())
	}
}

// A slot freed goes to the tests waiting in TakeFirst before those that
// waited longer in Take.
func TestCPUsTakeFirst(t *testing.T) {
	var c CPUs
	var mu sync.Mutex
	var order []string
	until := func(cond func() bool) {
		for {
			c.mu.Lock()
			ok := cond()
			c.mu.Unlock()
			if ok {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	release := make([]chan struct{}, slots())
	for i := range release { // every slot taken
		release[i] = make(chan struct{})
		wg.Go(func() {
			t.Run("holder"+strconv.Itoa(i), func(t *testing.T) {
				c.Take(t)
				<-release[i]
			})
		})
	}
	until(func() bool { return c.ready && c.free == 0 })
	for i, name := range []string{"rest", "first"} {
		wg.Go(func() {
			t.Run(name, func(t *testing.T) {
				if name == "first" {
					c.TakeFirst(t)
				} else {
					c.Take(t)
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			})
		})
		until(func() bool { return len(c.first)+len(c.rest) == i+1 })
	}
	close(release[0]) // one slot freed: who gets it?
	until(func() bool { mu.Lock(); defer mu.Unlock(); return len(order) > 0 })
	for _, r := range release[1:] {
		close(r)
	}
	wg.Wait()
	if len(order) != 2 || order[0] != "first" {
		t.Errorf("served %v, want first before rest", order)
	}
}

// ParallelUnlessSet sets -test.parallel, unless the command line did.
func TestParallelUnlessSet(t *testing.T) {
	f := flag.Lookup("test.parallel")
	old := f.Value.String()
	defer func() { _ = flag.Set("test.parallel", old) }()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" || f.Name == "test.fuzz" })
	ParallelUnlessSet(97)
	if want := map[bool]string{true: old, false: "97"}[given]; f.Value.String() != want {
		t.Errorf("-test.parallel %s (given on the command line: %v), want %s", f.Value.String(), given, want)
	}
}
