package journal

// Reading a journal without writing a byte beside it.
//
// What SQLite does, as checked with modernc.org/sqlite (SQLite 3.54) by the
// tests in readonly_test.go:
//   - A journal is in WAL mode, and the mode is recorded in the file. A
//     connection opened with mode=ro on a WAL file opens the -wal and -shm
//     beside it read-write, creating them when they are missing, and cannot
//     checkpoint or delete them when it closes (its handle on the file is
//     read-only): mode=ro alone leaves an empty -wal and a 32 KiB -shm beside
//     a journal it only read.
//   - A writer's last connection, closing cleanly, checkpoints the whole WAL
//     into the file and deletes the -wal and -shm. So a journal without a
//     -wal (or with an empty one) holds every committed transaction in the
//     file itself, and immutable=1 reads it exactly, taking no lock and
//     creating nothing.
//   - A journal with a -wal has a live writer or one that crashed. mode=ro
//     reads the WAL through the -shm that is there, and creates nothing; when
//     the -shm cannot be written (a read-only directory or file), SQLite
//     (3.22 and later) builds the WAL index in memory instead. A -wal without
//     its -shm cannot be read in place unless the -shm may be created.
//   - A WAL connection holds a shared lock on the file while it is open, and a
//     closing writer deletes its -wal and -shm only if it can take the
//     exclusive lock: a reader that kept a connection open while the writer
//     ended would leave the writer's files behind.
//
// So a read-only Journal decides for each connection it opens: the file
// alone (immutable) when there is no WAL to read, the WAL in place (mode=ro)
// when there is one with its -shm, and a private copy of file and WAL in a
// temporary directory when the -shm is missing. A connection on the file
// alone is dropped as soon as a -wal appears or the file changes (a writer
// started: a follow loop then reads the WAL); one on the WAL is closed after
// each use, so that it never stops a writer from removing its files.
//
// One race is left, and swept up after: a connection on the WAL decided on
// just before the writer's last close removes the -wal and -shm opens after
// it, and mode=ro creates them again (an empty -wal and a -shm) and cannot
// remove them. So when a read-only Journal closes its last connection on
// the WAL and finds an empty -wal, it opens the file read-write once and
// closes it (see sweep): SQLite's own close then removes both files if no
// connection anywhere has the journal open, writing nothing to the file (the
// WAL is empty), and does nothing while a writer has it open.

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"modernc.org/sqlite"
)

// ErrNotJournal: the file is not a noderun journal (not an SQLite file, an
// empty file, a directory, another program's database). errors.Is also
// matches it with ErrInvalid.
var ErrNotJournal = errors.New("not a noderun journal")

// notJournalError says which file is not a journal, and what it is instead.
type notJournalError struct{ path, what string }

func (e *notJournalError) Error() string {
	return fmt.Sprintf("%s is not a noderun journal (%s)", e.path, e.what)
}

func (e *notJournalError) Is(target error) bool {
	return target == ErrNotJournal || target == ErrInvalid
}

// sqliteMagic starts every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// OpenReadOnly opens an existing journal for reading only: no writer, no
// migration, no run lock, and no file is created or changed beside it (no
// -wal, no -shm). It reads a journal the user cannot write (a CI artifact, a
// read-only mount, another user's file), one whose writer crashed (what its
// WAL holds included), and one that a runner is writing, without stopping
// that runner from cleaning up when it ends. Every write returns
// ErrReadOnly. A journal of an older or newer schema than this build's is
// refused (ErrSchema): an older one is migrated by Open. A file that is not
// a journal is refused with ErrNotJournal; a missing one with an error that
// matches fs.ErrNotExist, an unreadable one fs.ErrPermission.
func OpenReadOnly(ctx context.Context, path string, opts ...Option) (*Journal, error) {
	j := &Journal{path: path, log: slog.Default(), readOnly: true, err: ErrReadOnly, staleAfter: DefaultStaleAfter,
		quit: make(chan struct{}), done: make(chan struct{}), ckptDone: make(chan struct{}), held: map[string]*heldRun{}}
	for _, o := range opts {
		o(j)
	}
	close(j.done)
	close(j.ckptDone)
	j.host, _ = os.Hostname() // to tell whether a run's owner is alive (Abandoned)
	if err := checkFile(path, false); err != nil {
		return nil, err
	}
	// SQLite keeps the -wal and -shm beside the file a symbolic link names.
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, j.errorf("%w", pathErr(err))
	}
	src := &readSource{path: abs}
	db := sql.OpenDB(src)
	db.SetMaxOpenConns(4)
	if err := checkVersion(ctx, db, path); err != nil {
		db.Close()
		src.removeCopy()
		return nil, j.readError(err)
	}
	j.rdb = db
	j.cleanup = src.removeCopy
	return j, nil
}

// readError words an error met while opening a journal read-only.
func (j *Journal) readError(err error) error {
	var nj *notJournalError
	switch {
	case errors.As(err, &nj):
		return err
	case sqliteCode(err) == 26: // SQLITE_NOTADB: the header passed, the rest is not SQLite
		return &notJournalError{j.path, "not an SQLite file"}
	case sqliteCode(err) == 11: // SQLITE_CORRUPT
		return j.errorf("the file is damaged (%w); a copy may still be readable with sqlite3 .recover", err)
	case sqliteCode(err) == 14: // SQLITE_CANTOPEN: the -wal or -shm beside it
		return j.errorf("cannot read its -wal and -shm (%w): check their mode and owner", err)
	}
	return j.errorf("%w", err)
}

// Check tells whether path can be a journal without opening it as one: the
// errors are those of OpenReadOnly for a file that is missing, unreadable,
// a directory, empty or not an SQLite file. Open, unlike Check, takes a
// missing or empty file as a new journal.
func Check(path string) error { return checkFile(path, false) }

// checkFile tells, in noderun's words, why path cannot be a journal: it is
// missing, unreadable, a directory, empty (allowed for a journal about to be
// created), or not an SQLite file. A missing file is not an error when
// allowEmpty is set.
func checkFile(path string, allowEmpty bool) error {
	f, err := os.Open(path)
	switch {
	case allowEmpty && errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no journal at %s: %w", path, fs.ErrNotExist)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("journal %s: %w: it is not readable by this user (check its mode and owner)", path, fs.ErrPermission)
	case err != nil:
		return fmt.Errorf("journal %s: %w", path, pathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, pathErr(err))
	}
	switch {
	case st.IsDir():
		return &notJournalError{path, "a directory"}
	case !st.Mode().IsRegular():
		return &notJournalError{path, "not a regular file"}
	case st.Size() == 0 && allowEmpty:
		return nil
	case st.Size() == 0:
		return &notJournalError{path, "an empty file"}
	}
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("journal %s: %w", path, pathErr(err))
	}
	if !bytes.Equal(head, []byte(sqliteMagic)) {
		return &notJournalError{path, "not an SQLite file"}
	}
	return nil
}

// pathErr drops the "open PATH:" that an *fs.PathError adds: the journal's
// messages name the file once, themselves.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sqliteCode is the primary SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// checkVersion reads the schema version of a journal opened read-only.
func checkVersion(ctx context.Context, db *sql.DB, path string) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	var tables, runs int
	if err := db.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE name = 'runs') FROM sqlite_master WHERE type = 'table'").
		Scan(&tables, &runs); err != nil {
		return err
	}
	switch {
	case v > len(migrations):
		return &SchemaError{Have: v, Want: len(migrations)}
	case tables == 0:
		return &notJournalError{path, "an SQLite database with no tables"}
	case v == 0 || runs == 0:
		return &notJournalError{path, "an SQLite database without noderun's tables"}
	case v < len(migrations):
		return &SchemaError{Have: v, Want: len(migrations)}
	}
	return nil
}

// readSource opens the connections of a read-only Journal, each in the way
// that reads the journal exactly as it is at that moment without creating a
// file beside it (see the top of this file).
type readSource struct {
	path string // absolute

	mu    sync.Mutex
	copy  string // the private copy's directory, once made
	onWAL int    // connections on the WAL open now
}

// Connection kinds.
const (
	onFile = iota // immutable: the file holds every commit
	onWAL         // mode=ro, through the existing -wal and -shm
	onCopy        // a -wal without its -shm: a private copy of both
)

func (s *readSource) Driver() driver.Driver { return sqliteDriver }

func (s *readSource) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	kind, st := s.kind()
	var dsn string
	switch kind {
	case onFile:
		dsn = fileDSN(s.path, "mode=ro&immutable=1&"+readerParams)
	case onWAL:
		dsn = fileDSN(s.path, "mode=ro&"+readerParams)
		s.mu.Lock()
		s.onWAL++
		s.mu.Unlock()
	case onCopy:
		dir, err := s.makeCopy()
		if err != nil {
			return nil, err
		}
		dsn = fileDSN(filepath.Join(dir, "journal.db"), "mode=ro&"+readerParams)
	}
	c, err := sqliteDriver.Open(dsn)
	if err != nil {
		s.closed(kind)
		return nil, err
	}
	sc, ok := c.(sqliteConn)
	if !ok {
		c.Close()
		s.closed(kind)
		return nil, fmt.Errorf("modernc.org/sqlite connection %T lacks an interface database/sql uses", c)
	}
	return &readConn{sqliteConn: sc, src: s, kind: kind, file: st}, nil
}

// closed counts a connection of this kind closed; the last one on the WAL
// sweeps up after itself.
func (s *readSource) closed(kind int) {
	if kind != onWAL {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onWAL--; s.onWAL == 0 {
		s.sweep() // under mu: no connection on the WAL of ours opens meanwhile
	}
}

// sweep removes an empty -wal and its -shm when no connection has the
// journal open, as a writer's last close does (see the top of this file for
// the race that leaves them). It opens the file read-write and reads, so
// that SQLite opens the WAL, then closes: SQLite checkpoints (nothing: the
// WAL is empty) and removes both files only if it can lock the file
// exclusively, which no other connection, writer or reader, in any process,
// allows. A journal this user cannot write is left alone: SQLite would open
// it read-only instead, and create the files it cannot remove.
func (s *readSource) sweep() {
	if wal, err := os.Stat(s.path + "-wal"); err != nil || wal.Size() != 0 {
		return
	}
	if !writable(s.path) {
		return
	}
	c, err := sqliteDriver.Open(fileDSN(s.path, "mode=rw&_pragma=busy_timeout(0)&_pragma=query_only(1)"))
	if err != nil {
		return
	}
	defer c.Close()
	if q, ok := c.(driver.QueryerContext); ok {
		if rows, err := q.QueryContext(context.Background(), "SELECT count(*) FROM sqlite_master", nil); err == nil {
			rows.Close()
		}
	}
}

// kind decides how to read the journal now; for onFile, it returns what the
// file was before the connection opens, which the connection stays valid
// for.
func (s *readSource) kind() (int, fileState) {
	wal, walErr := os.Stat(s.path + "-wal")
	if walErr != nil || wal.Size() == 0 {
		// No WAL, or an empty one (a writer that has not committed yet, or
		// files an older noderun's reads left): the file is everything.
		return onFile, stateOf(s.path)
	}
	if _, err := os.Stat(s.path + "-shm"); errors.Is(err, fs.ErrNotExist) {
		return onCopy, stateOf(s.path + "-shm")
	}
	return onWAL, fileState{}
}

// makeCopy copies the journal and its -wal into a private temporary
// directory, once, for reading a WAL whose -shm is missing.
func (s *readSource) makeCopy() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy != "" {
		return s.copy, nil
	}
	dir, err := os.MkdirTemp("", "noderun-journal-")
	if err != nil {
		return "", fmt.Errorf("copy the journal to read its WAL (its -shm is missing): %w", err)
	}
	for _, suffix := range []string{"", "-wal"} {
		if err := copyFile(s.path+suffix, filepath.Join(dir, "journal.db"+suffix)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("copy the journal to read its WAL (its -shm is missing): %w", err)
		}
	}
	s.copy = dir
	return dir, nil
}

// removeCopy removes the private copy, if one was made.
func (s *readSource) removeCopy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy != "" {
		os.RemoveAll(s.copy)
		s.copy = ""
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fileState is what tells that a file changed: whether it exists, its size
// and its modification time.
type fileState struct {
	exists bool
	size   int64
	mtime  time.Time
}

func (a fileState) same(b fileState) bool {
	return a.exists == b.exists && a.size == b.size && a.mtime.Equal(b.mtime)
}

func stateOf(path string) fileState {
	st, err := os.Stat(path)
	if err != nil {
		return fileState{}
	}
	return fileState{true, st.Size(), st.ModTime()}
}

// sqliteConn is what a modernc.org/sqlite connection implements and
// database/sql uses: a wrapper must forward all of it (see
// sqlite.NewConnector).
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// readConn is a connection of a read-only Journal that database/sql drops
// when it no longer reads the journal as it is (see valid).
type readConn struct {
	sqliteConn
	src  *readSource
	kind int
	file fileState // onFile: the file as it was; onCopy: the -shm (missing)
}

func (c *readConn) Unwrap() driver.Conn { return c.sqliteConn }

func (c *readConn) Close() error {
	err := c.sqliteConn.Close()
	c.src.closed(c.kind)
	return err
}

// ResetSession runs before a pooled connection is used again.
func (c *readConn) ResetSession(ctx context.Context) error {
	if !c.valid() {
		return driver.ErrBadConn
	}
	return c.sqliteConn.ResetSession(ctx)
}

// IsValid runs before a used connection goes back to the pool.
func (c *readConn) IsValid() bool { return c.valid() && c.sqliteConn.IsValid() }

// valid tells whether the connection still reads the journal exactly as it
// is: a connection on the file alone, until a WAL appears or the file
// changes (a writer started, or came and went); one on a copy, until a -shm
// appears (a writer started). One on the WAL is never kept idle: while open,
// it would keep the writer from removing its -wal and -shm when it ends.
func (c *readConn) valid() bool {
	switch c.kind {
	case onFile:
		wal := stateOf(c.src.path + "-wal")
		return (!wal.exists || wal.size == 0) && stateOf(c.src.path).same(c.file)
	case onCopy:
		return stateOf(c.src.path + "-shm").same(c.file)
	}
	return false
}

// sqliteDriver is the driver modernc.org/sqlite registers as "sqlite".
var sqliteDriver = func() driver.Driver {
	db, err := sql.Open("sqlite", "")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	return db.Driver()
}()
