package idle

import (
	"context"
	"errors"
	"testing"
	"time"
)

// script is a Session whose streams and polls answer from lists.
type script struct {
	reads    []bool // idle per Read
	attaches []error
	polls    []bool // completed per Poll
	ref      bool
	log      []string
}

var errEnded = errors.New("ended")

func (s *script) Read(context.Context, int) (bool, error) {
	s.log = append(s.log, "read")
	idle := s.reads[0]
	s.reads = s.reads[1:]
	if idle {
		return true, nil
	}
	return false, nil
}
func (s *script) HasRef() bool                 { return s.ref }
func (s *script) IdleBeforeRef() error         { s.log = append(s.log, "no-ref"); return errEnded }
func (s *script) SilentAfterCompletion() error { s.log = append(s.log, "silent-done"); return errEnded }
func (s *script) Poll(context.Context) (bool, error) {
	s.log = append(s.log, "poll")
	c := s.polls[0]
	s.polls = s.polls[1:]
	return c, nil
}
func (s *script) Attach(context.Context) (int, error) {
	s.log = append(s.log, "attach")
	err := s.attaches[0]
	s.attaches = s.attaches[1:]
	if err != nil {
		return 0, err
	}
	return 1, nil
}

func TestRun(t *testing.T) {
	cases := []struct {
		name string
		s    script
		c    int
		want string
	}{
		{"a stream that completes", script{reads: []bool{false}, ref: true}, 1, "read"},
		{"silent, polled, re-attached", script{reads: []bool{true, false}, polls: []bool{false}, attaches: []error{nil}, ref: true}, 1, "read poll attach read"},
		{"no stream yet: polls first", script{reads: []bool{false}, polls: []bool{false}, attaches: []error{nil}, ref: true}, 0, "poll attach read"},
		{"silent before the id", script{reads: []bool{true}}, 1, "read no-ref"},
		{"completed, but its stream is silent", script{reads: []bool{true}, polls: []bool{true}, attaches: []error{ErrSilent}, ref: true}, 1, "read poll attach silent-done"},
		{"a re-attach silent again polls again", script{reads: []bool{true, false}, polls: []bool{false, false}, attaches: []error{ErrSilent, nil}, ref: true}, 1,
			"read poll attach poll attach read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_ = Run[int](context.Background(), &c.s, c.c)
			if got := join(c.s.log); got != c.want {
				t.Errorf("steps %q, want %q", got, c.want)
			}
		})
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestWatchdog(t *testing.T) {
	// A window not yet passed: kicked, it stays quiet (no timing involved).
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWatchdog(time.Hour, cancel)
	w.Kick()
	if w.Idle() || ctx.Err() != nil {
		t.Fatal("fired within its window")
	}
	w.Stop()
	cancel()
	// A window that passes with no event ends the connection and says so.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	w = NewWatchdog(time.Millisecond, cancel)
	<-ctx.Done()
	if !w.Idle() {
		t.Fatal("the context ended but the watchdog does not say idle")
	}
	// No window: never fires.
	if NewWatchdog(0, func() { t.Error("a zero window fired") }).Idle() {
		t.Fatal("a zero window says idle")
	}
}

func TestLeft(t *testing.T) {
	const w = 4 * time.Second
	for _, c := range []struct {
		since, want time.Duration
	}{
		{0, w},                                 // handled as it arrived: the whole window
		{time.Second, 3 * time.Second},         // a second in the buffer counts as silence
		{3 * time.Second, time.Second},         // a quarter left, exactly
		{3900 * time.Millisecond, time.Second}, // no less than a quarter: what waits unread is read first
		{time.Hour, time.Second},
		{-time.Second, w}, // never more than the window
	} {
		if got := left(w, c.since); got != c.want {
			t.Errorf("left(%s, %s) = %s, want %s", w, c.since, got, c.want)
		}
	}
}

// The window counts from the event's arrival: kicked with an arrival most
// of a window ago, the watchdog fires after the quarter it leaves (0.75 s),
// long before a window counted from the kick would end (3 s).
func TestKickAtCountsFromTheArrival(t *testing.T) {
	const w = 3 * time.Second
	fired := make(chan time.Time, 1)
	dog := NewWatchdog(w, func() { fired <- time.Now() })
	defer dog.Stop()
	kick := time.Now()
	dog.KickAt(kick.Add(-w * 9 / 10))
	select {
	case at := <-fired:
		if !dog.Idle() || at.Sub(kick) < w/4 {
			t.Fatalf("fired %s after the kick (idle %v); want a quarter of the window (%s) at least", at.Sub(kick), dog.Idle(), w/4)
		}
	case <-time.After(w*3/4 - time.Since(kick)):
		t.Fatalf("not fired %s after a kick whose event arrived %s before it (a window counted from the kick ends at %s)", w*3/4, w*9/10, w)
	}
}
