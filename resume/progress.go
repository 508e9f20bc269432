package resume

import "time"

// Ground measures how far a node's attempts got, so that only new ground
// counts as progress. A retry from scratch replays what earlier attempts
// already streamed; if those bytes reset the backoff and the reconnect count,
// an upstream that always cuts after a few hundred bytes would be retried at
// the smallest delay until the budget is gone, in seconds rather than in the
// wall time the profile promises. So the executor resets them only when the
// current attempt gets further than every earlier attempt of the node (a new
// high-water mark). Re-attaching continues the same attempt, so everything it
// receives is new ground.
//
// The unit is the adapter's: bytes of output and reasoning, plus one per
// wire event that carries no text. It is compared only between attempts of
// one node, which speak one protocol.
type Ground struct {
	best int64 // the furthest any earlier attempt got
	cur  int64 // how far the current attempt got
}

// Advance records n more units of the current attempt and reports whether
// the attempt now stands on new ground.
func (g *Ground) Advance(n int64) bool {
	g.cur += n
	return g.cur > g.best
}

// Restart begins a new attempt from scratch.
func (g *Ground) Restart() {
	g.best = max(g.best, g.cur)
	g.cur = 0
}

// MinSilentCut is the shortest silence before a disconnect that is taken as
// an intermediary's idle cut rather than a blip of a busy stream.
const MinSilentCut = time.Second

// IdleHold is what a stream that can be let go and polled (Responses) should
// hold an idle connection for, after one was cut by an intermediary when it had
// been silent for cut: half the observed silence, so that the next silent
// stretch is let go well before the same gateway cuts it again. learnt is false
// when the cut says nothing new: the silence was too short to be an idle cut
// (MinSilentCut), or the adapter already lets go sooner than half of it.
func IdleHold(cut, hold time.Duration) (next time.Duration, learnt bool) {
	if cut < MinSilentCut {
		return hold, false
	}
	next = cut / 2
	if hold > 0 && next >= hold {
		return hold, false
	}
	return next, true
}
