package runner

import (
	"sync"
	"time"

	"github.com/noderun/noderun/journal"
)

// A node's deltas are journaled in rows of up to coalesceChunks chunks (a
// token each in the chat and Responses protocols), coalesceBytes, or a
// second of arrivals, whichever comes first: every chunk's bytes are
// journaled, once and in order, but a stream costs one SQLite row per 16
// tokens, or per second when it is slower, instead of one per token. Real
// reasoning streams trickle, a token every 20-50 ms in an SSE event of its
// own: at the former 5 ms window every token was its own row, and the journal
// a third of the runner's CPU against a bare client reading the same streams
// (issue 45; internal/trickle's BenchmarkTrickle). The bound is in chunks as
// well as time because what a crash costs is tokens: a slow stream's row
// may wait a second, a fast one's never more than 15 chunks.
//
// A run's flusher journals every node's pending row at once, every
// coalesceWindow: one goroutine and one ticker for the whole run, not a timer
// per node armed per token, and the slow rows of many nodes reach the writer
// together, in one transaction (journal.AppendAll). A row is also
// flushed by its own stream: at coalesceChunks or coalesceBytes, before any
// other event of the node (terminal evidence, a fault's diagnostic, a mark, a
// reset), when the attempt ends (a cut, a cancel, a shutdown signal), and by
// a chunk that arrives coalesceWindow after the row's first (the flusher was
// late).
//
// So only a crash of the process (kill -9, power) can find chunks
// unjournaled: those of the last CrashBound of the stream, and no more than
// CrashChunks of them. docs/architecture.md says what a resume does with
// them, kind by kind.
const (
	coalesceWindow = time.Second
	coalesceChunks = 16
	coalesceBytes  = 4 << 10
)

// CrashBound and CrashChunks bound what a crash of the process can find
// unjournaled of a node's stream, while the runner and its journal keep up:
// the pending row (under coalesceChunks chunks, coalesceWindow of arrivals
// and coalesceBytes) and the rows the journal has not committed yet (those
// flushed in its last journal.DefaultBatchDelay: at most one full row while
// the stream is slower than coalesceChunks per DefaultBatchDelay, 640 chunks
// a second). A starved process journals later; it never acknowledges a chunk
// as journaled before it is.
const (
	CrashBound  = coalesceWindow + journal.DefaultBatchDelay
	CrashChunks = 2*coalesceChunks - 1
)

// flusher journals the pending rows of a run's nodes every coalesceWindow.
type flusher struct {
	j       *journal.Journal
	mu      sync.Mutex
	pending []*coalescer // coalescers holding a row, each once (coalescer.listed)
	spare   []*coalescer
	rows    []journal.Event // flushAll's, reused
	stop    chan struct{}
	done    chan struct{}
}

func startFlusher(j *journal.Journal) *flusher {
	f := &flusher{j: j, stop: make(chan struct{}), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *flusher) loop() {
	defer close(f.done)
	t := time.NewTicker(coalesceWindow)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.flushAll()
		case <-f.stop:
			f.flushAll()
			return
		}
	}
}

// close stops the flusher after a last flush. Nodes flush their own rows
// when their attempts end, so by the time a run is over there is nothing
// left; the last flush is for a node abandoned by a panic.
func (f *flusher) close() {
	close(f.stop)
	<-f.done
}

// list marks c as holding a row.
func (f *flusher) list(c *coalescer) {
	f.mu.Lock()
	if !c.listed {
		c.listed = true
		f.pending = append(f.pending, c)
	}
	f.mu.Unlock()
}

func (f *flusher) flushAll() {
	f.mu.Lock()
	batch := f.pending
	f.pending, f.spare = f.spare[:0], nil
	for _, c := range batch {
		c.listed = false
	}
	f.mu.Unlock()
	// Every pending row goes to the journal in one call (journal.AppendAll:
	// one transaction, instead of a page of its node index written for
	// almost every row). Each coalescer stays locked until its row is
	// queued, as its own flushes are, so that no later row of its node
	// overtakes it.
	rows := f.rows[:0]
	for i, c := range batch {
		c.mu.Lock()
		if c.ev.Kind == "" {
			c.mu.Unlock() // its stream flushed it
			batch[i] = nil
			continue
		}
		c.ev.Payload = c.buf // AppendAll copies it
		rows = append(rows, c.ev)
		c.ev = journal.Event{}
	}
	var err error
	if len(rows) > 0 {
		err = f.j.AppendAll(rows)
	}
	for i, c := range batch {
		if c == nil {
			continue
		}
		if err != nil && c.err == nil {
			c.err = err // its stream stops at its next chunk
		}
		c.mu.Unlock()
		batch[i] = nil
	}
	clear(rows)
	f.rows = rows[:0]
	f.mu.Lock()
	if f.spare == nil {
		f.spare = batch[:0] // reused: no allocation per tick
	}
	f.mu.Unlock()
}

// coalescer holds the pending row of same-kind chunk events of one node.
type coalescer struct {
	j *journal.Journal
	f *flusher // nil: rows wait for their stream to flush them (tests)

	listed bool // in f.pending; under f.mu

	mu    sync.Mutex
	ev    journal.Event // pending; Kind == "" when there is none
	buf   []byte
	first time.Time // when the pending event's first chunk arrived
	err   error     // from a flush the flusher did
}

// add journals ev with payload text, which arrived at at, merged with the
// pending event when they are of one kind and attempt and the pending event
// is younger than coalesceWindow: the merged event carries the last chunk's
// provider sequence.
func (c *coalescer) add(ev journal.Event, text string, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.err; err != nil { // a timed flush failed: the stream must stop now, not at its end
		c.err = nil
		return err
	}
	if c.ev.Kind != "" && (c.ev.Kind != ev.Kind || c.ev.Attempt != ev.Attempt || at.Sub(c.first) >= coalesceWindow) {
		if err := c.flushLocked(); err != nil {
			return err
		}
	}
	if c.ev.Kind == "" {
		c.ev, c.buf, c.first = ev, append(c.buf[:0], text...), at
		c.ev.Chunks = 1
		if c.f != nil {
			c.f.list(c)
		}
	} else {
		c.buf = append(c.buf, text...)
		c.ev.ProviderSeq = ev.ProviderSeq
		c.ev.Chunks++
	}
	if len(c.buf) >= coalesceBytes || c.ev.Chunks >= coalesceChunks {
		return c.flushLocked()
	}
	return nil
}

// flush journals the pending event now, and reports an error a timed flush met.
func (c *coalescer) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.flushLocked()
	if c.err != nil {
		err, c.err = c.err, nil
	}
	return err
}

func (c *coalescer) flushLocked() error {
	if c.ev.Kind == "" {
		return nil
	}
	c.ev.Payload = c.buf // Append copies it
	err := c.j.Append(c.ev)
	c.ev = journal.Event{}
	return err
}
