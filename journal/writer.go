package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

type opKind uint8

const (
	opEvent  opKind = iota // an appended event; nobody waits
	opEvents               // appended events, in order; nobody waits
	opFunc                 // a state change; its caller waits
	opFlush                // a barrier; its caller waits
)

// op is one unit of work for the writer.
type op struct {
	kind opKind
	ev   Event
	evs  []Event // opEvents
	// fn applies a state change inside the batch transaction. It must have
	// no effect outside tx: a batch that meets a busy database, or in which
	// a state change fails, is rolled back and replayed (see apply).
	fn   func(ctx context.Context, tx stmtTx) error
	done chan error // buffered(1); nil for opEvent and opEvents
	err  error      // fn's own (non-fatal) error, reported on done
}

// waits tells whether o's caller waits for its commit.
func (o *op) waits() bool { return o.kind == opFunc || o.kind == opFlush }

// payloadBytes is what o holds of event payloads (see Journal.queued).
func (o *op) payloadBytes() (n int64) {
	n = int64(len(o.ev.Payload))
	for i := range o.evs {
		n += int64(len(o.evs[i].Payload))
	}
	return n
}

// submit enqueues o and, unless it is an event, waits for the commit of the
// transaction that holds it. If ctx ends while waiting, the operation may
// still commit.
func (j *Journal) submit(ctx context.Context, o op) error {
	if o.waits() {
		o.done = make(chan error, 1)
	}
	if err := j.enqueue(ctx, o); err != nil {
		return err
	}
	if o.done == nil {
		return nil
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue sends o to the writer. It blocks while the queue is full.
func (j *Journal) enqueue(ctx context.Context, o op) error {
	if err := j.failure(); err != nil {
		return err
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	select {
	case j.ops <- o:
		return nil
	default:
	}
	select {
	case j.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gate bounds the bytes of the events queued for the writer: Append
// waits while more than max are (one event alone always passes).
type gate struct {
	mu   sync.Mutex
	cond sync.Cond
	n    int64
	max  int64
}

func (g *gate) take(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond.L == nil {
		g.cond.L = &g.mu
	}
	for g.max > 0 && g.n > 0 && g.n+n > g.max {
		g.cond.Wait()
	}
	g.n += n
}

func (g *gate) give(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.n -= n
	if g.cond.L != nil {
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// writer is the goroutine that owns every write.
type writer struct {
	j     *Journal
	stmts writerStmts // prepared once on the writer's connection
	tx    writerStmts // the same, bound to the current transaction
	batch []op
	timer *time.Timer
	args  []any // reused insert arguments

	// runs is what the writer knows of each run it appends to (key, last
	// seq). Reading it is two queries, and the last seq's is a seek among
	// the run's events, whose large rows make every step of it read whole
	// payloads: for a single fast stream they were 40% of the writer's CPU.
	// So runs outlives a transaction, for as long as nobody else writes:
	// dataVersion is the connection's PRAGMA data_version when a transaction
	// last used runs, which moves only when another connection (another
	// process) commits. A transaction that does not commit forgets runs (its
	// seqs were never written). A transaction reads the version when it
	// first needs a run (versionRead), so that state changes alone, most
	// transactions of a wide graph, do not pay for it. At most maxRuns are
	// kept: a long-lived journal sees run after run.
	runs        map[string]*runCursor
	dataVersion int64
	versionRead bool

	// Per-transaction caches; valid only while the writer holds the write
	// lock, so they are exact even if other processes write between batches.
	chains  map[attemptKey]*chain
	tops    map[attemptKey]*txnTop // what this transaction adds to provider_seq_tops
	pending []*Event               // fast-path events waiting for a multi-row insert

	// State-change statements prepared on the writer's connection, by SQL
	// text (see stmtTx), and those a batch ran unprepared, to prepare once
	// the connection is free again.
	prepared map[string]*sql.Stmt
	learn    []string
	bound    map[string]*sql.Stmt // prepared, bound to the current transaction
}

// maxPrepared bounds the statement cache; state changes use a fixed set
// of statements, a few dozen.
const maxPrepared = 256

// stmtTx is a state change's handle on the batch transaction: *sql.Tx, but
// ExecContext and QueryRowContext run the statement prepared. Parsing and
// planning the SQL of every state change again was half the writer's CPU
// with 1,000 nodes starting and ending at once (make profile). A statement
// cannot be prepared on the writer's single connection while the batch
// transaction holds it, so the first batch that uses a statement prepares it
// on the transaction, for that batch alone, and commit prepares it
// afterwards for every later batch.
type stmtTx struct {
	*sql.Tx
	w *writer
}

func (t stmtTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.w.stmt(ctx, t.Tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t stmtTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.w.stmt(ctx, t.Tx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// stmt returns the prepared statement for query bound to tx (once per
// transaction: binding allocates), or nil to run it as plain SQL. A
// statement not prepared yet is noted, to be prepared after the batch, and
// meanwhile prepared on tx for the rest of this batch: one state change may
// run it thousands of times (SetNodesPending, two statements per node:
// at 10,000 nodes their 20,000 plain runs were 0.4 s of sqlite3_prepare on
// the path that Run waits on before it starts a node).
func (w *writer) stmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	if st, ok := w.bound[query]; ok {
		return st
	}
	if st, ok := w.prepared[query]; ok {
		st = tx.StmtContext(ctx, st)
		w.bound[query] = st
		return st
	}
	if len(w.prepared)+len(w.learn) < maxPrepared && !slices.Contains(w.learn, query) {
		w.learn = append(w.learn, query)
	}
	st, err := tx.PrepareContext(ctx, query) // closed with tx
	if err != nil {
		return nil // run as plain SQL, which reports the error itself
	}
	w.bound[query] = st
	return st
}

// prepareLearnt prepares on the connection the statements the last batch met
// unprepared. A statement that fails to prepare stays plain.
func (w *writer) prepareLearnt() {
	for _, q := range w.learn {
		if st, err := w.j.wdb.PrepareContext(context.Background(), q); err == nil {
			w.prepared[q] = st
		}
	}
	w.learn = w.learn[:0]
}

// runCursor is what the writer knows of a run (see writer.runs).
type runCursor struct {
	key     int64 // runs.key
	lastSeq int64
}

type attemptKey struct {
	run     int64
	node    string
	attempt int
}

// chain is what the writer knows of an attempt's provider sequence numbers:
// the attempts that share them (start..attempt, see chainStartQuery), the
// highest one journaled, and the lowest seq of an event that has one (0: not
// known), where a duplicate check starts looking.
type chain struct {
	start int
	top   int64
	first int64
	own   *txnTop // the attempt's entry in writer.tops
}

// txnTop is what the current transaction journaled of one attempt's
// provider events: the highest provider seq and the lowest event seq (0:
// none yet). commit folds it into provider_seq_tops, in the same
// transaction as the events, so the two never disagree, even after a crash.
type txnTop struct {
	top, first int64
}

// rowsPerInsert is how many events one multi-row INSERT carries: it halves
// the per-event statement overhead (a bare insert loop here went from 140k
// to 210k rows/s); 32 rows gained nothing more.
const rowsPerInsert = 16

// The writer's reads, by run key, each answered from an index (plan_test.go).
const (
	// Folded rows (fold.go) keep their seqs: the last may be among them.
	lastSeqQuery = `SELECT max(COALESCE((SELECT MAX(seq) FROM events WHERE run = ?1), 0),
		COALESCE((SELECT MAX(last_seq) FROM folds WHERE run = ?1), 0))`
	// chainTopQuery: the highest provider seq of a chain of attempts
	// (run key, node, first and last attempt), and where its events start.
	chainTopQuery = `SELECT COALESCE(MAX(top), -1), COALESCE(MIN(first_seq), 0) FROM provider_seq_tops
		WHERE run = ? AND node = ? AND attempt BETWEEN ? AND ?`
	// providerSeqExistsQuery: is a provider seq journaled in a chain (run
	// key, node, first seq, first and last attempt, provider seq)? Only an
	// event at or below the chain's top asks, which a healthy stream never
	// sends. It walks the node's events back from the newest: what a resumed
	// stream repeats is among the last ones journaled, so it is found in a
	// few steps (100 repeats at the end of a 100,000-event chain: 10 ms). A
	// number below the top that was never journaled (out of order, which
	// Responses numbers never are) walks back to the chain's first event.
	// (EXISTS would ignore the ORDER BY and walk forwards.)
	providerSeqExistsQuery = `SELECT count(*) FROM (SELECT 1 FROM events INDEXED BY events_by_node
		WHERE run = ? AND node = ? AND seq >= ? AND attempt BETWEEN ? AND ? AND provider_seq = ?
		ORDER BY seq DESC LIMIT 1)`
	upsertTopQuery = `INSERT INTO provider_seq_tops (run, node, attempt, top, first_seq) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (run, node, attempt) DO UPDATE SET top = max(top, excluded.top), first_seq = min(first_seq, excluded.first_seq)`
)

type writerStmts struct {
	insert1, insertN, runKey, lastSeq, chainStart, chainTop, exists, upsertTop, dataVersion *sql.Stmt
}

func (s *writerStmts) all() []**sql.Stmt {
	return []**sql.Stmt{&s.insert1, &s.insertN, &s.runKey, &s.lastSeq, &s.chainStart, &s.chainTop,
		&s.exists, &s.upsertTop, &s.dataVersion}
}

func (s *writerStmts) close() {
	for _, st := range s.all() {
		if *st != nil {
			(*st).Close()
		}
	}
}

// bind returns s bound to tx. Statements prepared on the transaction's own
// connection are reused, not prepared again.
func (s *writerStmts) bind(ctx context.Context, tx *sql.Tx) writerStmts {
	var b writerStmts
	src, dst := s.all(), b.all()
	for i := range src {
		*dst[i] = tx.StmtContext(ctx, *src[i])
	}
	return b
}

func newWriter(ctx context.Context, j *Journal) (*writer, error) {
	w := &writer{
		j:        j,
		batch:    make([]op, 0, j.batchOps),
		runs:     map[string]*runCursor{},
		chains:   map[attemptKey]*chain{},
		tops:     map[attemptKey]*txnTop{},
		prepared: map[string]*sql.Stmt{},
		bound:    map[string]*sql.Stmt{},
	}
	// OR FAIL, not the default OR ABORT: an insert that may fail on a
	// constraint part way through its rows makes SQLite copy every page the
	// transaction had already changed into a statement journal (a temporary
	// file) before changing it again, so that the statement alone can be
	// undone. Nothing here needs that: any failed insert fails the whole
	// transaction (apply). At 10,000 trickling nodes, whose rows land all
	// over the events_by_node index, the statement journal was a quarter of
	// the writer's CPU.
	const cols = `INTO events (run, seq, node, attempt, time, kind, code, provider_seq, payload, chunks) VALUES `
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	var err error
	prep := func(q string) *sql.Stmt {
		var st *sql.Stmt
		if err == nil {
			st, err = j.wdb.PrepareContext(ctx, q)
		}
		return st
	}
	w.stmts = writerStmts{
		insert1:    prep(`INSERT OR FAIL ` + cols + row),
		insertN:    prep(`INSERT OR FAIL ` + cols + row + strings.Repeat(", "+row, rowsPerInsert-1)),
		runKey:     prep(`SELECT key FROM runs WHERE id = ?`),
		lastSeq:    prep(lastSeqQuery),
		chainStart: prep(chainStartQuery),
		chainTop:   prep(chainTopQuery),
		exists:     prep(providerSeqExistsQuery),
		upsertTop:  prep(upsertTopQuery),

		dataVersion: prep(`PRAGMA data_version`),
	}
	if err != nil {
		w.stmts.close()
		return nil, err
	}
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
	return w, nil
}

// run collects operations into batches and commits them until Close.
//
// A batch is committed when it holds batchOps operations, when batchDelay has
// passed since its first operation, or, as soon as the queue is momentarily
// empty, if somebody waits on it (a state change or Flush). Since the queue is
// FIFO, a waiting caller's transaction also holds every event queued before
// its operation.
//
// Before a waiter's batch is committed on an empty queue, the writer yields
// the processor once, and takes what was queued meanwhile: with thousands of
// nodes starting and ending, their state changes come a few hundred
// microseconds apart, and each commit writes every page it touched to the
// WAL. Yielding lets the goroutines that were about to queue theirs join the
// transaction: at 10,000 trickling nodes, 11,000 commits became 5,800 and the
// writer's CPU fell by a tenth (internal/trickle's BenchmarkTrickle). A lone
// waiter loses only a pass of the scheduler.
func (w *writer) run() {
	j := w.j
	defer close(j.done)
	defer w.stmts.close()
	defer func() {
		for _, st := range w.prepared {
			st.Close()
		}
	}()
	for {
		var first op
		select {
		case first = <-j.ops:
		case <-j.quit:
			w.drain()
			return
		}
		w.batch = append(w.batch[:0], first)
		waiter := first.waits()
		if !waiter && j.batchDelay > 0 {
			w.timer.Reset(j.batchDelay)
		}
		yielded := false
	collect:
		for len(w.batch) < j.batchOps {
			// Take what is already queued without waiting.
			select {
			case o := <-j.ops:
				w.batch = append(w.batch, o)
				waiter = waiter || o.waits()
				continue
			default:
			}
			if waiter && !yielded {
				yielded = true
				runtime.Gosched()
				continue
			}
			if waiter || j.batchDelay == 0 {
				break
			}
			select {
			case o := <-j.ops:
				w.batch = append(w.batch, o)
				waiter = o.waits()
			case <-w.timer.C:
				break collect
			case <-j.quit:
				break collect // the next loop turn drains the rest
			}
		}
		w.timer.Stop()
		w.commit()
		if j.restartWAL.Swap(false) {
			w.restartWAL()
		}
	}
}

// restartWAL checkpoints on the writer's connection between transactions,
// so that the next one writes the WAL from its start (walRestartFrames).
// It copies only what was committed since the checkpointer's last pass.
// A failure is not the writer's: the WAL goes on growing until the next
// request, as it did before.
func (w *writer) restartWAL() {
	if _, err := w.j.wdb.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		w.j.log.Debug("journal: checkpoint to restart the WAL", "path", w.j.path, "err", err)
	}
}

// drain commits everything still queued. Close has already stopped new
// sends, so the queue only shrinks.
func (w *writer) drain() {
	for {
		w.batch = w.batch[:0]
	fill:
		for len(w.batch) < w.j.batchOps {
			select {
			case o := <-w.j.ops:
				w.batch = append(w.batch, o)
			default:
				break fill
			}
		}
		if len(w.batch) == 0 {
			return
		}
		w.commit()
	}
}

// busyRetries bounds how often a batch is replayed when another process
// holds the write lock beyond the 5 s busy timeout.
const busyRetries = 5

// commit writes the batch in one transaction and reports to its waiters.
func (w *writer) commit() {
	j := w.j
	// The batch is out of the queue: once it is written, its payloads no
	// longer count (summed now: writing it may let go of them).
	var queued int64
	for i := range w.batch {
		queued += w.batch[i].payloadBytes()
	}
	defer j.queued.give(queued)
	var began time.Time
	if j.observe != nil {
		began = time.Now()
	}
	err := j.failure()
	if err == nil {
		for try := 0; ; try++ {
			err = w.apply()
			if err == nil || !isBusy(err) || try == busyRetries {
				break
			}
			j.log.Warn("journal busy, retrying batch", "path", j.path, "try", try+1, "err", err)
		}
		if err != nil {
			err = j.errorf("writer stopped: %w", err)
			j.errMu.Lock()
			if j.err == nil {
				j.err = err
			}
			err = j.err
			j.errMu.Unlock()
			j.log.Error("journal write failed; the journal accepts no more writes", "path", j.path, "err", err)
		}
	}
	if err == nil {
		j.committed()
	}
	if j.observe != nil {
		j.observe(time.Since(began), len(w.batch), err)
	}
	w.prepareLearnt()
	for i := range w.batch {
		o := &w.batch[i]
		if o.done == nil {
			continue
		}
		if err != nil {
			o.done <- err
		} else {
			o.done <- o.err
		}
	}
	clear(w.batch) // drop payload references
}

// apply runs the batch in one transaction. A state change that fails for a
// reason of its own (not found, constraint) is reported to its caller alone,
// with none of its writes kept; any other error fails the whole batch.
//
// Isolating every state change in a savepoint costs two statements each
// (SAVEPOINT, RELEASE), a third of the writer's statements when many nodes
// start and end at once, and state changes almost never fail. So the batch
// first runs without savepoints; only if one fails is it rolled back and run
// again with them.
func (w *writer) apply() error {
	err := w.applyTx(false)
	if errors.Is(err, errIsolate) {
		err = w.applyTx(true)
	}
	return err
}

// errIsolate stops a batch run without savepoints when a state change fails
// on its own: the batch is run again, isolating each state change.
var errIsolate = errors.New("a state change failed; isolate each in a savepoint")

// maxRuns bounds writer.runs.
const maxRuns = 256

func (w *writer) applyTx(isolate bool) (err error) {
	ctx := context.Background()
	tx, err := w.j.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	defer func() {
		if err != nil {
			clear(w.runs) // the seqs this transaction took were never written
		}
	}()
	w.tx = w.stmts.bind(ctx, tx)
	clear(w.bound) // the transaction closes them
	stx := stmtTx{tx, w}
	if len(w.runs) > maxRuns {
		clear(w.runs)
	}
	w.versionRead = false
	clear(w.chains)
	clear(w.tops)
	w.pending = w.pending[:0]
	for i := range w.batch {
		o := &w.batch[i]
		o.err = nil
		switch o.kind {
		case opEvent:
			if err := w.insert(ctx, &o.ev); err != nil {
				return err
			}
		case opEvents:
			for i := range o.evs {
				if err := w.insert(ctx, &o.evs[i]); err != nil {
					return err
				}
			}
		case opFunc:
			// No state change reads or writes events, so the pending ones
			// need not be flushed first, and fill whole multi-row inserts.
			if !isolate {
				if err := o.fn(ctx, stx); err != nil {
					if isFatal(err) {
						return err
					}
					return errIsolate
				}
				continue
			}
			if _, err := stx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
				return err
			}
			if err := o.fn(ctx, stx); err != nil {
				if isFatal(err) {
					return err
				}
				o.err = err
				if _, err := stx.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
					return err
				}
			}
			if _, err := stx.ExecContext(ctx, "RELEASE op"); err != nil {
				return err
			}
		}
	}
	if err := w.flushPending(ctx); err != nil {
		return err
	}
	if err := w.flushTops(ctx); err != nil {
		return err
	}
	return tx.Commit()
}

// flushTops folds what the transaction journaled into provider_seq_tops.
func (w *writer) flushTops(ctx context.Context) error {
	for k, t := range w.tops {
		if t.first == 0 {
			continue // looked at, nothing journaled
		}
		if _, err := w.tx.upsertTop.ExecContext(ctx, k.run, k.node, k.attempt, t.top, t.first); err != nil {
			return err
		}
	}
	return nil
}

// insert journals one event, assigning its run's next seq.
//
// A provider event (Attempt > 0, ProviderSeq >= 0) whose ProviderSeq is above
// everything journaled for its chain of attempts cannot be a duplicate; that
// is every event of a healthy stream, and those take the fast path: a
// multi-row plain INSERT. Any other provider event may repeat one already
// journaled (a resumed stream overlapping what was saved), so it takes the
// slow path, and if it was a duplicate it is dropped without consuming a
// seq: seqs stay gap-free.
func (w *writer) insert(ctx context.Context, e *Event) error {
	rc, err := w.runCursor(ctx, e.RunID)
	if err != nil {
		return err
	}
	var c *chain
	if e.Attempt > 0 && e.ProviderSeq >= 0 {
		if c, err = w.chain(ctx, rc, e); err != nil {
			return err
		}
		if e.ProviderSeq <= c.top {
			return w.insertMaybeDuplicate(ctx, rc, c, e)
		}
		c.top = e.ProviderSeq
	}
	rc.lastSeq++
	e.Seq = rc.lastSeq
	if c != nil {
		c.journaled(e)
	}
	w.pending = append(w.pending, e)
	if len(w.pending) == rowsPerInsert {
		return w.flushPending(ctx)
	}
	return nil
}

// journaled notes that e, a provider event of c's attempt, got its seq.
func (c *chain) journaled(e *Event) {
	c.own.top = max(c.own.top, e.ProviderSeq)
	if c.own.first == 0 {
		c.own.first = e.Seq
	}
	if c.first == 0 {
		c.first = e.Seq
	}
}

// chain returns the chain of e's attempt, reading it on first use in a
// transaction: two index lookups, once per attempt per batch. What this
// transaction journaled for the chain's attempts is not in
// provider_seq_tops yet (flushTops), so it is added from w.tops.
func (w *writer) chain(ctx context.Context, rc *runCursor, e *Event) (*chain, error) {
	k := attemptKey{rc.key, e.NodeID, e.Attempt}
	if c, ok := w.chains[k]; ok {
		return c, nil
	}
	c := &chain{}
	if err := w.tx.chainStart.QueryRowContext(ctx, e.RunID, e.NodeID, e.Attempt).Scan(&c.start); err != nil {
		return nil, err
	}
	if err := w.tx.chainTop.QueryRowContext(ctx, rc.key, e.NodeID, c.start, e.Attempt).Scan(&c.top, &c.first); err != nil {
		return nil, err
	}
	for a := c.start; a <= e.Attempt; a++ {
		if t := w.tops[attemptKey{rc.key, e.NodeID, a}]; t != nil && t.first != 0 {
			c.top = max(c.top, t.top)
			if c.first == 0 || t.first < c.first {
				c.first = t.first
			}
		}
	}
	c.own = w.tops[k]
	if c.own == nil {
		c.own = &txnTop{top: NoProviderSeq}
		w.tops[k] = c.own
	}
	w.chains[k] = c
	return c, nil
}

// insertMaybeDuplicate is the slow path of insert: e is journaled unless an
// attempt of its chain already holds its provider seq. The check is exact:
// the writer holds the write lock, and the events this transaction added
// are flushed first.
func (w *writer) insertMaybeDuplicate(ctx context.Context, rc *runCursor, c *chain, e *Event) error {
	// The pending events go first: this one may duplicate one of them.
	if err := w.flushPending(ctx); err != nil {
		return err
	}
	var dup bool
	if err := w.tx.exists.QueryRowContext(ctx, rc.key, e.NodeID, c.first, c.start, e.Attempt, e.ProviderSeq).Scan(&dup); err != nil {
		return err
	}
	if dup {
		w.j.log.Debug("journal dropped a duplicate provider event", "run", e.RunID, "node", e.NodeID,
			"attempt", e.Attempt, "provider_seq", e.ProviderSeq, "chain_start", c.start, "kind", e.Kind)
		return nil
	}
	w.args = eventArgs(w.args[:0], rc.key, rc.lastSeq+1, e)
	if _, err := w.tx.insert1.ExecContext(ctx, w.args...); err != nil {
		return err
	}
	rc.lastSeq++
	e.Seq = rc.lastSeq
	c.journaled(e)
	return nil
}

// runCursor returns the cursor of a run, reading it when the writer does
// not know it or another connection has written since (see writer.runs). An event for a run that does not exist is a caller's bug that would leave
// an orphan in the log; it fails the writer, loudly.
func (w *writer) runCursor(ctx context.Context, runID string) (*runCursor, error) {
	if !w.versionRead {
		var dv int64
		if err := w.tx.dataVersion.QueryRowContext(ctx).Scan(&dv); err != nil {
			return nil, err
		}
		if dv != w.dataVersion {
			clear(w.runs) // another process wrote since
		}
		w.dataVersion, w.versionRead = dv, true
	}
	if rc, ok := w.runs[runID]; ok {
		return rc, nil
	}
	rc := &runCursor{}
	err := w.tx.runKey.QueryRowContext(ctx, runID).Scan(&rc.key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("event appended to run %q, which does not exist (CreateRun first)", runID)
	}
	if err != nil {
		return nil, err
	}
	if err := w.tx.lastSeq.QueryRowContext(ctx, rc.key).Scan(&rc.lastSeq); err != nil {
		return nil, err
	}
	w.runs[runID] = rc
	return rc, nil
}

// flushPending inserts the fast-path events, rowsPerInsert per statement and
// the remainder one by one.
func (w *writer) flushPending(ctx context.Context) error {
	p := w.pending
	if len(p) == 0 {
		return nil
	}
	w.pending = w.pending[:0]
	for len(p) >= rowsPerInsert {
		w.args = w.args[:0]
		for _, e := range p[:rowsPerInsert] {
			w.args = eventArgs(w.args, w.runs[e.RunID].key, e.Seq, e)
		}
		if _, err := w.tx.insertN.ExecContext(ctx, w.args...); err != nil {
			return err
		}
		p = p[rowsPerInsert:]
	}
	for _, e := range p {
		w.args = eventArgs(w.args[:0], w.runs[e.RunID].key, e.Seq, e)
		if _, err := w.tx.insert1.ExecContext(ctx, w.args...); err != nil {
			return err
		}
	}
	return nil
}

// eventArgs appends the insert arguments of one event, in column order.
func eventArgs(args []any, runKey, seq int64, e *Event) []any {
	payload := e.Payload
	if payload == nil {
		payload = []byte{}
	}
	return append(args, runKey, seq, e.NodeID, e.Attempt, e.Time.UnixNano(), e.Kind, e.Code, e.ProviderSeq, payload, max(e.Chunks, 1))
}

// isFatal tells a state change's own failure (bad input, missing row,
// constraint violation, lock held) from a failure of the database itself.
func isFatal(err error) bool {
	var le *LockedError
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) || errors.Is(err, sql.ErrNoRows) || errors.As(err, &le) {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff != sqlite3.SQLITE_CONSTRAINT
	}
	return true
}

func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}
