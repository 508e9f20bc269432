// Package idle ends a streaming connection that goes silent: the adapters of
// background work (Responses, Gemini Interactions) let a stream go after its
// idle window and poll the work's status instead, so a silent stream costs a
// poll, never the node.
package idle

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ErrSilent: the server sent no answer within the idle window.
var ErrSilent = errors.New("no answer within the idle window")

// Watchdog ends a connection that shows no event for its window, counted
// from the moment the request is sent: a server that never answers is as
// silent as one that stops. Keepalive comments do not kick it.
type Watchdog struct {
	window time.Duration
	timer  *time.Timer
	fired  atomic.Bool
}

// NewWatchdog cancels the connection's context (cancel) once window passes
// without a Kick; a window of 0 never fires.
func NewWatchdog(window time.Duration, cancel context.CancelFunc) *Watchdog {
	w := &Watchdog{window: window}
	if window > 0 {
		w.timer = time.AfterFunc(window, func() {
			w.fired.Store(true)
			cancel()
		})
	}
	return w
}

// Window is the idle window.
func (w *Watchdog) Window() time.Duration { return w.window }

// Kick restarts the window after an event.
func (w *Watchdog) Kick() {
	if w.timer != nil {
		w.timer.Reset(w.window)
	}
}

// KickAt restarts the window from at, when the event that kicks it arrived
// (sse.Reader.Received), rather than from now: a gateway counts silence from
// the last bytes it passed on, and an adapter that handled the event late
// (it waited for the journal on a loaded machine) would otherwise hold a
// silent stream past the gateway's cut. A quarter of the window is left at
// least, so that bytes that arrived during such a wait are read before the
// connection is let go. A zero at is Kick.
func (w *Watchdog) KickAt(at time.Time) {
	if w.timer == nil {
		return
	}
	if at.IsZero() {
		w.timer.Reset(w.window)
		return
	}
	w.timer.Reset(left(w.window, time.Since(at)))
}

// left is what remains of window once since has passed, and a quarter of
// it at least.
func left(window, since time.Duration) time.Duration {
	if d := window - max(since, 0); d > window/4 {
		return d
	}
	return window / 4
}

// Stop ends the watch (the connection is closed).
func (w *Watchdog) Stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// Idle reports whether the window passed (and the connection was ended).
func (w *Watchdog) Idle() bool { return w.fired.Load() }

// A Session reads one piece of background work (a response, an
// interaction) by its streams: it reads a stream until it ends or goes
// silent, polls the work's status through the silence, and re-attaches to a
// new stream when the status moves. C is the adapter's connection type.
type Session[C comparable] interface {
	// Read consumes one stream: idle when it went silent for the idle
	// window (it is closed), else nil after the work's terminal evidence
	// or the error that ended it.
	Read(ctx context.Context, c C) (idle bool, err error)
	// HasRef reports whether the work's id is known: without it there is
	// nothing to poll.
	HasRef() bool
	// IdleBeforeRef is the error of silence before the id arrived.
	IdleBeforeRef() error
	// Poll polls the work's status until it moves (or completes).
	Poll(ctx context.Context) (completed bool, err error)
	// Attach opens a stream after the session's cursor; ErrSilent when no
	// answer came within the idle window.
	Attach(ctx context.Context) (C, error)
	// SilentAfterCompletion is the error of completed work whose stream
	// does not answer: the executor then takes the output from a status
	// check.
	SilentAfterCompletion() error
}

// Run drives s from the open stream c (the zero C polls first) to the
// work's end: a silent stream costs a poll, never the node.
func Run[C comparable](ctx context.Context, s Session[C], c C) error {
	var none C
	for {
		if c != none {
			silent, err := s.Read(ctx, c)
			if !silent {
				return err
			}
		}
		if !s.HasRef() {
			return s.IdleBeforeRef()
		}
		completed, err := s.Poll(ctx)
		if err != nil {
			return err
		}
		c, err = s.Attach(ctx)
		switch {
		case errors.Is(err, ErrSilent) && completed:
			return s.SilentAfterCompletion()
		case err != nil && !errors.Is(err, ErrSilent):
			return err
		}
	}
}
