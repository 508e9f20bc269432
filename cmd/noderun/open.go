package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/shell"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/view"
)

// openLogged opens the existing journal of a command that writes to it
// (cancel, compact), with the command's logger, which it returns too.
func openLogged(c *cli.Context) (*journal.Journal, *slog.Logger, error) {
	log, err := newLogger(c)
	if err != nil {
		return nil, nil, err
	}
	j, err := openExisting(c, journal.WithLogger(log))
	return j, log, err
}

// openExisting opens a journal to continue its runs; it refuses to create one.
func openExisting(c *cli.Context, opts ...journal.Option) (*journal.Journal, error) {
	path := c.String("db")
	if err := journalThere(path); err != nil {
		return nil, err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
		// noderun creates the file, then writes its schema: a runner
		// killed in between leaves it empty, with nothing to go on from.
		return nil, usageErr(fmt.Errorf("journal %s has no runs: it is empty (its runner was stopped before it wrote one); run the graph again with --db %s",
			path, shell.Quote(path)))
	}
	if err := journal.Check(path); err != nil {
		return nil, journalErr(err)
	}
	j, err := journal.Open(c.Context, path, opts...)
	return j, journalErr(err)
}

// openForReading opens a journal only to read it: it works on a file the
// user cannot write, and creates nothing beside it (no -wal, no -shm), even
// while a runner writes it. A journal of an older schema is migrated first,
// when it can be.
func openForReading(c *cli.Context) (*journal.Journal, error) {
	path := c.String("db")
	if err := journalThere(path); err != nil {
		return nil, err
	}
	j, err := journal.OpenReadOnly(c.Context, path)
	if se := (*journal.SchemaError)(nil); errors.As(err, &se) && se.Older() {
		if j, err = journal.Open(c.Context, path); err == nil {
			_ = j.Close()
			j, err = journal.OpenReadOnly(c.Context, path)
		}
	}
	return j, journalErr(err)
}

// journalThere is the error of a --db that names no file (exit 2). Other
// problems with the path (a directory, no permission) are the journal's to
// word.
func journalThere(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return usageErr(fmt.Errorf("no journal at %s (use --db)", path))
	}
	return nil
}

// openRun opens the journal for reading and finds the run arg names (an
// id, a unique prefix of one, or last). Close the journal when done.
func openRun(c *cli.Context, arg string) (*journal.Journal, journal.Run, error) {
	j, err := openForReading(c)
	if err != nil {
		return nil, journal.Run{}, err
	}
	r, err := findRun(c.Context, j, arg)
	if err != nil {
		_ = j.Close()
		return nil, journal.Run{}, err
	}
	return j, r, nil
}

// journalErr is the one form of a journal that cannot be opened, for every
// command: exit 2 (the operator's to fix: a path, a file, a version), with
// the journal's own message, which names the file.
func journalErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, journal.ErrNotJournal) {
		err = fmt.Errorf("%w; check --db", err)
	}
	return usageErr(err)
}

// findRun resolves "last", a full run id, or a unique prefix of one; an
// unknown or ambiguous one is exit 2.
func findRun(ctx context.Context, j *journal.Journal, arg string) (journal.Run, error) {
	r, err := view.FindRun(ctx, j, arg)
	var nf *view.RunNotFoundError
	var amb *view.AmbiguousRunError
	if errors.Is(err, view.ErrNoRuns) || errors.As(err, &nf) || errors.As(err, &amb) {
		return journal.Run{}, usageErr(err)
	}
	return r, err
}
