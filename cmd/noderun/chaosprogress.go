package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/runner/chaos"
)

// chaosProgress shows a chaos run's progress on stderr. On a terminal: one
// line, redrawn in place (vbauerster/mpb, as the run's live view), "case
// 17/60 · idle-silence @ research · 41s · eta 50s": the case runs finished
// of all, the one running longest (what the run waits on), the time since
// the first case run started, and an estimate of the time left; failed
// cases are printed above it as they end. Piped: one line per case run as
// it ends. Its callbacks are chaos.Options.Started and Progress, which
// chaos calls one at a time; chaos.Tracker counts the runs and estimates.
type chaosProgress struct {
	w   io.Writer
	p   *mpb.Progress // nil when piped
	bar *mpb.Bar
	now func() time.Time

	mu      sync.Mutex // the decorator runs on mpb's goroutine
	tally   chaos.Tracker
	stopped bool
}

func newChaosProgress(w io.Writer) *chaosProgress {
	cp := &chaosProgress{w: w, now: time.Now}
	if f, ok := terminalFile(w); ok {
		cp.p = mpb.New(mpb.WithOutput(f), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithAutoRefresh())
		cp.bar = cp.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			return cp.line()
		})))
	}
	return cp
}

// width is the terminal's columns for the log written above the line; nil
// when piped.
func (cp *chaosProgress) width() func() int {
	if cp.p == nil {
		return nil
	}
	return termWidth(cp.w)
}

// writer is where other stderr output goes while the progress shows: above
// the redrawn line on a terminal.
func (cp *chaosProgress) writer() io.Writer {
	if cp.p != nil {
		return chaosAbove{cp}
	}
	return cp.w
}

// chaosAbove writes above the redrawn line, or through once it is gone.
type chaosAbove struct{ cp *chaosProgress }

func (a chaosAbove) Write(b []byte) (int, error) {
	a.cp.mu.Lock()
	stopped := a.cp.stopped
	a.cp.mu.Unlock()
	if !stopped {
		if n, err := a.cp.p.Write(b); err == nil {
			return n, nil
		}
	}
	return a.cp.w.Write(b)
}

func (cp *chaosProgress) started(s chaos.Start) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.tally.Started(s)
}

func (cp *chaosProgress) done(r chaos.Result) {
	cp.mu.Lock()
	cp.tally.Done(r)
	verdict, detail := "pass", ""
	if !r.Pass {
		verdict, detail = "FAIL", "  "+string(r.Outcome)
	}
	width := len(fmt.Sprint(cp.tally.Total))
	line := fmt.Sprintf("chaos %*d/%d  %s  %-18s @ %-14s %6.2fs%s\n", width, cp.tally.Finished, cp.tally.Total, verdict, r.Case, r.Node, r.Seconds, detail)
	tty := cp.p != nil
	cp.mu.Unlock()
	switch {
	case !tty:
		_, _ = io.WriteString(cp.w, line)
	case !r.Pass: // on a terminal, failures only: the table follows
		_, _ = io.WriteString(chaosAbove{cp}, line)
	}
}

// line renders the redrawn line. Called with mu held.
func (cp *chaosProgress) line() string {
	t := &cp.tally
	if t.First.IsZero() {
		return "chaos: the reference run (no faults)…"
	}
	now := cp.now()
	var b strings.Builder
	fmt.Fprintf(&b, "case %d/%d", t.Finished, t.Total)
	if t.Failed > 0 {
		fmt.Fprintf(&b, " · %d failed", t.Failed)
	}
	if longest, ok := t.Longest(); ok {
		fmt.Fprintf(&b, " · %s", textfit.Text(longest.Case+" @ "+longest.Node, 40))
	}
	fmt.Fprintf(&b, " · %s", roundDuration(now.Sub(t.First)))
	if eta, ok := t.ETA(now); ok {
		fmt.Fprintf(&b, " · eta %s", roundDuration(eta))
	}
	return b.String()
}

// stop ends the progress: the redrawn line goes (the summary follows).
// Safe to call more than once.
func (cp *chaosProgress) stop() {
	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		return
	}
	cp.stopped = true
	cp.mu.Unlock()
	if cp.p != nil {
		cp.bar.Abort(true)
		cp.p.Wait()
	}
}
