package testkit

import (
	"flag"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ParallelUnlessSet sets -test.parallel to n unless the command line sets
// it (or fuzzes, where it is the number of fuzzing workers). Call it from
// TestMain, before m.Run. -parallel defaults to GOMAXPROCS, 2 on a small CI
// machine: a package whose parallel tests mostly wait (out a silence, a
// Retry-After, a recovery deadline, on sockets and timers, not on the CPU)
// would have them wait for each other's waits. The tests that do keep a
// CPU busy take a slot of a CPUs instead, so that at most GOMAXPROCS of
// them run at once, as before.
func ParallelUnlessSet(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" || f.Name == "test.fuzz" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// slots is how many tests hold a CPUs slot at once: one per CPU, and two
// under -short, which skips the agent CLIs (RealPeer), the heaviest holders.
func slots() int {
	if testing.Short() {
		return 2 * runtime.GOMAXPROCS(0)
	}
	return runtime.GOMAXPROCS(0)
}

// ParallelByMode is ParallelUnlessSet(short) under -short and
// ParallelUnlessSet(full) otherwise: for a package whose full suite runs
// processes that take CPUs (noderun killed -9, Chromium, agent CLIs) beside
// tests that only wait, and whose edit loop, without those, mostly waits.
func ParallelByMode(full, short int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		ParallelUnlessSet(short)
	} else {
		ParallelUnlessSet(full)
	}
}

// ParallelIfShort marks t parallel under -short only. It is for a test
// whose timing (a run's liveness by heartbeat, a poll's cadence, a
// cancellation's moment) has held in the full suite only when it ran alone
// in its package, beside the -race load of another package, and fails
// there in parallel (make test has shown it), while in the edit loop,
// without -race and real peers, it overlaps the others safely.
func ParallelIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Parallel()
	}
}

// CPUs is a slot per CPU (GOMAXPROCS) for the parallel tests that keep a
// CPU busy: those that run an agent CLI (a Node.js program whose start-up
// takes a second or more of CPU and counts against a recovery deadline),
// stream tens of thousands of events, or check what a stream's pace implies
// (no silence in an undisturbed stream). With -parallel raised
// (ParallelUnlessSet) no more of them run at once than the default
// -parallel ran, so they do not slow each other past the bounds they check;
// the tests that only wait run beside them. A package keeps one; the zero
// value is ready.
type CPUs struct {
	mu    sync.Mutex
	ready bool
	free  int             // slots free; never > 0 while some test waits
	first []chan struct{} // waiting in TakeFirst, served before ...
	rest  []chan struct{} // ... those waiting in Take, each in turn
}

// Take waits for a slot and holds it until the test (and its cleanups
// registered after Take) ends. Call it right after t.Parallel. The test's
// elapsed time includes the wait, which it logs: its own time is the rest.
func (c *CPUs) Take(tb testing.TB) {
	tb.Helper()
	c.take(tb, false)
}

// TakeFirst is Take for the longest tests: they get a slot before the
// tests waiting in Take, so that none of them starts last and runs alone
// while the other slots have nothing left to do.
func (c *CPUs) TakeFirst(tb testing.TB) {
	tb.Helper()
	c.take(tb, true)
}

func (c *CPUs) take(tb testing.TB, first bool) {
	tb.Helper()
	start := time.Now()
	c.mu.Lock()
	if !c.ready {
		c.free, c.ready = slots(), true
	}
	if c.free > 0 {
		c.free--
		c.mu.Unlock()
	} else {
		turn := make(chan struct{})
		if first {
			c.first = append(c.first, turn)
		} else {
			c.rest = append(c.rest, turn)
		}
		c.mu.Unlock()
		<-turn // closed by release, which hands over its slot
	}
	if waited := time.Since(start); waited >= 100*time.Millisecond {
		tb.Logf("waited %.2fs for a CPU slot (testkit.CPUs)", waited.Seconds())
	}
	tb.Cleanup(c.release)
}

// release hands the slot to the next test waiting, or frees it.
func (c *CPUs) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case len(c.first) > 0:
		close(c.first[0])
		c.first = c.first[1:]
	case len(c.rest) > 0:
		close(c.rest[0])
		c.rest = c.rest[1:]
	default:
		c.free++
	}
}
