package ledger

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// The report's own helpers (the accounting tests keep theirs).
var rt0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return rt0.Add(time.Duration(math.Round(s * float64(time.Second)))) }

func span(from, to float64) Span { return Span{sec(from), sec(to)} }

// rrec is a record of attempt n at s seconds.
func rrec(c diagnostics.Code, n int, s float64, attrs ...slog.Attr) Record {
	return Record{Record: diagnostics.New(c, c.Name, attrs...), Attempt: n, Time: sec(s)}
}

// step is a recovery step of attempt n at s seconds that waits delay seconds.
func step(c diagnostics.Code, n int, s, delay float64) Record {
	return rrec(c, n, s, diagnostics.KeyDelay.Attr(time.Duration(math.Round(delay*float64(time.Second)))))
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.01 }

// Sessions are drawn to one scale, and each gap between them as a band no
// narrower than its label and no wider than maxGapW; many gaps share a third
// of the width.
func TestAxisPlacesGaps(t *testing.T) {
	const left, width = 100.0, 900.0
	cases := []struct {
		name     string
		sessions []Span
		gapW     []float64 // each gap band's width
		sessW    []float64 // each session's width
	}{
		{"one session", []Span{span(0, 10)}, nil, []float64{900}},
		// A short gap is widened to its label; the sessions share the rest
		// in proportion to how long they ran.
		{"short gap", []Span{span(0, 10), span(10.1, 40.1)}, []float64{minGapW}, []float64{(900 - minGapW) / 4, (900 - minGapW) * 3 / 4}},
		// A 12-minute interruption between seconds of work does not squash them.
		{"long gap", []Span{span(0, 5), span(5+723, 5+723+5)}, []float64{maxGapW}, []float64{(900 - maxGapW) / 2, (900 - maxGapW) / 2}},
		// A gap in proportion when that is between the bounds.
		{"proportional gap", []Span{span(0, 4), span(5, 10)}, []float64{90}, []float64{(900 - 90) * 4 / 9, (900 - 90) * 5 / 9}},
		{"many gaps", []Span{span(0, 1), span(100, 101), span(200, 201), span(300, 301), span(400, 401), span(500, 501), span(600, 601), span(700, 701)},
			[]float64{900.0 / 21, 900.0 / 21, 900.0 / 21, 900.0 / 21, 900.0 / 21, 900.0 / 21, 900.0 / 21},
			[]float64{600.0 / 8, 600.0 / 8, 600.0 / 8, 600.0 / 8, 600.0 / 8, 600.0 / 8, 600.0 / 8, 600.0 / 8}},
		// Touching sessions (a resume the same millisecond) have no gap between them.
		{"touching", []Span{span(0, 3), span(3, 9)}, nil, []float64{900}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ax := newAxis(c.sessions, c.sessions[0].From, c.sessions[len(c.sessions)-1].To, left, width)
			var gaps, sess []float64
			x := left
			for _, p := range ax.parts {
				if !near(p.X0, x) {
					t.Errorf("part %v starts at x=%.2f, want %.2f: parts must be contiguous", p.Span, p.X0, x)
				}
				x = p.X1
				if p.Gap {
					gaps = append(gaps, p.X1-p.X0)
				} else {
					sess = append(sess, p.X1-p.X0)
				}
			}
			if !near(x, left+width) {
				t.Errorf("the axis ends at %.2f, want %.2f", x, left+width)
			}
			if fmt.Sprintf("%.1f", gaps) != fmt.Sprintf("%.1f", c.gapW) || fmt.Sprintf("%.1f", sess) != fmt.Sprintf("%.1f", c.sessW) {
				t.Errorf("gaps %.1f, sessions %.1f; want %.1f, %.1f", gaps, sess, c.gapW, c.sessW)
			}
		})
	}
}

// Time maps into its part: inside a session to scale, inside a gap across
// its band, outside the axis to its ends.
func TestAxisX(t *testing.T) {
	ax := newAxis([]Span{span(0, 5), span(728, 733)}, sec(0), sec(733), 0, 900)
	g := ax.gaps()
	if len(g) != 1 || g[0].From != sec(5) || g[0].To != sec(728) || !near(g[0].X1-g[0].X0, maxGapW) {
		t.Fatalf("gaps %+v", g)
	}
	sw := (900 - maxGapW) / 2
	for _, c := range []struct {
		t time.Time
		x float64
	}{
		{sec(-3), 0}, {sec(0), 0}, {sec(2.5), sw / 2}, {sec(5), sw},
		{sec(5 + 723.0/2), sw + maxGapW/2}, // the middle of the gap, the middle of its band
		{sec(728), sw + maxGapW}, {sec(730.5), sw + maxGapW + sw/2}, {sec(733), 900}, {sec(9999), 900},
	} {
		if got := ax.x(c.t); !near(got, c.x) {
			t.Errorf("x(%s) = %.2f, want %.2f", c.t.Sub(rt0), got, c.x)
		}
	}
	// Nothing journaled: a second of empty axis rather than a division by zero.
	empty := newAxis(nil, sec(0), sec(0), 10, 100)
	if got := empty.x(sec(0.5)); !near(got, 60) {
		t.Errorf("empty axis: x = %.2f, want 60", got)
	}
}

// Ticks fall in sessions only, at round offsets from the run's start, and
// a session after a gap goes on from where the clock stood.
func TestAxisTicks(t *testing.T) {
	ax := newAxis([]Span{span(0, 5), span(728, 733)}, sec(0), sec(733), 0, 900)
	var labels []string
	for _, tk := range ax.ticks(110) {
		labels = append(labels, tk.Label)
		for _, g := range ax.gaps() {
			if tk.X > g.X0+0.5 && tk.X < g.X1-0.5 {
				t.Errorf("tick %s at x=%.1f is inside the gap band", tk.Label, tk.X)
			}
		}
	}
	if got, want := strings.Join(labels, " "), "0s 2s 4s 12m08s 12m10s 12m12s"; got != want {
		t.Errorf("ticks %q, want %q", got, want)
	}
	fast := newAxis([]Span{span(0, 0.03)}, sec(0), sec(0.03), 0, 900)
	labels = labels[:0]
	for _, tk := range fast.ticks(110) {
		labels = append(labels, tk.Label)
	}
	if got, want := strings.Join(labels, " "), "0s 0.005s 0.010s 0.015s 0.020s 0.025s 0.030s"; got != want {
		t.Errorf("ticks of a 30 ms run %q, want %q", got, want)
	}
}

func TestClockAndOffsets(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0ms", 850 * time.Millisecond: "850ms", 999*time.Millisecond + 600*time.Microsecond: "1.0s", 4200 * time.Millisecond: "4.2s",
		59960 * time.Millisecond: "1m00s", 12*time.Minute + 3*time.Second: "12m03s", time.Hour + 2*time.Minute + 3*time.Second: "1h02m03s",
		-2 * time.Second: "-2.0s", time.Duration(math.MinInt64): "-0ms",
	} {
		if got := Clock(d); got != want {
			t.Errorf("Clock(%v) = %q, want %q", d, got, want)
		}
	}
	for _, c := range []struct {
		d, step time.Duration
		want    string
	}{
		{0, time.Second, "0s"}, {250 * time.Millisecond, 50 * time.Millisecond, "0.25s"}, {12 * time.Second, 2 * time.Second, "12s"},
		{12*time.Minute + 5500*time.Millisecond, 500 * time.Millisecond, "12m05.5s"}, {time.Hour + 2*time.Minute, time.Minute, "1h02m00s"},
		{1600 * time.Microsecond, time.Millisecond, "0.002s"},
	} {
		if got := offsetLabel(c.d, c.step); got != c.want {
			t.Errorf("offsetLabel(%v, %v) = %q, want %q", c.d, c.step, got, c.want)
		}
	}
}

// A gap is named by how the session before it ended.
func TestGapWhy(t *testing.T) {
	before := span(0, 5)
	cases := []struct {
		recs []Record
		want string
	}{
		{[]Record{rrec(diagnostics.RunStarted, 0, 0), rrec(diagnostics.RunInterrupted, 0, 5)}, "interrupted"},
		{[]Record{rrec(diagnostics.RunStarted, 0, 0), rrec(diagnostics.RunFinished, 0, 5, diagnostics.KeyRunStatus.Attr("failed"))}, "ended failed"},
		{[]Record{rrec(diagnostics.RunStarted, 0, 0)}, "runner lost"},
		// The end of a later session is not this one's.
		{[]Record{rrec(diagnostics.RunStarted, 0, 0), rrec(diagnostics.RunInterrupted, 0, 9)}, "runner lost"},
	}
	for _, c := range cases {
		if got := gapWhy(c.recs, before); got != c.want {
			t.Errorf("gapWhy(%v) = %q, want %q", c.recs, got, c.want)
		}
	}
}

// An attempt that never ended lasted until its runner stopped, or until
// it was picked up and went on in a later session, never past the next attempt.
func TestAttemptSpan(t *testing.T) {
	sessions := []Span{span(0, 10), span(20, 30)}
	ended := journal.Attempt{N: 1, Started: sec(1), Ended: sec(25)}
	open := journal.Attempt{N: 1, Started: sec(1)}
	next := journal.Attempt{N: 2, Started: sec(21)}
	cases := []struct {
		name string
		a    journal.Attempt
		next *journal.Attempt
		recs []Record
		want Span
	}{
		{"ended", ended, nil, nil, span(1, 25)},
		{"died in its session", open, nil, []Record{rrec(diagnostics.DisconnectDetected, 1, 4)}, span(1, 10)},
		{"went on after the gap and died again", open, nil, []Record{rrec(diagnostics.Reattached, 1, 22)}, span(1, 30)},
		// The resume's pick-up notice names the attempt; a retry followed.
		{"picked up by a retry", open, &next, []Record{rrec(diagnostics.NodeResumed, 1, 20.5)}, span(1, 10)},
		{"cut by the next attempt", journal.Attempt{N: 1, Started: sec(1)}, &journal.Attempt{N: 2, Started: sec(3)}, nil, span(1, 3)},
	}
	for _, c := range cases {
		if got := attemptSpan(c.a, c.next, c.recs, sessions); got != c.want {
			t.Errorf("%s: %v..%v, want %v..%v", c.name, got.From.Sub(rt0), got.To.Sub(rt0), c.want.From.Sub(rt0), c.want.To.Sub(rt0))
		}
	}
}

// segs writes segments as "kind from-to" in seconds, for comparing.
func segs(ss []segment) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("%s %g-%g", s.Kind, s.From.Sub(rt0).Seconds(), s.To.Sub(rt0).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// A backoff wait is its own segment, apart from the attempt that failed
// before it; the time between sessions is neither.
func TestSegments(t *testing.T) {
	one := []Span{span(0, 100)}
	two := []Span{span(0, 10), span(20, 30)}
	cases := []struct {
		name     string
		span     Span
		recs     []Record
		sessions []Span
		want     string
	}{
		{"clean", span(1, 5), nil, one, "run 1-5"},
		// A retried attempt ends after the wait that follows its failure.
		{"retried", span(1, 4.5), []Record{rrec(diagnostics.DisconnectDetected, 1, 3), step(diagnostics.RetryStarted, 1, 3, 1.5)}, one,
			"run 1-3, wait 3-4.5"},
		{"retried, ended a little after its wait", span(1, 4.6), []Record{step(diagnostics.RetryStarted, 1, 3, 1.5)}, one,
			"run 1-3, wait 3-4.5, run 4.5-4.6"},
		// A continue stays in its attempt: stream, wait, stream on.
		{"continued", span(1, 9), []Record{step(diagnostics.ContinueScheduled, 1, 3, 0.5)}, one, "run 1-3, wait 3-3.5, run 3.5-9"},
		{"two waits", span(0, 9), []Record{step(diagnostics.ReconnectScheduled, 1, 2, 1), step(diagnostics.ReconnectScheduled, 1, 5, 2)}, one,
			"run 0-2, wait 2-3, run 3-5, wait 5-7, run 7-9"},
		{"no delay, another attempt's wait, not a step", span(0, 9), []Record{step(diagnostics.ReconnectScheduled, 1, 2, 0),
			step(diagnostics.RetryStarted, 2, 3, 1), step(diagnostics.DisconnectDetected, 1, 4, 1)}, one, "run 0-9"},
		{"a wait longer than its attempt", span(0, 4), []Record{step(diagnostics.RetryStarted, 1, 3, 5)}, one, "run 0-3, wait 3-4"},
		// Interrupted, then re-attached by `noderun resume`.
		{"across a gap", span(2, 25), nil, two, "run 2-10, detached 10-20, run 20-25"},
		// Interrupted during a wait: the wait ends with the session.
		{"interrupted while waiting", span(2, 25), []Record{step(diagnostics.ReconnectScheduled, 1, 9, 3)}, two,
			"run 2-9, wait 9-10, detached 10-20, run 20-25"},
		{"an instant", span(3, 3), nil, one, "run 3-3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := segments(c.span, waitsOf(c.recs, 1, c.span, c.sessions), c.sessions)
			if segs(got) != c.want {
				t.Errorf("segments\n got %s\nwant %s", segs(got), c.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].From.Before(got[i-1].To) {
					t.Errorf("segments %d and %d overlap", i-1, i)
				}
			}
			for _, s := range got {
				if s.Kind == segWait && s.Wait == nil {
					t.Errorf("a wait without its step")
				}
			}
		})
	}
}
