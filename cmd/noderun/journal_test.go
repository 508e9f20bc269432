//go:build linux

package main

import (
	"crypto/sha256"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"
)

// Issue 15: a journal that cannot be opened is the operator's to fix: every
// command says so in one form (naming the file) with exit 2 and nothing on
// stdout, and a journal the user cannot write can still be inspected.
func TestJournalProblemsAreExit2(t *testing.T) {
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
		"missing directory": {filepath.Join(dir, "no", "such", "dir", "j.db"), "no such file or directory"},
		"not SQLite":        {notSQLite, "not a database"},
		"newer schema":      {newer, "newer than this build knows"},
		"a directory":       {dir, "directory"},
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
				if code != exitUsage || stdout != "" || !strings.Contains(stderr, "journal "+jn.path) || !strings.Contains(stderr, jn.says) {
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
