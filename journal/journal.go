// Package journal is noderun's run journal: an SQLite file (WAL mode) that
// records every run, node, attempt and streamed event, so that a run can be
// inspected while it goes, rebuilt after a crash, and resumed without
// repeating finished work.
//
// # Write path
//
// One writer goroutine owns every write and applies them in the order they
// were submitted. Append only enqueues an event; it blocks only while the
// bounded queue is full, which is the journal's backpressure. State changes
// (CreateRun, BeginAttempt, CompleteNode, ...) enqueue too and then wait until
// the transaction holding them has committed. The writer groups whatever is
// queued into one transaction (group commit), so a stream of 100k events per
// second costs a few hundred commits per second, not 100k.
//
// The guarantees that follow from the single ordered writer:
//   - when a state change returns nil, it and every event appended before it
//     are durable (against a process crash; WAL with synchronous=NORMAL can
//     lose the last transactions on power loss, never consistency);
//   - a crash loses only events not yet committed (those of the last
//     DefaultBatchDelay, while the writer keeps up), never an earlier one: the
//     journaled events of a run are always a gap-free prefix of what was
//     appended;
//   - after a write fails for a reason other than the caller's input (disk
//     full, I/O error), the journal stops accepting work and every later call
//     returns that error: it never silently drops events.
//
// # Read path
//
// Reads use their own connections and see committed data only: call Flush
// first to read your own appends. Another process (another Journal on the
// same file) can read while this one writes. OpenReadOnly reads without a
// writer and creates no file beside the journal (no -wal or -shm), whether
// its writer is running, closed or crashed, in a directory it cannot write
// too (see readonly.go).
package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Errors the journal reports; match them with errors.Is.
var (
	// ErrNotFound: the run, node or attempt does not exist.
	ErrNotFound = errors.New("not found")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal closed")
	// ErrInvalid: the call's arguments are unusable (empty id, unknown state...).
	ErrInvalid = errors.New("invalid argument")
)

// Defaults, measured with the benchmarks in bench_test.go on a shared 2-core
// machine (load 3-8 from other builds; CPU per event is the stable figure):
//   - DefaultBatchOps: the journal spends ~5-6 µs of CPU per event in
//     batches of 512 to 4096, ~8 µs at 256 and ~13 µs at 64, because each
//     commit rewrites the B-tree pages it touched. A stream saturating the
//     writer gets 120-200k events/s; a 100k events/s stream runs at full rate
//     (BenchmarkStream100k). Bigger batches gain nothing and make a waiting
//     state change wait longer.
//   - DefaultBatchDelay: while a stream trickles (2k events/s), lingering
//     25 ms halves the journal's CPU against committing whenever the queue
//     drains (~7% of a core against ~12-14%). It is also the most a crash
//     can lose while the writer keeps up: 25 ms of events, which a
//     resumable provider replays.
//   - DefaultQueueSize: 8192 events absorb ~80 ms of a 100k events/s stream
//     when the writer is starved of CPU, for ~1.4 MB.
//   - DefaultStaleAfter: a run lock's heartbeat goes every 15 s; a lock whose
//     owner is silent for a minute is free (its pid, when on this host, is
//     checked at once).
const (
	DefaultBatchOps   = 512
	DefaultBatchDelay = 25 * time.Millisecond
	DefaultQueueSize  = 8192
	// DefaultQueueBytes bounds the event payloads waiting for the writer:
	// a stream faster than the disk (a local server, a loaded machine)
	// waits for the journal instead of filling memory with chunks.
	DefaultQueueBytes = 8 << 20
	DefaultStaleAfter = time.Minute
)

// Journal is an open run journal. It is safe for concurrent use.
type Journal struct {
	path string
	log  *slog.Logger
	host string // os.Hostname, to judge whether a lock owner's pid can be checked

	batchOps   int
	batchDelay time.Duration
	queueSize  int
	staleAfter time.Duration

	wdb *sql.DB // the writer's single connection
	rdb *sql.DB // readers' pool, query_only
	cdb *sql.DB // the checkpointer's connection

	reads readStmts // rdb's prepared read statements (readstmt.go)

	ckpt    chan struct{} // a commit happened (capacity 1)
	ckptNow chan struct{} // a run ended: checkpoint without waiting (capacity 1)
	// ckptEvery bounds how often the checkpointer runs (checkpointEvery;
	// tests set it).
	ckptEvery time.Duration
	ckptDone  chan struct{} // closed when the checkpointer has stopped
	// restartWAL asks the writer to checkpoint on its own connection
	// between transactions, so that the WAL starts over once it holds
	// walRestart frames (walRestartFrames; tests set it).
	restartWAL atomic.Bool
	walRestart int

	// The write queue. Senders hold mu.RLock while sending, so that Close,
	// which takes mu.Lock before telling the writer to finish, knows that no
	// op can arrive after the writer's final drain.
	mu     sync.RWMutex
	closed bool
	ops    chan op
	queued gate          // the queued events' payload bytes
	quit   chan struct{} // closed by Close: drain, commit and stop
	done   chan struct{} // closed by the writer when it has stopped

	errMu sync.Mutex
	err   error // sticky writer failure

	hbMu sync.Mutex
	held map[string]*heldRun // run locks held, by run id; nil once closing
	hbWG sync.WaitGroup

	// pageSize, when not 0, is the page size of a journal Open creates
	// (benchmarks only: SQLite's default, 4096, measured best; see
	// BenchmarkIngestVsRaw).
	pageSize int

	// observe, when set, is told how long each group commit took
	// (WithWriteObserver).
	observe func(d time.Duration, ops int, err error)

	closeOnce sync.Once
	closeErr  error
	readOnly  bool         // OpenReadOnly: only rdb is open
	lock      *flock.Flock // the maintenance lock, shared while open (maint.go)
	cleanup   func()       // OpenReadOnly: removes what it made outside the journal's directory
}

// Option configures Open.
type Option func(*Journal)

// WithLogger sets the logger for warnings (lock lost, busy retries) and
// debug lines (duplicate provider events dropped). The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(j *Journal) { j.log = l } }

// WithBatch sets the group-commit bounds: the writer commits after ops
// operations, or delay after the first uncommitted one, whichever comes first,
// and at once when a caller waits for a state change or a Flush. delay 0
// commits as soon as the queue is empty.
func WithBatch(ops int, delay time.Duration) Option {
	return func(j *Journal) { j.batchOps, j.batchDelay = ops, delay }
}

// WithQueueSize sets how many operations may wait for the writer before
// Append blocks.
func WithQueueSize(n int) Option { return func(j *Journal) { j.queueSize = n } }

// WithQueueBytes sets how many bytes of event payloads may wait for the
// writer before Append waits (DefaultQueueBytes; an event alone always
// passes).
func WithQueueBytes(n int64) Option { return func(j *Journal) { j.queued.max = n } }

// WithStaleAfter sets how old a run lock's heartbeat must be before another
// owner may take the lock over. Owners heartbeat every quarter of it.
func WithStaleAfter(d time.Duration) Option { return func(j *Journal) { j.staleAfter = d } }

// WithWriteObserver has f told, after each group commit, how long the
// transaction took, how many operations it held and its error (nil when it
// committed): the journal's write latency, for metrics. f runs on the
// writer's goroutine between batches, so it must return at once. Without
// it the writer reads no clock for it.
func WithWriteObserver(f func(d time.Duration, ops int, err error)) Option {
	return func(j *Journal) { j.observe = f }
}

// Open opens the journal at path, creating it (mode 0600) and migrating its
// schema as needed, and starts the writer. Close it when done.
func Open(ctx context.Context, path string, opts ...Option) (*Journal, error) {
	j := &Journal{
		path:       path,
		log:        slog.Default(),
		batchOps:   DefaultBatchOps,
		batchDelay: DefaultBatchDelay,
		queueSize:  DefaultQueueSize,
		queued:     gate{max: DefaultQueueBytes},
		staleAfter: DefaultStaleAfter,
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		ckpt:       make(chan struct{}, 1),
		ckptNow:    make(chan struct{}, 1),
		ckptEvery:  checkpointEvery,
		walRestart: walRestartFrames,
		ckptDone:   make(chan struct{}),
		held:       map[string]*heldRun{},
	}
	for _, o := range opts {
		o(j)
	}
	if j.batchOps < 1 || j.queueSize < 1 || j.batchDelay < 0 || j.staleAfter <= 0 {
		return nil, j.errorf("open: %w: batch %d/%v, queue %d, stale after %v",
			ErrInvalid, j.batchOps, j.batchDelay, j.queueSize, j.staleAfter)
	}
	j.host, _ = os.Hostname()
	j.ops = make(chan op, j.queueSize)

	if err := checkFile(path, true); err != nil {
		return nil, err
	}
	if err := probe(path); err != nil {
		return nil, err
	}
	perm, err := createFile(path)
	if err != nil {
		return nil, j.createError(err)
	}
	if perm&0o077 != 0 {
		j.log.Warn("journal file is readable by other users; it holds prompts and outputs",
			"path", path, "mode", perm.String())
	}
	_, statErr := os.Lstat(path + LockSuffix)
	if err := j.shareLock(ctx); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			j.lock.Close()
			if errors.Is(statErr, fs.ErrNotExist) {
				os.Remove(path + LockSuffix) // a refused file is left as it was found
			}
		}
	}()
	if j.pageSize > 0 {
		if err := setPageSize(path, j.pageSize); err != nil {
			return nil, j.openError(err)
		}
	}
	if j.wdb, err = openDB(path, writerParams); err != nil {
		return nil, j.openError(err)
	}
	// One connection: the writer is the only user, and prepared statements
	// stay bound to it.
	j.wdb.SetMaxOpenConns(1)
	j.wdb.SetMaxIdleConns(1)
	j.wdb.SetConnMaxLifetime(0)
	j.wdb.SetConnMaxIdleTime(0)
	if err := migrate(ctx, j.wdb, migrations, schema); err != nil {
		j.wdb.Close()
		return nil, j.openError(err)
	}
	if j.rdb, err = openDB(path, readerParams); err != nil {
		j.wdb.Close()
		return nil, j.openError(err)
	}
	j.rdb.SetMaxOpenConns(4) // a CLI poller and a few readers; bounds file handles
	// Keep them all: a connection closed on its return to the pool takes
	// the read statements prepared on it (readstmt.go) with it, and the
	// next one prepares them again.
	j.rdb.SetMaxIdleConns(4)
	if j.cdb, err = openDB(path, checkpointerParams); err != nil {
		j.wdb.Close()
		j.rdb.Close()
		return nil, j.openError(err)
	}
	j.cdb.SetMaxOpenConns(1)
	w, err := newWriter(ctx, j)
	if err != nil {
		j.wdb.Close()
		j.rdb.Close()
		j.cdb.Close()
		return nil, j.openError(err)
	}
	go w.run()
	go j.checkpointer()
	ok = true
	return j, nil
}

// probe refuses, before Open switches a file to WAL mode, another
// program's SQLite database (tables, but neither a schema version nor a runs
// table) and a journal of a newer schema. It reads the file as it is
// (immutable: no lock, no file created); what it cannot tell is left to
// migrate, which checks again.
func probe(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		return nil
	}
	db, err := openDB(path, "mode=ro&immutable=1")
	if err != nil {
		return nil
	}
	defer db.Close()
	var v, tables, runs int
	if db.QueryRow("PRAGMA user_version").Scan(&v) != nil ||
		db.QueryRow("SELECT count(*), count(*) FILTER (WHERE name = 'runs') FROM sqlite_master WHERE type = 'table'").Scan(&tables, &runs) != nil {
		return nil
	}
	switch {
	case v == 0 && tables > 0 && runs == 0:
		return &notJournalError{path, "an SQLite database without noderun's tables"}
	case v > len(migrations):
		return fmt.Errorf("journal %s: %w", path, &SchemaError{Have: v, Want: len(migrations)})
	}
	return nil
}

// createError words the failure to open or create the journal's file.
func (j *Journal) createError(err error) error {
	err = pathErr(err)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return j.errorf("cannot create it (%w): make the directory %s first", err, filepath.Dir(j.path))
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		if _, serr := os.Lstat(j.path); errors.Is(serr, fs.ErrNotExist) {
			// A new journal has no runs to continue: its place is the fix.
			return j.errorf("cannot create it (%w): the directory %s is not writable; put the journal in one that is", err, filepath.Dir(j.path))
		}
		return j.errorf("cannot write it (%w): copy it somewhere writable to continue its runs", err)
	}
	return j.errorf("%w", err)
}

// openError words a failure of Open after the file was opened.
func (j *Journal) openError(err error) error {
	switch {
	case errors.Is(err, errForeignDB):
		return &notJournalError{j.path, "an SQLite database without noderun's tables"}
	case errors.Is(err, ErrSchema):
		return j.errorf("%w", err)
	case sqliteCode(err) == 26: // SQLITE_NOTADB
		return &notJournalError{j.path, "not an SQLite file"}
	case sqliteCode(err) == 8: // SQLITE_READONLY
		return j.errorf("cannot write it (%w): copy it somewhere writable to continue its runs", err)
	}
	return j.errorf("open: %w", err)
}

// ErrReadOnly is the error of a write to a journal opened with OpenReadOnly.
var ErrReadOnly = errors.New("journal opened read-only")

// ErrSchema: the journal's schema is not this build's.
var ErrSchema = errors.New("journal schema version differs")

// SchemaError is the refusal of a journal whose schema version is not this
// build's: Open refuses a newer one, OpenReadOnly an older one too (Open
// migrates those). It is ErrSchema.
type SchemaError struct{ Have, Want int }

func (e *SchemaError) Error() string {
	if e.Older() {
		return fmt.Sprintf("%v: version %d is older than this build's (%d): open it for writing once to migrate it", ErrSchema, e.Have, e.Want)
	}
	return fmt.Sprintf("%v: version %d is newer than this build knows (%d): upgrade noderun", ErrSchema, e.Have, e.Want)
}

func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

// Older: Open migrates the journal to this build's schema.
func (e *SchemaError) Older() bool { return e.Have < e.Want }

// Path returns the journal's file path as given to Open.
func (j *Journal) Path() string { return j.path }

// Flush waits until every operation submitted before it has committed.
func (j *Journal) Flush(ctx context.Context) error {
	if err := j.submit(ctx, op{kind: opFlush}); err != nil {
		return j.errorf("flush: %w", err)
	}
	return nil
}

// Close releases the run locks this Journal holds, commits everything
// queued, stops the writer and closes the file. It returns the writer's
// failure if it had one. Calls after Close return ErrClosed.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		if j.readOnly {
			cerr := j.closeReads()
			if j.closeErr = j.rdb.Close(); j.closeErr == nil {
				j.closeErr = cerr
			}
			j.cleanup()
			return
		}
		j.releaseAll()
		j.mu.Lock()
		j.closed = true
		j.mu.Unlock()
		close(j.quit)
		<-j.done
		<-j.ckptDone
		err := j.failure()
		// The read statements before rdb: its connections then close with
		// nothing prepared on them left to finalize.
		if cerr := j.closeReads(); err == nil && cerr != nil {
			err = j.errorf("close: %w", cerr)
		}
		for _, db := range []*sql.DB{j.rdb, j.cdb} {
			if cerr := db.Close(); err == nil && cerr != nil {
				err = j.errorf("close: %w", cerr)
			}
		}
		// Everything into the file and the WAL emptied, whoever is reading:
		// a read command in another process may hold the journal open at
		// the writer's last close, which then cannot remove the -wal, and
		// an empty one is what that reader sweeps up (readonly.go).
		// Not an error when it fails (a full disk): the WAL keeps every
		// commit, and the next Open checkpoints it.
		if err == nil {
			if _, cerr := j.wdb.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); cerr != nil {
				j.log.Debug("journal: checkpoint at close", "path", j.path, "err", cerr)
			}
		}
		// Closed last, the writer's connection checkpoints what is left and
		// removes the WAL.
		if cerr := j.wdb.Close(); err == nil && cerr != nil {
			err = j.errorf("close: %w", cerr)
		}
		if err == nil {
			j.removeWAL()
		}
		j.lock.Close() // last: the file is as it will stay
		j.closeErr = err
	})
	return j.closeErr
}

// removeWAL does again what the writer's last close did not: SQLite
// checkpoints the WAL into the file and removes it and the -shm only when no
// other connection has the file open, and a read command in another process
// may have been mid-query at that moment (it holds the file only while it
// reads: see readonly.go). A few tries over a second (a read of a busy
// machine, under -race, can take a few hundred ms); none succeeds while
// another writer has the journal open, and then its own close cleans up.
func (j *Journal) removeWAL() {
	for _, wait := range []time.Duration{10, 20, 40, 80, 160, 320, 400} {
		if _, err := os.Lstat(j.path + "-wal"); err != nil {
			return
		}
		time.Sleep(wait * time.Millisecond)
		db, err := openDB(j.path, checkpointerParams)
		if err != nil {
			return
		}
		var n int
		_ = db.QueryRow("SELECT count(*) FROM sqlite_master").Scan(&n) // opens the WAL
		db.Close()
	}
}

// errorf prefixes an error with the journal's path, so that a message in a
// log names the file it is about.
func (j *Journal) errorf(format string, args ...any) error {
	return fmt.Errorf("journal %s: "+format, append([]any{j.path}, args...)...)
}

// failure returns the writer's sticky error, if any.
func (j *Journal) failure() error {
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// DSN parameters. The writer waits up to 5 s for another process's write
// lock, runs in WAL (readers never block it, nor it them), syncs only at
// checkpoints (a process crash loses nothing committed), leaves checkpoints
// to the checkpointer (see checkpoint.go) and keeps an idle WAL under 64 MiB,
// takes the write lock at BEGIN (no deadlock-prone lock upgrades) and
// enforces foreign keys on runs/nodes/attempts. Readers cannot write by
// accident.
const (
	writerParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
		"&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(67108864)" +
		"&_pragma=foreign_keys(1)&_txlock=immediate"
	readerParams       = "_pragma=busy_timeout(5000)&_pragma=query_only(1)"
	checkpointerParams = "_pragma=busy_timeout(5000)"
)

// setPageSize sets the page size of a database not yet in WAL mode (in
// WAL mode it is fixed).
func setPageSize(path string, size int) error {
	db, err := openDB(path, "")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf("PRAGMA page_size = %d; VACUUM", size))
	return err
}

// uriEscaper escapes the characters that would end or corrupt the path part
// of an SQLite file: URI.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// fileDSN is the data source name of the database at an absolute path.
func fileDSN(abs, params string) string {
	return "file:" + uriEscaper.Replace(filepath.ToSlash(abs)) + "?" + params
}

func openDB(path, params string) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", fileDSN(abs, params))
	if err != nil {
		return nil, err
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// createFile creates the database file with mode 0600 before SQLite opens
// it: the journal holds prompts and model output, and SQLite creates its -wal
// and -shm files with the main file's permissions. An existing file keeps its
// mode (it is the user's); its permissions are returned so Open can warn.
func createFile(path string) (fs.FileMode, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Mode().Perm(), nil
}
