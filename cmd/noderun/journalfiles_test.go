package main

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// Helpers of the journal tests (issue 24) that build on every platform.

// notAJournal makes a file that is not a journal, of a kind: notes (text),
// dir (a directory), other (another program's SQLite database) or empty.
func notAJournal(t *testing.T, kind string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), kind+".db")
	var err error
	switch kind {
	case "notes":
		err = os.WriteFile(path, []byte("these are my notes, not a database\n"), 0o600)
	case "dir":
		err = os.Mkdir(path, 0o700)
	case "other":
		var db *sql.DB
		if db, err = sql.Open("sqlite", path); err == nil {
			_, err = db.Exec("CREATE TABLE notes (text TEXT)")
			db.Close()
		}
	case "empty":
		err = os.WriteFile(path, nil, 0o600)
	default:
		t.Fatalf("notAJournal: no kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// eventCount is how many events the journal dir/j.db holds, as a writer
// recovering it would find them: it reads a copy of the files.
func eventCount(t *testing.T, dir string) int {
	t.Helper()
	cp := t.TempDir()
	copyJournal(t, filepath.Join(dir, "j.db"), cp)
	j := testkit.OpenJournal(t, filepath.Join(cp, "j.db"))
	defer j.Close()
	runs, err := j.Runs(context.Background(), 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	evs, err := j.Events(context.Background(), runs[0].ID, journal.EventFilter{AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// copyJournal copies a journal and the -wal and -shm beside it, if any, into
// dir as j.db, j.db-wal and j.db-shm.
func copyJournal(t *testing.T, db, dir string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(db + suffix)
		if suffix != "" && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "j.db"+suffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
