package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/noderun/noderun/internal/humanlog"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/ledger"
)

// Issue 24: `make demo`, as the README's first line runs it, says each fact
// once (the run's verdicts and totals, then the table of figures), and no
// line of its log is wider than a CI log shows.
func TestMakeDemoSaysEachFactOnce(t *testing.T) {
	testkit.SkipInShort(t, "builds the command with make")
	t.Parallel()
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "demo.db")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("make", "-s", "-C", root, "demo", "BIN="+filepath.Join(dir, "noderun"), "DEMO_DB="+db)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("make demo: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	// The verdicts and totals as the ledger computes them, independently of
	// what was printed.
	code, out, errs := runCLI(t, "diagnose", "last", "--json", "--db", db)
	if code != exitOK {
		t.Fatalf("diagnose: exit %d\n%s", code, errs)
	}
	var acct ledger.Account
	if err := json.Unmarshal([]byte(out), &acct); err != nil {
		t.Fatal(err)
	}
	all := stdout.String() + stderr.String()
	facts := append([]string{acct.RunID + " completed"}, acct.Summary...)
	for _, n := range acct.Nodes {
		facts = append(facts, n.Verdict.Text)
	}
	for _, f := range facts {
		if n := strings.Count(all, f); n != 1 {
			t.Errorf("printed %d times, want once: %q", n, f)
		}
	}
	// The table of figures is there, once.
	if n := strings.Count(stdout.String(), "REGENERATED"); n != 1 {
		t.Errorf("the diagnose table printed %d times", n)
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > humanlog.PipeWidth {
			t.Errorf("a stderr line of %d columns: %q", n, l)
		}
		for _, internal := range []string{"continued_from_deltas", "resent_prefix_bytes", "run=", "diag="} {
			if strings.Contains(l, internal) {
				t.Errorf("a stderr line shows %q: %q", internal, l)
			}
		}
	}
	// The log says the run id once, when the run starts.
	if n := strings.Count(stderr.String(), acct.RunID); n != 1 {
		t.Errorf("the run id is on %d stderr lines, want 1:\n%s", n, stderr.String())
	}
}

// Issue 24: at 80 columns, nothing the live view scrolls above its lines
// wraps (the log's lines fold at spaces, the live lines are cut to the
// width), and the result table folds its notes under themselves.
func TestLiveViewFitsEightyColumns(t *testing.T) {
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "testdata", "graphs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	screen, _ := liveRunSized(t, 80, 60, "info", string(src))
	var got string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if got = screen("-S", "-"); strings.Contains(got, "\noutput: ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish within 60s:\n%s", got)
		}
	}
	joined := screen("-S", "-", "-J")
	// capture-pane -J joins the lines the terminal wrapped: equal line
	// counts mean none was.
	if a, b := strings.Count(got, "\n"), strings.Count(joined, "\n"); a != b {
		t.Errorf("%d lines on screen but %d once wrapped lines are joined: a line wrapped\n%s", a, b, joined)
	}
	for _, l := range strings.Split(joined, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	for _, w := range []string{"disconnect detected", "re-attached to", "recovered from 1 disconnect by continue"} {
		if !strings.Contains(joined, w) {
			t.Errorf("the screen lacks %q:\n%s", w, joined)
		}
	}
}

// Issue 24: after Ctrl-C on a terminal, the line after the echoed ^C starts
// at the first column, and the interruption is said once: the table's state
// says the node is detached, and the commands (with --db) are on lines of
// their own.
func TestCtrlCOnATerminal(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 300})
	screen, keys := liveRunSized(t, 80, 60, "info", fmt.Sprintf(
		"name: slow\nprofile: ci\nproviders:\n  p: {kind: responses, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: %s}\n",
		srv.BaseURL(), intPrompt))
	waitStreaming(t, srv, 100)
	keys("C-c")
	var got string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got = screen("-S", "-", "-J"); strings.Contains(got, "press Ctrl-C again") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no interruption message within 20s:\n%s", got)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "interrupted after") && !strings.HasPrefix(l, "a ") {
			t.Errorf("a line shifted after ^C: %q", l)
		}
	}
	for _, w := range []string{"interrupted (detached)", "\n  noderun resume ", "\n  noderun cancel ", " --db j.db\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("the screen lacks %q:\n%s", w, got)
		}
	}
	keys("C-c") // cancel what it left running: the test's simulator stops generating
}

// Issue 24: a response the provider answers 404 for is not running (it
// expired, or the provider forgot it): cancel says so and exits 0.
func TestCancelOfAForgottenResponseIsNotAFailure(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
	db, _, _ := interruptRun(t, srv, syscall.SIGTERM)
	// status says what the run's own table said: resumable, and detached.
	if _, out, _ := runCLI(t, "status", "last", "--db", db); !strings.Contains(out, "interrupted (detached)") {
		t.Errorf("status after the interruption:\n%s", out)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.BaseURL(), "http://"), "/v1")
	srv.Close() // a new simulator on the same address knows no response
	forgetful := sim.New(sim.Config{Seed: intSeed})
	// Closed, the first simulator's port is free for the kernel to give to
	// any client's connection as its own end (the other tests run beside
	// this one): once in a CI run it was, and the bind failed. Such a
	// connection ends; the address is taken again when it has.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := forgetful.Start(addr)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { forgetful.Close() })
	code, out, stderr := runCLI(t, "cancel", "last", "--db", db)
	if code != exitOK || !strings.Contains(out, "not running") || !strings.Contains(out, "404") {
		t.Fatalf("cancel of a forgotten response: exit %d\n%s\n%s", code, out, stderr)
	}
	if n := forgetful.Stats().Requests[sim.EndpointResponsesCancel]; n != 0 {
		t.Errorf("%d cancel request(s) for a response the status check found missing", n)
	}
	// Journaled: the node is no longer said to be detached.
	if _, out, _ := runCLI(t, "status", "last", "--db", db); !strings.Contains(out, "interrupted") || strings.Contains(out, "detached") {
		t.Errorf("status after the cancel:\n%s", out)
	}
}
