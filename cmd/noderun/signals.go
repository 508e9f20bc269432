package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

// signalsKey finds the process's *signals in the app's metadata.
const signalsKey = "signals"

// cancelWindow is how long an interrupted run waits for a second Ctrl-C that
// asks to cancel the work it left running at the provider.
const cancelWindow = 3 * time.Second

// signals turns SIGINT and SIGTERM into an interruption: the first cancels
// the run's context, so the runner stops and journals the run as interrupted
// while resumable work (background responses) goes on at the provider. A
// second Ctrl-C (or SIGTERM) asks to cancel that work too; a third one ends the
// process the ordinary way.
type signals struct {
	ch    chan os.Signal
	stopC chan struct{}
	again chan struct{} // closed by the second signal

	mu    sync.Mutex
	first os.Signal
}

func watchSignals(parent context.Context) (context.Context, *signals) {
	ctx, cancel := context.WithCancelCause(parent)
	s := &signals{ch: make(chan os.Signal, 3), stopC: make(chan struct{}), again: make(chan struct{})}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-s.ch:
			s.mu.Lock()
			s.first = sig
			s.mu.Unlock()
			cancel(fmt.Errorf("%w (%s)", context.Canceled, sig))
		case <-s.stopC:
			return
		}
		select {
		case <-s.ch:
			close(s.again)
			signal.Stop(s.ch) // a third signal ends the process
		case <-s.stopC:
		}
	}()
	return ctx, s
}

func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.stopC)
}

// interactive reports whether the run was interrupted by Ctrl-C (SIGINT),
// where a person may press it again; SIGTERM (CI, a pod eviction) exits at once.
func (s *signals) interactive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first == os.Interrupt
}

// cancelAsked waits up to d for the second signal.
func (s *signals) cancelAsked(d time.Duration) bool {
	select {
	case <-s.again:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.again:
		return true
	case <-t.C:
		return false
	}
}

// signalsOf finds the process's signals; nil when the app runs without them
// (a test that builds the app itself).
func signalsOf(c *cli.Context) *signals {
	s, _ := c.App.Metadata[signalsKey].(*signals)
	return s
}
