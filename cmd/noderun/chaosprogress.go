package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/noderun/noderun/runner/chaos"
)

// chaosProgress shows a chaos run's progress on stderr. On a terminal: one
// line, redrawn in place (vbauerster/mpb, as the run's live view), "case
// 17/60 · idle-silence @ research · 41s · eta 50s": the case runs finished
// of all, the one running longest (what the run waits on), the time since
// the first case run started, and an estimate of the time left; failed
// cases are printed above it as they end. Piped: one line per case run as
// it ends. Its callbacks are chaos.Options.Started and Progress, which
// chaos calls one at a time.
type chaosProgress struct {
	w   io.Writer
	p   *mpb.Progress // nil when piped
	bar *mpb.Bar
	now func() time.Time

	mu       sync.Mutex // the decorator runs on mpb's goroutine
	first    time.Time  // the first case run's start
	total    int
	finished int
	failed   int
	sum      time.Duration // of the finished runs
	running  map[string]chaos.Start
	slots    int // most runs seen at once: the run's parallelism
	stopped  bool
}

func newChaosProgress(w io.Writer) *chaosProgress {
	cp := &chaosProgress{w: w, now: time.Now, running: map[string]chaos.Start{}}
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
	if cp.first.IsZero() {
		cp.first = s.At
	}
	cp.total = s.Total
	cp.running[s.Case+"@"+s.Node] = s
	cp.slots = max(cp.slots, len(cp.running))
}

func (cp *chaosProgress) done(r chaos.Result) {
	cp.mu.Lock()
	delete(cp.running, r.Case+"@"+r.Node)
	cp.finished++
	cp.sum += r.Time
	if !r.Pass {
		cp.failed++
	}
	verdict, detail := "pass", ""
	if !r.Pass {
		verdict, detail = "FAIL", "  "+string(r.Outcome)
	}
	width := len(fmt.Sprint(cp.total))
	line := fmt.Sprintf("chaos %*d/%d  %s  %-18s @ %-14s %6.2fs%s\n", width, cp.finished, cp.total, verdict, r.Case, r.Node, r.Seconds, detail)
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
	if cp.first.IsZero() {
		return "chaos: the reference run (no faults)…"
	}
	now := cp.now()
	var longest chaos.Start
	for _, s := range cp.running {
		if longest.At.IsZero() || s.At.Before(longest.At) {
			longest = s
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "case %d/%d", cp.finished, cp.total)
	if cp.failed > 0 {
		fmt.Fprintf(&b, " · %d failed", cp.failed)
	}
	if !longest.At.IsZero() {
		what := longest.Case + " @ " + longest.Node
		if utf8.RuneCountInString(what) > 40 {
			what = string([]rune(what)[:39]) + "…"
		}
		fmt.Fprintf(&b, " · %s", what)
	}
	fmt.Fprintf(&b, " · %s", roundDuration(now.Sub(cp.first)))
	if eta, ok := cp.eta(now); ok {
		fmt.Fprintf(&b, " · eta %s", roundDuration(eta))
	}
	return b.String()
}

// eta estimates the time left: the finished runs' mean duration for each
// run still to finish, shared by the slots, but never less than what a
// running case is known to wait for still (a silence's idle window): a
// matrix's quick cases finish early and say nothing of its slow ones.
func (cp *chaosProgress) eta(now time.Time) (time.Duration, bool) {
	var floor time.Duration
	for _, s := range cp.running {
		floor = max(floor, s.Expected-now.Sub(s.At))
	}
	if cp.finished == 0 {
		return floor, floor > 0
	}
	mean := cp.sum / time.Duration(cp.finished)
	left := mean * time.Duration(cp.total-cp.finished) / time.Duration(max(1, cp.slots))
	return max(floor, left), true
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
