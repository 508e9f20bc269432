// Package heapfloor keeps the garbage collector from running while a
// process's heap is young and small: for a command that starts a wide run.
//
// A run of 1,000 nodes allocates each node's state, connection and
// goroutine stacks in its first half second. With Go's default (GOGC=100)
// the first collection comes at a 4 MB heap and the next whenever the heap
// doubles: seven collections in that half second (GODEBUG=gctrace=1), each
// scanning the stacks of thousands of new goroutines for little garbage,
// ~140 ms of CPU in all, taken from the requests being sent and from the
// server answering them on the same machine. The heap then stays at ~30-60
// MB for the rest of the run.
//
// A floor is an allocation that holds no pointers and is never written: the
// collector counts it in the live heap, so it sets the next collection at
// twice (live heap + floor), but the kernel gives it no memory until it is
// touched, and nothing touches it. Go has no setting for a lower bound on
// the heap goal (GOGC scales it, GOMEMLIMIT caps it); this is the
// documented way to get one (the runtime's "ballast" of
// https://go.dev/blog/go119runtime, superseded there only for the cap).
// What it costs is garbage: a process may hold up to twice the floor more
// before a collection, as resident memory.
package heapfloor

import "runtime"

// Size is the floor a command holds (64 MiB): the 1,000-node trickle run
// (internal/trickle) then collects once in its first 4 s instead of seven
// times in its first half second.
const Size = 64 << 20

// Hold keeps a floor of size bytes under the heap until the returned
// function is called (a command's end: defer heapfloor.Hold(heapfloor.Size)()).
//
// The runtime gives a large allocation fresh, untouched pages only when it
// finds them: where its range takes in pages the heap used and freed before,
// it clears the whole allocation, and the floor is then resident (1 run in
// ~60 of TestFloorCountsForTheCollectorButNotInMemory, with another process
// busy beside it). So the floor's pages are handed back to the kernel
// (discard): never written, they read as the zeros they hold either way.
func Hold(size int) (release func()) {
	floor := make([]byte, size)
	discard(floor)
	return func() { runtime.KeepAlive(floor) }
}
