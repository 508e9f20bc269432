//go:build linux

package main

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/noderun/noderun/internal/dirstate"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 15: a journal that cannot be opened is the operator's to fix: every
// command says so in one form (naming the file) with exit 2 and nothing on
// stdout, and a journal the user cannot write can still be inspected. Issue
// 24: in noderun's words, with the fix.
func TestJournalProblemsAreExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notSQLite := filepath.Join(dir, "notes.db")
	if err := os.WriteFile(notSQLite, []byte("these are my notes, not a database\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	db, err := sql.Open("sqlite", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE runs (id TEXT); PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	journals := map[string]struct{ path, says string }{
		"missing directory": {filepath.Join(dir, "no", "such", "dir", "j.db"), "cannot create it (no such file or directory): make the directory"},
		"not SQLite":        {notSQLite, "is not a noderun journal (not an SQLite file); check --db"},
		"newer schema":      {newer, "newer than this build knows"},
		"a directory":       {dir, "is not a noderun journal (a directory); check --db"},
	}
	tiny := tinyGraph(t)
	for name, jn := range journals {
		for _, args := range [][]string{{"run", tiny}, {"status"}, {"status", "last"}, {"events", "last"}, {"show", "last", "only"},
			{"diagnose", "last"}, {"resume", "last"}, {"cancel", "last"}} {
			t.Run(name+"/"+args[0], func(t *testing.T) {
				if args[0] != "run" && !fileExists(jn.path) {
					return // the read commands say "no journal at" for a missing file: TestCLIFriction
				}
				code, stdout, stderr := runCLI(t, append(args, "--db", jn.path)...)
				if code != exitUsage || stdout != "" || !strings.Contains(stderr, jn.path) || !strings.Contains(stderr, jn.says) ||
					strings.Contains(stderr, "open: open") || strings.Contains(stderr, "(26)") {
					t.Errorf("exit %d, want %d with the journal named and %q\nstdout: %s\nstderr: %s", code, exitUsage, jn.says, stdout, stderr)
				}
			})
		}
	}
}

// A journal on a read-only file system: status, events, show and diagnose
// read it (they open it read-only), run and resume are refused with exit 2,
// and the file is not changed.
func TestReadOnlyJournalCanBeInspected(t *testing.T) {
	t.Parallel()
	src, _ := demoRun(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v (this test needs root, as CI has)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	db := filepath.Join(dir, "demo.db")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size=16m"); err != nil {
		t.Fatal(err)
	}
	before := sha256.Sum256(b)
	for _, args := range [][]string{{"status"}, {"status", "last", "--json"}, {"events", "last", "--kind", "diagnostic"},
		{"show", "last", "report"}, {"show", "last", "plan", "--attempts"}, {"diagnose", "last"}} {
		if code, stdout, stderr := runCLI(t, append(args, "--db", db)...); code != exitOK || stdout == "" {
			t.Errorf("%v on a read-only journal: exit %d\n%s", args, code, stderr)
		}
	}
	for _, args := range [][]string{{"resume", "last", "--retry", "report"}, {"run", tinyGraph(t)}} {
		if code, _, stderr := runCLI(t, append(args, "--db", db)...); code != exitUsage || !strings.Contains(stderr, "journal "+db) {
			t.Errorf("%v on a read-only journal: exit %d, want %d naming the journal\n%s", args, code, exitUsage, stderr)
		}
	}
	after, err := os.ReadFile(db)
	if err != nil || sha256.Sum256(after) != before {
		t.Errorf("the read-only journal changed (%v)", err)
	}
}

// Issue 24: after any read command no new file exists beside the journal
// and none of its bytes changed: on a journal its writer closed and on one
// whose writer was killed -9 mid-run (whose WAL the commands read: they show
// the rows committed to it), in a directory the command may write and in a
// read-only one.
func TestReadCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	demo, _ := demoRun(t)
	closed := t.TempDir()
	copyJournal(t, demo, closed)
	crashed, walOnly := killedMidRun(t)
	t.Logf("the killed runner left %d events in its WAL only", walOnly)
	reads := [][]string{{"status"}, {"status", "last", "--json"}, {"events", "last", "--json"},
		{"events", "last", "--follow", "--kind", "diagnostic"}, {"show", "last", "a"}, {"show", "last", "a", "--attempts", "--json"},
		{"diagnose", "last"}, {"report", "last", "-o", "-"}, {"prune", "--older-than", "1ms", "--dry-run"}}
	for _, jn := range []struct {
		name, dir string
		nodes     []string // the run's nodes, for show
	}{{"closed", closed, []string{"plan"}}, {"killed runner", crashed, []string{"a"}}} {
		want := eventCount(t, jn.dir)
		for _, readOnly := range []bool{false, true} {
			name := jn.name
			dir := jn.dir
			if readOnly {
				name += ", read-only directory"
				dir = readOnlyCopy(t, jn.dir)
			}
			db := filepath.Join(dir, "j.db")
			before := dirstate.Of(t, dir)
			for _, args := range reads {
				args = append([]string(nil), args...)
				if args[0] == "show" {
					args[2] = jn.nodes[0]
				}
				t.Run(name+"/"+strings.Join(args, " "), func(t *testing.T) {
					code, stdout, stderr := runCLI(t, append(args, "--db", db)...)
					if stdout == "" || code != exitOK && !(code == exitFailed && strings.Contains(stderr, "runner is gone")) {
						t.Fatalf("exit %d\n%s", code, stderr)
					}
					if after := dirstate.Of(t, dir); after != before {
						t.Errorf("files changed:\nbefore %s\nafter  %s", before, after)
					}
					if args[0] == "events" && args[2] == "--json" {
						if n := strings.Count(stdout, "\n"); n != want {
							t.Errorf("printed %d events; the journal (WAL included) holds %d", n, want)
						}
					}
				})
			}
		}
	}
}

// killedMidRun runs a graph on the embedded simulator in a noderun process
// and kills it -9 mid-run, at a moment when the WAL holds events that the
// database file does not (tries again otherwise). It returns the directory
// with j.db, j.db-wal and j.db-shm, and how many events are in the WAL only.
func killedMidRun(t *testing.T) (string, int) {
	t.Helper()
	graph := filepath.Join(t.TempDir(), "slow.yaml")
	src := "name: slow\nprofile: ci\nproviders:\n  s:\n    kind: sim\n    sim: {seed: 1, tokens: 5000, tokens_per_second: 2000}\n" +
		"nodes:\n  - {id: a, prompt: one}\n  - {id: b, prompt: two}\n"
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for try := 0; try < 5; try++ {
		dir := t.TempDir()
		db := filepath.Join(dir, "j.db")
		cmd := exec.Command(noderunBinary(t), "run", "--db", db, graph)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(500+rand.IntN(500)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if _, err := os.Stat(db + "-wal"); err != nil {
			t.Fatalf("the killed runner left no WAL: %v", err)
		}
		inFile := 0
		raw, err := sql.Open("sqlite", "file:"+db+"?mode=ro&immutable=1") // the file alone, as it is
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.QueryRow("SELECT count(*) FROM events").Scan(&inFile) // no table yet: 0
		raw.Close()
		if walOnly := eventCount(t, dir) - inFile; walOnly > 0 {
			return dir, walOnly
		}
	}
	t.Fatal("5 runners killed -9 left no event in their WAL only")
	return "", 0
}

// readOnlyCopy copies dir's files into a directory this process cannot
// write: a read-only tmpfs (chmod does not stop root, as CI runs), or for
// another user, a directory and files without write permission.
func readOnlyCopy(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	root := os.Geteuid() == 0
	if root {
		if err := syscall.Mount("tmpfs", to, "tmpfs", 0, "size=64m"); err != nil {
			t.Fatalf("mounting a tmpfs: %v (as root, as CI runs, this test needs to)", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(to, syscall.MNT_DETACH) })
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if root {
		if err := syscall.Mount("tmpfs", to, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size=64m"); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := os.Chmod(to, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(to, 0o700) })
	}
	return to
}

// Issue 24: events --follow while a runner writes the journal reads what it
// commits, and does not keep the runner from removing its -wal and -shm when
// it ends: nothing is left beside the journal.
func TestFollowLeavesNoFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 400, TokensPerSecond: 800})
	cmd, db := startRun(t, dir, fmt.Sprintf("name: f\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: one}\n  - {id: b, needs: [a], prompt: two}\n", srv.BaseURL()))
	waitStreaming(t, srv, 1)
	code, out, stderr := runCLI(t, "events", "--db", db, "--follow", "--kind", "diagnostic", "last")
	if code != exitOK || !strings.Contains(out, "NR402") {
		t.Fatalf("events --follow: exit %d\n%s%s", code, out, stderr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run: %v", err)
	}
	if got := dirstate.Of(t, dir); strings.Contains(got, "-wal") || strings.Contains(got, "-shm") {
		t.Errorf("files left beside the journal: %s", got)
	}
}

// Issue 24: a journal the user may not read is said so, naming it, with
// exit 2. Root reads any file: as root, the command runs without the
// capabilities that allow it (setpriv).
func TestUnreadableJournal(t *testing.T) {
	t.Parallel()
	demo, _ := demoRun(t)
	dir := t.TempDir()
	copyJournal(t, demo, dir)
	db := filepath.Join(dir, "j.db")
	if err := os.Chmod(db, 0); err != nil {
		t.Fatal(err)
	}
	var code int
	var stderr string
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Fatal("as root this needs setpriv (util-linux) to drop the capability to read any file")
		}
		var errb strings.Builder
		cmd := exec.Command(setpriv, "--bounding-set=-dac_override,-dac_read_search", noderunBinary(t), "status", "--db", db)
		cmd.Stderr = &errb
		err = cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("status without read permission: %v\n%s", err, errb.String())
		}
		code, stderr = ee.ExitCode(), errb.String()
	} else {
		code, _, stderr = runCLI(t, "status", "--db", db)
	}
	if code != exitUsage || !strings.Contains(stderr, "journal "+db+": permission denied: it is not readable by this user") {
		t.Errorf("exit %d, want %d saying the journal is not readable\n%s", code, exitUsage, stderr)
	}
}
