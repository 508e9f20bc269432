package conns

import (
	"net"
	"sync/atomic"
	"time"
)

// ReadGap is how long an adapter's connection lets the socket fill after a
// short read before it reads again. A reasoning stream trickles: a token
// every 20-50 ms, each its own SSE event in its own TCP segment. Read as
// it comes, every token costs a read that returns it, one more that finds
// nothing (EAGAIN), and a wake-up of the poller: at 1,000 such streams,
// most of the runner's CPU (issue 45; internal/trickle's BenchmarkTrickle).
// Waiting ReadGap after a short read lets the next read take the few
// events that came meanwhile at once. What it costs is latency: a chunk
// reaches the node (its journal row, the live view, a fault's detection)
// at most ReadGap later, well within the journal's own coalescing of rows
// (a second) and every idle bound (seconds). A full read does not wait (the
// stream is fast, the socket has more), nor does the first read after a
// request is written (its answer is awaited, not trickling).
const ReadGap = 50 * time.Millisecond

// shortRead is the size below which a read is taken as a trickle's: an
// event or a few, not a stream arriving faster than it is read.
const shortRead = 4 << 10

// pacedConn is a connection whose reads wait out ReadGap after a short
// one (see ReadGap).
type pacedConn struct {
	net.Conn
	gap   time.Duration
	sleep func(time.Duration) // time.Sleep; a test's records
	// waiting is set by a short read and cleared by a write: net/http
	// reads a connection from one goroutine and writes it from another.
	waiting atomic.Bool
	last    time.Time // when the last read returned (the reader's alone)
}

// Paced returns c with its reads paced by gap (none when gap <= 0).
func Paced(c net.Conn, gap time.Duration) net.Conn {
	if gap <= 0 {
		return c
	}
	return &pacedConn{Conn: c, gap: gap, sleep: time.Sleep}
}

func (c *pacedConn) Read(p []byte) (int, error) {
	if c.waiting.Load() {
		if d := c.gap - time.Since(c.last); d > 0 {
			c.sleep(d)
		}
	}
	n, err := c.Conn.Read(p)
	c.last = time.Now()
	c.waiting.Store(err == nil && n > 0 && n < min(len(p), shortRead))
	return n, err
}

func (c *pacedConn) Write(p []byte) (int, error) {
	c.waiting.Store(false) // a request: its answer is read at once
	return c.Conn.Write(p)
}
