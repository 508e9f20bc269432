package runner

import (
	"sync"
	"time"

	"github.com/noderun/noderun/journal"
)

// Deltas that arrive within coalesceWindow of each other are journaled as one
// event (up to coalesceBytes): every chunk's bytes are journaled, in order,
// but a fast stream costs one SQLite row per window instead of one per token,
// so journaling never throttles it. A slow stream (a token every few ms or
// more, as real models send) still gets a row per chunk.
//
// A stream that goes on flushes its own events, on its own goroutine: the
// chunk that arrives coalesceWindow or more after the pending event's first
// one flushes it. A timer flushes the last event of a stream that falls
// silent, quietAfter after its first chunk. The timer used to flush at
// coalesceWindow, racing the stream for the lock every 5 ms: on two cores
// the stream blocked on the lock ~80 times a 100k-token pass while the
// timer's goroutine journaled on the other core, and was resumed on
// another core as often, its caches cold (docs/performance.md). At
// quietAfter the timer never fires while chunks come.
const (
	coalesceWindow = 5 * time.Millisecond
	quietAfter     = 2 * coalesceWindow
	coalesceBytes  = 16 << 10
)

// coalescer holds the pending run of same-kind chunk events of one node.
type coalescer struct {
	j *journal.Journal

	mu    sync.Mutex
	ev    journal.Event // pending; Kind == "" when there is none
	buf   []byte
	first time.Time // when the pending event's first chunk arrived
	timer *time.Timer
	err   error // from a flush the timer did
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
		if c.timer == nil {
			c.timer = time.AfterFunc(quietAfter, c.timerFlush)
		} else {
			c.timer.Reset(quietAfter)
		}
	} else {
		c.buf = append(c.buf, text...)
		c.ev.ProviderSeq = ev.ProviderSeq
		c.ev.Chunks++
	}
	if len(c.buf) >= coalesceBytes {
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

func (c *coalescer) timerFlush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(); err != nil && c.err == nil {
		c.err = err
	}
}

func (c *coalescer) flushLocked() error {
	if c.ev.Kind == "" {
		return nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.ev.Payload = c.buf // Append copies it
	err := c.j.Append(c.ev)
	c.ev = journal.Event{}
	return err
}
