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
// events that came meanwhile at once (while many streams trickle together:
// PacedFrom). What it costs is latency: a chunk
// reaches the node (its journal row, the live view, a fault's detection)
// at most ReadGap later, well within the journal's own coalescing of rows
// (a second) and every idle bound (seconds). Only a trickle waits: a short
// read that came trickleAfter or more after the one before it. A stream
// whose events come faster (a cached answer, a fast model) is not delayed,
// nor is a full read (the socket has more), nor are the first eagerReads
// after a request is written: its answer is awaited, and the first events
// of a stream name what recovery needs (a response or interaction id, a
// thread), which must be journaled the moment it comes: a runner killed
// before then leaves nothing to re-attach to, and the node is asked again.
const ReadGap = 50 * time.Millisecond

// A stream slower than ReadGap (a token every 100 ms and more: a slow model,
// or thousands of streams sharing a machine) would find nothing after the
// wait: every token would cost the wait's timer on top of the read it saves
// nothing of. So the wait adapts: when the read after it blocked, no event
// had come, and the next wait is twice as long, up to maxWaits gaps; when
// something had come, the next is a quarter shorter, down to ReadGap; a read
// that is not a trickle's (a full one, the stream's end) sets it back to
// ReadGap. At 10,000 streams on two cores (a token every ~140 ms each), a
// read then takes two tokens or so, not one, and the runner's CPU fell by a
// tenth (internal/trickle's BenchmarkTrickle). A chunk reaches the node at
// most MaxReadWait after it came (the longest wait, aligned: WaitTick
// below): well within the journal's coalescing of rows (a second). What a
// crash can leave in the socket, unread, is at most the tokens of
// MaxReadWait.
const MaxReadWait = maxWaits*ReadGap + WaitTick

// WaitTick aligns the waits of every paced connection: a wait ends at the
// next multiple of WaitTick of the clock, not at its own instant. Waits
// that each end at their own instant are a timer expiry and a wake-up of
// the process each: at 1,000 streams, ~20,000 a second. Whether that costs
// depends on the machine's scheduler: with the simulator in the client's
// own session it did not (the kernel shares the CPU thread by thread), but
// with the simulator started apart (its own session, as one started in
// another terminal or as a CI service is: Linux's autogroup scheduling then
// shares the CPU between the two sessions), each wake-up was a futex, an
// epoll wait and a context switch (perf, one 1,000-node run: 65,000 futex
// calls and 150,000 epoll waits, against 4,000 and 61,000 aligned), and the
// run took 1.43x the bare client's CPU and 1.47x its wall
// (internal/trickle's BenchmarkTrickle, sim-apart/nodes=1000); aligned,
// 0.86x and 1.03x, and as before with the simulator in the same session.
// Waits that end within the same tick end together: one expiry wakes them
// all. What it costs: a wait up to WaitTick longer, so a chunk reaches the
// node at most MaxReadWait after it came. While fewer than CoarseFrom
// requests are in flight, the tick is FineTick.
const WaitTick = 25 * time.Millisecond

// FineTick is the tick the waits end on while fewer than CoarseFrom requests
// are in flight on the transport. The waits that end on a tick end together,
// and what they read is a burst of the process's work: at 1,000 streams and
// a 25 ms tick, ~500 connections read at once. Any process sharing the cores
// waits it out, and a provider on the same machine (the simulator in CI, a
// local model server) that paces each token from the one before adds every
// such wait to every stream. Measured at 1,000 nodes against the simulator
// (whole runs of four builds alternating, 8 rounds, medians): on a 25 ms
// tick 5.08 s of wall and 2.91 s of CPU, on 12.5 ms 5.00 and 3.06, on 10 ms
// 4.95 and 3.04, and read unpaced 4.95 and 4.50. At 10,000 streams on two
// cores the trade goes the other way: the machine is short of CPU, not of
// quiet, and a finer tick's wake-ups cost the CPU bound (see
// docs/performance.md). Connections on the two ticks need not end their
// waits together: all of a transport's see the same count, so they are on
// the same tick.
const FineTick = 10 * time.Millisecond

// CoarseFrom is how many requests in flight make the waits end on WaitTick
// rather than FineTick: past what two cores serve with room to spare (1,000
// trickling streams take ~0.6 of a core here, 10,000 take both).
const CoarseFrom = 2000

// PacedFrom is how many requests a transport (Transport) must have in flight
// for its connections' reads to be paced. Pacing pays where many streams
// trickle at once (at 1,000, most of the runner's CPU); a few streams cost
// little read as they come (a read or two an event, a few hundred a second),
// and their chunks are better had at once: a single long reasoning call
// reaches its journal and its live view without the wait, and the last
// streams of a wide run end without it (a wait at a stream's end was up to
// MaxReadWait on the run's wall: issue 45). A transport's count goes up when
// a request is sent and down when its answer's body ends or is closed.
const PacedFrom = 16

// maxWaits bounds the adaptive wait, in gaps.
const maxWaits = 4

// blocked is how long a read after the wait must have blocked to tell that
// nothing had come during it (a read that finds data returns in
// microseconds).
const blocked = time.Millisecond

// eagerReads is how many reads after a write never wait: the answer's
// headers and its first events (the Responses API's response.created, a
// Gemini interaction's start, Anthropic's message_start come first).
const eagerReads = 4

// shortRead is the size below which a read is taken as a trickle's: an
// event or a few, not a stream arriving faster than it is read.
const shortRead = 4 << 10

// trickleAfter is the least time between two short reads that makes a
// stream a trickle's: reasoning streams trickle at a token every 20-50 ms.
const trickleAfter = 5 * time.Millisecond

// pacedConn is a connection whose reads wait out ReadGap after a short
// one (see ReadGap).
type pacedConn struct {
	net.Conn
	gap   time.Duration
	now   func() time.Time    // time.Now; a test's clock
	sleep func(time.Duration) // time.Sleep; a test's records
	tick  time.Duration       // WaitTick; 0: waits unaligned (a test's)
	// inFlight counts the transport's requests in flight: a read waits only
	// while there are PacedFrom or more, on FineTick while fewer than
	// CoarseFrom (pace). nil: a connection on its own, always paced on tick.
	inFlight func() int64
	// waiting is set by a short read; eager counts the reads left after a
	// write that never wait. net/http reads a connection from one
	// goroutine and writes it from another.
	waiting atomic.Bool
	eager   atomic.Int32
	last    time.Time     // when the last read returned (the reader's alone)
	wait    time.Duration // how long a short read waits: from gap up to maxWaits gaps (MaxReadWait at ReadGap; the reader's alone)
}

// Paced returns c with its reads paced by gap (none when gap <= 0).
func Paced(c net.Conn, gap time.Duration) net.Conn {
	if gap <= 0 {
		return c
	}
	return &pacedConn{Conn: c, gap: gap, wait: gap, now: time.Now, sleep: time.Sleep, tick: WaitTick}
}

func (c *pacedConn) Read(p []byte) (int, error) {
	slept := false
	if c.eager.Load() > 0 {
		c.eager.Add(-1)
	} else if c.waiting.Load() {
		if paced, tick := c.pace(); paced {
			now := c.now()
			if d := c.wait - now.Sub(c.last); d > 0 {
				c.sleep(d + untilTick(now.Add(d), tick))
				slept = true
			}
		}
	}
	var woke time.Time
	if slept {
		woke = c.now()
	}
	n, err := c.Conn.Read(p)
	now := c.now()
	waiting := err == nil && n > 0 && n < min(len(p), shortRead) && now.Sub(c.last) >= trickleAfter
	c.waiting.Store(waiting)
	switch {
	case !waiting:
		c.wait = c.gap
	case slept && now.Sub(woke) >= blocked:
		c.wait = min(2*c.wait, maxWaits*c.gap) // nothing came while it slept
	case slept:
		c.wait = max(c.wait*3/4, c.gap) // something had come: wait less
	}
	c.last = now
	return n, err
}

// pace says whether a short read's wait is due now, and the tick it ends on
// (see inFlight).
func (c *pacedConn) pace() (paced bool, tick time.Duration) {
	if c.inFlight == nil {
		return true, c.tick
	}
	switch n := c.inFlight(); {
	case n < PacedFrom:
		return false, 0
	case n < CoarseFrom:
		return true, min(c.tick, FineTick)
	default:
		return true, c.tick
	}
}

func (c *pacedConn) Write(p []byte) (int, error) {
	c.eager.Store(eagerReads) // a request: its answer is read at once
	return c.Conn.Write(p)
}

// untilTick is how long after t the next multiple of tick of the wall clock
// comes (0: t is one, or tick is 0). The wall clock, not the monotonic one:
// every connection must find the same multiples, and a monotonic reading
// has no common origin to count them from. A step of the wall clock only
// moves where the ticks fall: a wait is never shorter than its own, nor
// more than a tick longer.
func untilTick(t time.Time, tick time.Duration) time.Duration {
	if tick <= 0 {
		return 0
	}
	if r := time.Duration(t.UnixNano() % int64(tick)); r > 0 {
		return tick - r
	}
	return 0
}
