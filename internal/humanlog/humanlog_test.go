package humanlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Issue 24: the log a person reads is a sentence per event, keyed by node,
// with its code and cause and none of the journal's attributes; a line fits
// its width, folded at spaces on a terminal, shortened on a pipe with the
// cause kept.
func TestHandler(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	record := func(l slog.Level, msg string, args ...any) slog.Record {
		r := slog.NewRecord(at, l, msg, 0)
		r.Add(args...)
		return r
	}
	cause := `connect_failed: Post "http://127.0.0.1:9/v1/chat/completions": dial tcp 127.0.0.1:9: connect: connection refused`
	cases := []struct {
		name  string
		tty   bool
		width int
		r     slog.Record
		want  string
	}{
		{"a step", false, 160, record(slog.LevelWarn, "retrying 1/3 in 12ms (transport_disconnect)", "code", "NR103", "node", "plan", "attempt", 1,
			"delay", time.Millisecond, "continued_from_deltas", 79, "reconnects_left", 3),
			"01:02:03 plan       retrying 1/3 in 12ms (transport_disconnect)  NR103"},
		{"a later attempt", false, 160, record(slog.LevelInfo, "streaming", "node", "plan", "attempt", 2), "01:02:03 plan#2     streaming"},
		{"the cause on a pipe", false, 80, record(slog.LevelError, "node failed", "code", "NR901", "node", "plan", "error", cause),
			"01:02:03 plan       node failed: connect_failed: …: connection refused  NR901"},
		{"folded on a terminal", true, 60, record(slog.LevelError, "node failed", "code", "NR901", "node", "plan", "error", cause),
			"plan       node failed: connect_failed: Post\n" +
				"           \"http://127.0.0.1:9/v1/chat/completions\":\n" +
				"           dial tcp 127.0.0.1:9: connect: connection\n" +
				"           refused  NR901"},
		{"a simulator line", false, 160, record(slog.LevelInfo, "simulated fault: close on chat after 40 events", "sim", "chat", "kind", "close"),
			"01:02:03 sim chat   simulated fault: close on chat after 40 events"},
		{"a plain warning keeps its attributes", false, 160, record(slog.LevelWarn, "journal busy, retrying batch", "path", "j.db", "try", 2),
			"01:02:03            warn: journal busy, retrying batch (path=j.db, try=2)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			h := &Handler{w: &b, level: slog.LevelDebug, tty: c.tty, width: func() int { return c.width }}
			if err := h.WithAttrs([]slog.Attr{slog.String("run", "r1")}).Handle(context.Background(), c.r); err != nil {
				t.Fatal(err)
			}
			got := strings.TrimSuffix(b.String(), "\n")
			if got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			for _, l := range strings.Split(got, "\n") {
				if n := utf8.RuneCountInString(l); n > c.width {
					t.Errorf("a line of %d columns, wider than %d: %q", n, c.width, l)
				}
			}
		})
	}
}

// Issue 15: one stderr value is at most MaxValue bytes (whole characters),
// saying how long it was; the journal keeps it whole.
func TestLogValuesAreBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxValue) // 2 bytes each
	for _, c := range []struct {
		in   string
		keep bool
	}{{"short", true}, {strings.Repeat("x", MaxValue), true}, {long, false}} {
		got := Bounded(c.in)
		if (got == c.in) != c.keep || len(got) > MaxValue+64 || !utf8.ValidString(got) {
			t.Errorf("Bounded(%d bytes) = %d bytes", len(c.in), len(got))
		}
		if !c.keep && !strings.Contains(got, fmt.Sprintf("[%d bytes;", len(c.in))) {
			t.Errorf("bounded does not say the length: %q", got[len(got)-50:])
		}
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: BoundAttr}))
	log.Warn(long, "error", errors.New(long), "body", long)
	if buf.Len() > 4*MaxValue {
		t.Errorf("one log line of %d bytes", buf.Len())
	}
}
