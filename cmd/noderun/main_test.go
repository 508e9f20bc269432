package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	_ "modernc.org/sqlite"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"noderun"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// Every malformed graph is rejected with exit code 2 and a message naming the
// file and line, before the journal is created.
func TestMalformedGraphsWriteNothing(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../testdata/graphs/invalid/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("invalid graph fixtures: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "j.db")
			code, _, stderr := runCLI(t, "run", "--db", db, f)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, filepath.Base(f)+":") {
				t.Errorf("error does not name the file with a line: %s", stderr)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("journal %s was created for a malformed graph", db)
			}
			if code, _, _ := runCLI(t, "validate", f); code != exitUsage {
				t.Errorf("validate exit %d, want 2", code)
			}
		})
	}
}

func TestDemoGraphRunsAndRecovers(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "demo.db")
	code, stdout, stderr := runCLI(t, "run", "--db", db, "--profile", "ci", "../../testdata/graphs/demo.yaml")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"NR101", "NR110", "NR111", "NR108"} { // a disconnect detected, an answer continued, a node recovered
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
	code, out, _ := runCLI(t, "events", "last", "--db", db, "--kind", "diagnostic")
	if code != 0 || !strings.Contains(out, "disconnect_detected") {
		t.Errorf("events: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "show", "last", "report", "--db", db)
	if code != 0 || len(out) < 100 {
		t.Errorf("show report: exit %d, %d bytes", code, len(out))
	}
	code, out, _ = runCLI(t, "status", "last", "--db", db)
	if code != 0 || strings.Count(out, "completed") < 5 {
		t.Errorf("status: exit %d\n%s", code, out)
	}
}

// kill -9 in the middle of a run leaves a journal that passes
// PRAGMA integrity_check and shows the run as unfinished.
func TestKill9LeavesAConsistentJournal(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	dir := t.TempDir()
	graph := filepath.Join(dir, "slow.yaml")
	src := `name: slow
profile: ci
providers:
  s:
    kind: sim
    sim: {seed: 1, tokens: 5000, tokens_per_second: 2000}
nodes:
  - {id: a, prompt: one}
  - {id: b, prompt: two}
  - {id: c, needs: [a], prompt: 'three {{ output "a" }}'}
`
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for trial := 0; trial < 3; trial++ {
		db := filepath.Join(dir, "j"+string(rune('0'+trial))+".db")
		cmd := exec.Command(bin, "run", "--db", db, graph)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Killed once it streams, then later each trial (the run takes
		// ~5 s): a fixed time from the start was, on a loaded machine,
		// sometimes before the run was journaled at all.
		for deadline := time.Now().Add(30 * time.Second); !streamed(t, db); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("trial %d: the run streamed nothing in 30 s", trial)
			}
		}
		time.Sleep(time.Duration(trial*400) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		integrityOK(t, db)
		j := testkit.OpenJournal(t, db)
		runs, err := j.Runs(context.Background(), 0)
		if err != nil || len(runs) != 1 {
			t.Fatalf("trial %d: runs %v %v", trial, runs, err)
		}
		if runs[0].Status != journal.RunRunning {
			t.Errorf("trial %d: killed run is %s, want it left running (unfinished)", trial, runs[0].Status)
		}
		evs, err := j.Events(context.Background(), runs[0].ID, journal.EventFilter{Kinds: []string{"delta"}})
		if err != nil || len(evs) == 0 {
			t.Errorf("trial %d: no deltas journaled before the kill (%v)", trial, err)
		}
		j.Close()
		// status counts what the journal holds of an unfinished node, not 0;
		// a node its killed runner left running reads interrupted
		// (canceled), never running (issue 41).
		code, out, errs := runCLI(t, "status", "last", "--db", db, "--json")
		if code != 0 || strings.Contains(out, `"running"`) || !regexp.MustCompile(`"state": "canceled",\s+"attempts": 1,\s+"bytes": [1-9]`).MatchString(out) {
			t.Errorf("trial %d: status of the killed run: exit %d\n%s%s", trial, code, out, errs)
		}
	}
}

func TestIntersperse(t *testing.T) {
	t.Parallel()
	app := newApp(nil, nil)
	cases := []struct{ in, want string }{
		{"noderun events last --db x.db --kind diagnostic --follow", "noderun events --db x.db --kind diagnostic --follow last"},
		{"noderun --log-level debug run g.yaml --profile ci", "noderun --log-level debug run --profile ci g.yaml"},
		{"noderun show RUN node --attempts", "noderun show --attempts RUN node"},
		{"noderun sim serve --addr=127.0.0.1:0", "noderun sim serve --addr=127.0.0.1:0"},
		{"noderun resume r1 --retry a --retry b", "noderun resume --retry a --retry b r1"},
		{"noderun show r -- --odd-node", "noderun show r -- --odd-node"},
		// issue 24: a flag missing its value stays last (to be reported), and
		// a shell's completion request keeps its flag last.
		{"noderun run g.yaml --input", "noderun run --input"},
		{"noderun run g.yaml --json --db", "noderun run --json --db"},
		{"noderun status last --json", "noderun status --json last"},
		{"noderun status last --generate-bash-completion", "noderun status last --generate-bash-completion"},
		{"noderun status last --js --generate-bash-completion", "noderun status --js last --generate-bash-completion"},
		{"noderun status -- --generate-bash-completion", "noderun status - --generate-bash-completion"},
	}
	for _, c := range cases {
		got := strings.Join(intersperse(app, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

// integrityOK runs PRAGMA integrity_check on a journal file.
func integrityOK(t *testing.T, db string) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var ok string
	if err := raw.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("%s: integrity_check = %q, %v", db, ok, err)
	}
}

func TestValidateAcceptsValidGraphs(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../testdata/graphs/valid/*.yaml")
	files = append(files, "../../testdata/graphs/demo.yaml")
	code, out, stderr := runCLI(t, append([]string{"validate"}, files...)...)
	if code != exitOK || strings.Count(out, ": ok (") != len(files) {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, stderr)
	}
}

// Two apps (two runs of the CLI in one process) share none of our flags:
// urfave/cli writes to a flag as it parses. (Its own help and version flags
// and help command are package-level: only one app may run at a time.)
// Apps run side by side in one process (the tests run the CLI in process,
// in parallel) parse their command lines one at a time: urfave/cli writes
// into its package-level HelpFlag as it parses, and under the race detector
// (make test) two Apps parsing at once fail this test.
func TestAppsParseOneAtATime(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			args := []string{"validate", "../../testdata/graphs/demo.yaml"}
			if i%2 == 1 {
				args = []string{"profiles", "--help"}
			}
			if code, _, stderr := runCLI(t, args...); code != exitOK {
				t.Errorf("%v: exit %d\n%s", args, code, stderr)
			}
		})
	}
	wg.Wait()
}

// urfave/cli's help command is shared by every App; once run, it is among
// its own subcommands, and an App run after it in the same process must
// still print its fish completion (which walks every command's subcommands)
// instead of walking for ever.
func TestFishCompletionAfterHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"help", "sim"}, {"sim", "help"}} {
		if code, _, stderr := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	done := make(chan string, 1)
	go func() {
		_, stdout, _ := runCLI(t, "completion", "fish")
		done <- stdout
	}()
	select {
	case out := <-done:
		if !strings.Contains(out, "complete -c noderun") {
			t.Fatalf("completion fish printed %q", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("completion fish still walking the commands after 30 s")
	}
}

func TestAppsShareNoFlags(t *testing.T) {
	t.Parallel()
	seen := map[cli.Flag]string{}
	var walk func(app int, path string, flags []cli.Flag, cmds []*cli.Command)
	walk = func(app int, path string, flags []cli.Flag, cmds []*cli.Command) {
		for _, f := range flags {
			if first, ok := seen[f]; ok && !strings.HasPrefix(first, fmt.Sprint(app)+" ") {
				t.Errorf("--%s of %q (second app) is the very flag of %q (first app)", f.Names()[0], path, strings.TrimPrefix(first, "0 "))
			}
			seen[f] = fmt.Sprint(app) + " " + path
		}
		for _, c := range cmds {
			walk(app, path+" "+c.Name, c.Flags, c.Subcommands)
		}
	}
	for app := range 2 {
		a := newApp(io.Discard, io.Discard)
		walk(app, "noderun", a.Flags, a.Commands)
	}
	if len(seen) < 50 {
		t.Fatalf("walked only %d flags", len(seen))
	}
}

// streamed says whether the last run of the journal db has journaled a chunk
// (false while there is no journal or run yet).
func streamed(t *testing.T, db string) bool {
	t.Helper()
	some := false
	withLastRun(db, func(j *journal.Journal, run journal.Run) {
		evs, err := j.Events(context.Background(), run.ID, journal.EventFilter{Kinds: []string{journal.KindDelta}, Limit: 1})
		some = err == nil && len(evs) > 0
	})
	return some
}
