package chaos

import "time"

// Tracker counts a chaos run's case runs as they start and end, for a view
// of its progress: feed it Options.Started and Options.Progress. It says
// how many have finished of all and how many failed, which one has been
// running longest (what the run waits on), and how long the rest may take.
// The zero value is ready; a Tracker is not safe for concurrent use (Run
// calls those callbacks one at a time, but a display reads from its own
// goroutine: hold a lock around both).
type Tracker struct {
	// First is when the first case run started; zero before any did (the
	// reference run goes first).
	First    time.Time
	Total    int
	Finished int
	Failed   int

	sum     time.Duration // of the finished runs
	running map[string]Start
	slots   int // most runs seen at once: the run's parallelism
}

// Started records a case run that started.
func (t *Tracker) Started(s Start) {
	if t.First.IsZero() {
		t.First = s.At
	}
	if t.running == nil {
		t.running = map[string]Start{}
	}
	t.Total = s.Total
	t.running[s.Case+"@"+s.Node] = s
	t.slots = max(t.slots, len(t.running))
}

// Done records a case run that ended.
func (t *Tracker) Done(r Result) {
	delete(t.running, r.Case+"@"+r.Node)
	t.Finished++
	t.sum += r.Time
	if !r.Pass {
		t.Failed++
	}
}

// Longest is the case run that has been running longest; false when none
// runs.
func (t *Tracker) Longest() (Start, bool) {
	var longest Start
	for _, s := range t.running {
		if longest.At.IsZero() || s.At.Before(longest.At) {
			longest = s
		}
	}
	return longest, !longest.At.IsZero()
}

// ETA estimates the time left at now: the finished runs' mean duration for
// each run still to finish, shared by the slots, but never less than what a
// running case is known to wait for still (Start.Expected: a silence's idle
// window), since a matrix's quick cases finish early and say nothing of its
// slow ones. False when there is nothing to go on yet.
func (t *Tracker) ETA(now time.Time) (time.Duration, bool) {
	var floor time.Duration
	for _, s := range t.running {
		floor = max(floor, s.Expected-now.Sub(s.At))
	}
	if t.Finished == 0 {
		return floor, floor > 0
	}
	mean := t.sum / time.Duration(t.Finished)
	left := mean * time.Duration(t.Total-t.Finished) / time.Duration(max(1, t.slots))
	return max(floor, left), true
}
