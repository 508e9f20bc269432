package ledger

import (
	"fmt"
	"slices"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// The timeline's layout: pure functions of what Load read, so that where a
// gap, a wait or a piece of an attempt is drawn is decided (and tested) here
// and the template only places what it is given.

// axis maps time to x. The runners' sessions are drawn to one scale; each
// gap between them (nobody ran the run: an interruption, a dead runner, the
// time until `noderun resume`) is a band of bounded width, so that a
// 12-minute interruption neither squashes the seconds around it nor vanishes.
type axis struct {
	parts []axisPart // in time order, contiguous: session, gap, session, ...
}

type axisPart struct {
	Span
	X0, X1 float64
	Gap    bool
}

// A gap band is wide enough for its label, and never takes over the timeline.
const (
	minGapW = 56.0
	maxGapW = 140.0
)

// newAxis lays sessions out on [left, left+width]. lo and hi widen the first
// and last session to everything drawn (an attempt journaled just outside);
// with no sessions, [lo, hi] is one.
func newAxis(sessions []Span, lo, hi time.Time, left, width float64) axis {
	ss := union(sessions) // sorted; touching sessions have no gap between them
	if len(ss) == 0 {
		if !hi.After(lo) {
			hi = lo.Add(time.Second)
		}
		ss = []Span{{lo, hi}}
	}
	ss[0].From = earlier(ss[0].From, lo)
	ss[len(ss)-1].To = later(ss[len(ss)-1].To, hi)

	var ran, total time.Duration
	for _, s := range ss {
		ran += s.D()
	}
	total = ss[len(ss)-1].To.Sub(ss[0].From)
	gaps := len(ss) - 1
	gapW := func(g Span) float64 {
		w := min(max(width*float64(g.D())/float64(total), minGapW), maxGapW)
		return min(w, width/float64(3*gaps)) // many gaps share a third of the width
	}
	rest := width
	for i := 1; i < len(ss); i++ {
		rest -= gapW(Span{ss[i-1].To, ss[i].From})
	}
	var a axis
	x := left
	for i, s := range ss {
		if i > 0 {
			g := Span{ss[i-1].To, s.From}
			w := gapW(g)
			a.parts = append(a.parts, axisPart{Span: g, X0: x, X1: x + w, Gap: true})
			x += w
		}
		w := rest / float64(len(ss))
		if ran > 0 {
			w = rest * float64(s.D()) / float64(ran)
		}
		a.parts = append(a.parts, axisPart{Span: s, X0: x, X1: x + w})
		x += w
	}
	return a
}

// x is where t falls; times outside the axis are drawn at its ends.
func (a axis) x(t time.Time) float64 {
	first, last := a.parts[0], a.parts[len(a.parts)-1]
	switch {
	case !t.After(first.From):
		return first.X0
	case !t.Before(last.To):
		return last.X1
	}
	for _, p := range a.parts {
		if t.Before(p.To) {
			if p.D() == 0 {
				return p.X0
			}
			return p.X0 + (p.X1-p.X0)*float64(t.Sub(p.From))/float64(p.D())
		}
	}
	return last.X1
}

// start is the axis's first instant: the offsets on the page count from it.
func (a axis) start() time.Time { return a.parts[0].From }

// end is its last.
func (a axis) end() time.Time { return a.parts[len(a.parts)-1].To }

// gaps are the bands between sessions.
func (a axis) gaps() []axisPart {
	var out []axisPart
	for _, p := range a.parts {
		if p.Gap {
			out = append(out, p)
		}
	}
	return out
}

// tick is a labelled instant on the axis.
type tick struct {
	X     float64
	Label string
}

// tickSteps are the spacings ticks may have.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// ticks places labelled ticks in each session, about every px pixels, at
// round offsets from the run's start (wall time: a session after a gap
// goes on from where the clock stood).
func (a axis) ticks(px float64) []tick {
	var out []tick
	for _, p := range a.parts {
		if p.Gap || p.X1-p.X0 < 1 {
			continue
		}
		want := time.Duration(float64(p.D()) * px / (p.X1 - p.X0))
		step := tickSteps[len(tickSteps)-1]
		if i, _ := slices.BinarySearch(tickSteps, want); i < len(tickSteps) {
			step = tickSteps[i]
		}
		from, to := p.From.Sub(a.start()), p.To.Sub(a.start())
		for d := (from + step - 1) / step * step; d <= to; d += step {
			out = append(out, tick{X: a.x(a.start().Add(d)), Label: offsetLabel(d, step)})
		}
	}
	return out
}

// offsetLabel writes an offset from the run's start with as many decimals
// as the ticks' step needs: "0.25s", "12s", "12m05.5s", "1h02m00s".
func offsetLabel(d, step time.Duration) string {
	if d == 0 {
		return "0s"
	}
	dec := 0
	for s := step; s < time.Second && dec < 3; s *= 10 {
		dec++
	}
	if d < time.Minute {
		return fmt.Sprintf("%.*fs", dec, d.Seconds())
	}
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	s := (d % time.Minute).Seconds()
	width := 2
	if dec > 0 {
		width += dec + 1
	}
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%0*.*fs", h, m, width, dec, s)
	}
	return fmt.Sprintf("%dm%0*.*fs", m, width, dec, s)
}

// Clock writes a duration as the report shows it: 850ms, 4.2s, 12m03s,
// 1h02m03s.
func Clock(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Clock(max(-d, 0)) // -d of the least Duration is itself
	case d < time.Second-time.Millisecond/2:
		return fmt.Sprintf("%dms", d.Round(time.Millisecond)/time.Millisecond)
	case d < time.Minute-50*time.Millisecond:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, (d%time.Minute)/time.Second)
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dh%02dm%02ds", d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second)
}

// gapWhy says how the session before a gap ended, from the run's records:
// interrupted (a signal), ended (the run finished: failed, then resumed with
// --retry), or its runner was lost (no end journaled: kill -9, a lost machine).
func gapWhy(runRecords []Record, before Span) string {
	why := "runner lost"
	for _, r := range runRecords {
		if r.Time.Before(before.From) || r.Time.After(before.To) {
			continue
		}
		switch r.Code {
		case diagnostics.RunInterrupted:
			why = "interrupted"
		case diagnostics.RunFinished:
			why = "ended"
			if st, ok := diagnostics.KeyRunStatus.Of(r.Record); ok && st != "" {
				why = "ended " + st
			}
		}
	}
	return why
}

// attemptSpan is when an attempt was under way: from its start to its end.
// One that never ended (its runner died) lasted until the end of the
// session that journaled the last of it, and no longer than until the next
// attempt began. A resume's notice that it picks the attempt up (NR406) is
// journaled against it but is not the attempt going on.
func attemptSpan(a journal.Attempt, next *journal.Attempt, recs []Record, sessions []Span) Span {
	if !a.Ended.IsZero() {
		return Span{a.Started, later(a.Ended, a.Started)}
	}
	last := a.Started
	for _, r := range recs {
		if r.Attempt == a.N && r.Code != diagnostics.NodeResumed {
			last = later(last, r.Time)
		}
	}
	to := last
	for _, s := range sessions {
		if !last.Before(s.From) && !last.After(s.To) {
			to = s.To
		}
	}
	if next != nil && !next.Started.IsZero() && next.Started.Before(to) {
		to = later(next.Started, a.Started)
	}
	return Span{a.Started, to}
}

// wait is a backoff wait: a recovery step's delay before it acts.
type wait struct {
	Span
	Rec *Record
}

// waitsOf are attempt n's backoff waits: from each of its step records that
// carries a delay, for that delay, within the attempt and within the session
// the wait began in (an interruption cuts a wait short). The executor
// journals a step before it waits, and ends a retried attempt only after
// the wait: without this the wait would look like more of the failed attempt.
func waitsOf(recs []Record, n int, span Span, sessions []Span) []wait {
	var out []wait
	for i := range recs {
		r := &recs[i]
		if r.Attempt != n || r.Code.Role != diagnostics.RoleStep {
			continue
		}
		delay, ok := diagnostics.KeyDelay.Of(r.Record)
		if !ok || delay <= 0 {
			continue
		}
		w := Span{later(r.Time, span.From), earlier(r.Time.Add(delay), span.To)}
		for _, s := range sessions {
			if !r.Time.Before(s.From) && !r.Time.After(s.To) {
				w.To = earlier(w.To, s.To)
			}
		}
		if w.D() > 0 {
			out = append(out, wait{w, r})
		}
	}
	slices.SortFunc(out, func(a, b wait) int { return a.From.Compare(b.From) })
	return out
}

// segKind is what a stretch of an attempt was.
type segKind string

const (
	segRun      segKind = "run"      // a runner worked on it: streaming, or failing
	segWait     segKind = "wait"     // a backoff wait before the next step
	segDetached segKind = "detached" // no runner: between sessions, the work waited (or ran on at the provider)
)

// segment is a stretch of an attempt.
type segment struct {
	Span
	Kind segKind
	Wait *Record // the step that waited (Kind segWait)
}

// segments cuts an attempt's span into what a runner spent on it, its
// backoff waits, and the stretches between sessions when no runner did.
// They cover the span within the sessions, in order, without overlapping.
func segments(span Span, waits []wait, sessions []Span) []segment {
	parts := clip(span, sessions)
	if len(parts) == 0 { // an instant: drawn as a sliver where it began
		return []segment{{Span: Span{span.From, span.From}, Kind: segRun}}
	}
	var out []segment
	for i, p := range parts {
		if i > 0 {
			out = append(out, segment{Span: Span{parts[i-1].To, p.From}, Kind: segDetached})
		}
		at := p.From
		for _, w := range waits {
			ws := Span{later(w.From, at), earlier(w.To, p.To)}
			if ws.D() <= 0 {
				continue
			}
			if ws.From.After(at) {
				out = append(out, segment{Span: Span{at, ws.From}, Kind: segRun})
			}
			out = append(out, segment{Span: ws, Kind: segWait, Wait: w.Rec})
			at = ws.To
		}
		if p.To.After(at) {
			out = append(out, segment{Span: Span{at, p.To}, Kind: segRun})
		}
	}
	return out
}
