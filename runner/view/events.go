package view

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// EventText is a journaled event on one line, for people: its seq, time of
// day, where it happened (node#attempt), its kind or diagnostic code, and
// its payload whole (PayloadText).
func EventText(e journal.Event) string {
	where := e.NodeID
	if where == "" {
		where = "-"
	} else if e.Attempt > 0 {
		where = fmt.Sprintf("%s#%d", e.NodeID, e.Attempt)
	}
	what := e.Kind
	if e.Code != "" {
		what = e.Code
	}
	return fmt.Sprintf("%6d %s %-16s %-10s %s", e.Seq, e.Time.Format("15:04:05.000"), where, what, PayloadText(e))
}

// PayloadText renders a payload on one line, whole (an event is what an
// operator inspects: nothing is cut): diagnostics as "name: message" and
// their attributes, chunks quoted so whitespace is visible. A server's error
// body is bounded when journaled.
func PayloadText(e journal.Event) string {
	if e.Kind == journal.KindDiagnostic {
		if d, err := diagnostics.Decode(e.Payload); err == nil {
			s := d.Code.Name + ": " + d.Message
			for _, a := range d.Attrs {
				s += " " + a.Key + "=" + quoteValue(a.Value.String())
			}
			return strings.Join(strings.Fields(s), " ")
		}
	}
	if e.Kind == journal.KindDelta || e.Kind == journal.KindReasoning {
		return fmt.Sprintf("%q", string(e.Payload))
	}
	return strings.Join(strings.Fields(string(e.Payload)), " ")
}

// quoteValue quotes an attribute value that has spaces, as logfmt does, so
// where one value ends and the next key starts stays plain.
func quoteValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return strconv.Quote(s)
	}
	return s
}

// AbandonedError: a followed run has not ended and its runner is gone, so
// nothing more will come (resuming the run continues it).
type AbandonedError struct{ RunID string }

func (e *AbandonedError) Error() string {
	return fmt.Sprintf("run %s did not finish and its runner is gone", e.RunID)
}

// Tail passes to emit, in order, the events of run runID that f selects
// after f.AfterSeq. With poll 0 it reads once. Otherwise it follows the
// run, reading again every poll until the run has ended and what it
// journaled last has been read; ctx ending while it waits for more stops it
// without an error, and a run whose runner is gone before it ended is an
// *AbandonedError. An error of emit, or of reading the journal, stops it and
// is returned as it is.
func Tail(ctx context.Context, j *journal.Journal, runID string, f journal.EventFilter, poll time.Duration, emit func(journal.Event) error) error {
	ended := false // the run was seen ended: one more read gets what it journaled last
	for {
		evs, err := j.Events(ctx, runID, f)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := emit(e); err != nil {
				return err
			}
			f.AfterSeq = e.Seq
		}
		if poll <= 0 {
			return nil
		}
		if len(evs) > 0 {
			continue
		}
		if ended {
			return nil
		}
		cur, err := j.Run(ctx, runID)
		if err != nil {
			return err
		}
		if cur.Status != journal.RunRunning {
			// Events read before the status may predate the run's last
			// ones (NR402 is journaled just before it ends).
			ended = true
			continue
		}
		if j.Abandoned(cur) {
			return &AbandonedError{RunID: cur.ID}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}
