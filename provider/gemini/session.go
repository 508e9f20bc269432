package gemini

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/idle"
	"github.com/noderun/noderun/provider/sse"
)

// session is one Stream or Resume call. It is used by one goroutine.
type session struct {
	p    *Provider
	req  provider.Request
	emit provider.Emit
	log  *slog.Logger

	ref string
	// seq is the cursor: the ordinal of the last event accepted, -1 before any.
	seq int64
	// ord is the ordinal of the last event read on the current connection
	// (-1 before its first, when it streams from the start).
	ord int64
	// lastID is the event_id of the event at ordinal lastIDSeq, the latest
	// one that had an id: where a re-attach resumes after.
	lastID    string
	lastIDSeq int64
	// journaled is the mark a journal held for the cursor (Cursor.Mark):
	// where a process that never saw the interaction re-attaches after.
	journaled *provider.Mark
	markedAt  time.Time // when the last KindMark was emitted
	state     string    // last interaction status the events showed
	// steps are the types of the steps (or legacy contents) started, by
	// index, so that a text delta inside a thought step stays a thought.
	steps       map[int]string
	lastEventAt time.Time
	fromStart   bool
	text        strings.Builder
}

func (p *Provider) newSession(req provider.Request, emit provider.Emit, cur provider.Cursor) *session {
	return &session{p: p, req: req, emit: emit, ref: cur.Ref, seq: cur.Seq, ord: -1, lastIDSeq: -1, journaled: cur.Mark,
		steps: map[int]string{}, log: p.log.With(slog.String("node", req.Node)), lastEventAt: time.Now()}
}

// run reads c to the interaction's end (idle.Run): polling through silence,
// re-attaching when the status moves; a nil c polls first.
func (s *session) run(ctx context.Context, c *conn) error { return idle.Run(ctx, s, c) }

// HasRef: the interaction id is known, so there is something to poll.
func (s *session) HasRef() bool { return s.ref != "" }

// SilentAfterCompletion: the interaction is done but its stream does not answer;
// the executor takes the output from a status check.
func (s *session) SilentAfterCompletion() error {
	return fmt.Errorf("gemini %s: completed, but the re-attach got no answer in %s: %w: %w",
		s.ref, s.req.Policy.PollAfter.D(), diagnostics.ErrDisconnected, diagnostics.ErrIdleTimeout)
}

func (s *session) IdleBeforeRef() error {
	return fmt.Errorf("gemini: no interaction id after %s of silence: %w: %w",
		s.req.Policy.PollAfter.D(), diagnostics.ErrDisconnected, diagnostics.ErrIdleTimeout)
}

// Read consumes one event stream: idle=true when no event arrived within the
// idle window, nil after KindDone, else the error that ended it. A stream
// that merely ends is a disconnect, never completion.
func (s *session) Read(ctx context.Context, c *conn) (idle bool, err error) {
	defer c.close()
	r := sse.NewReader(c.body)
	for {
		ev, err := r.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return false, fmt.Errorf("gemini %s: %w", s.ref, ctx.Err())
			case c.dog.Idle():
				return true, nil
			case errors.Is(err, io.EOF):
				return false, fmt.Errorf("gemini %s: stream ended at event %d without interaction.completed: %w", s.ref, s.seq, diagnostics.ErrDisconnected)
			case errors.Is(err, sse.ErrEventTooLarge):
				return false, fmt.Errorf("%w: %w", err, guard.LineLimit("gemini "+s.ref))
			}
			return false, fmt.Errorf("gemini %s: stream broke at event %d: %w: %w", s.ref, s.seq, diagnostics.ErrDisconnected, err)
		}
		_, done, err := s.handle(ev, r.Received())
		if err != nil || done {
			return false, err
		}
		// Every event kicks, replayed ones too: a re-attach from the start
		// re-reads the generated part before anything new, and that is a
		// live stream, not silence.
		c.dog.KickAt(r.Received())
	}
}

// handle translates one SSE event. accepted is false for an event at or
// below the cursor; done is true after KindDone.
func (s *session) handle(sev sse.Event, at time.Time) (accepted, done bool, err error) {
	ev, err := parseEvent(sev.Type, []byte(sev.Data))
	if err != nil {
		return false, false, &diagnostics.Error{Class: diagnostics.ClassProtocol,
			Err: fmt.Errorf("gemini %s: %w: %q event after event %d: %w: %s", s.ref, ErrProtocol, sev.Type, s.seq, err, guard.Excerpt([]byte(sev.Data), 120))}
	}
	s.ord++
	switch ev.Type {
	case evStepStart, evContentStart:
		s.steps[ev.Index] = ev.StepType // also for a replayed event: later deltas need it
	}
	if s.ref == "" {
		switch {
		case ev.Interaction != nil && ev.Interaction.ID != "":
			s.ref = ev.Interaction.ID
		case ev.InteractionID != "":
			s.ref = ev.InteractionID
		}
		if s.ref != "" {
			s.seq = s.ord
			s.lastEventAt = at
			if err := s.send(provider.KindRef, ""); err != nil {
				return true, false, err
			}
			s.noteID(ev.ID)
			return true, false, s.afterRef(ev)
		}
	}
	s.noteID(ev.ID)
	if s.ord <= s.seq {
		return false, false, nil // replayed: at or below the cursor
	}
	if s.seq >= 0 && s.ord > s.seq+1 {
		// Cannot happen on one connection; a re-attach from an event_id
		// older than the cursor re-reads up to it instead.
		s.log.Warn("event ordinal gap", diagnostics.KeyRef.Attr(s.ref), slog.Int64("ord", s.ord), slog.Int64("cursor", s.seq))
	}
	s.seq = s.ord
	s.lastEventAt = at
	if accepted, done, err = s.apply(ev); err == nil && !done {
		err = s.mark(ev.ID)
	}
	return accepted, done, err
}

// markEvery is how often the adapter hands the journal its resume point (an
// event_id, KindMark): a process resuming from the journal re-reads at most
// this much of the stream, instead of all of it.
const markEvery = time.Second

// mark emits the event just applied as the journal's resume point, at most
// every markEvery: after the event itself, so a journal that holds the mark
// holds the events up to it.
func (s *session) mark(id string) error {
	if id == "" || time.Since(s.markedAt) < markEvery {
		return nil
	}
	s.markedAt = time.Now()
	return s.emit(provider.Event{Kind: provider.KindMark, Seq: -1, Mark: &provider.Mark{Seq: s.ord, Token: id}})
}

// afterRef handles the event that carried the interaction id, after KindRef
// carried its ordinal.
func (s *session) afterRef(ev event) error {
	if ev.Interaction != nil && ev.Interaction.Status != "" {
		s.state = ev.Interaction.Status
	}
	if ev.Status != "" {
		s.state = ev.Status
	}
	if terminalStatus(s.state) {
		return s.ended(s.ref, s.state, s.state)
	}
	return nil
}

// noteID records the event_id of the event just read as the latest resume
// point, here and in the Provider for a later re-attach in this process.
func (s *session) noteID(id string) {
	if id == "" || s.ref == "" {
		return
	}
	s.lastID, s.lastIDSeq = id, s.ord
	s.p.note(s.ref, s.ord, id)
}

// apply acts on an accepted event.
func (s *session) apply(ev event) (accepted, done bool, err error) {
	switch ev.Type {
	case evCreated, evStart:
		if ev.Interaction != nil && ev.Interaction.Status != "" {
			s.state = ev.Interaction.Status
		}
	case evStatusUpdate:
		if ev.Status != "" {
			s.state = ev.Status
		}
		if terminalStatus(s.state) {
			return true, false, s.ended(s.ref, s.state, "status update: "+s.state)
		}
	case evStepDelta, evContentDelta:
		switch {
		case ev.DeltaType == deltaSummary, ev.DeltaType == deltaThought,
			ev.DeltaType == deltaText && s.steps[ev.Index] == stepThought:
			if ev.Text != "" {
				return true, false, s.send(provider.KindReasoning, ev.Text)
			}
		case ev.DeltaType == deltaText:
			if s.fromStart {
				s.text.WriteString(ev.Text)
			}
			return true, false, s.send(provider.KindDelta, ev.Text)
		}
	case evCompleted, evComplete:
		it := ev.Interaction
		status := statusCompleted
		if it != nil && it.Status != "" {
			status = it.Status
		}
		if status != statusCompleted {
			msg := status
			if it != nil {
				msg = it.failureText()
			}
			return true, false, s.ended(s.ref, status, msg)
		}
		return true, true, s.complete(it)
	case evError:
		return true, false, s.errorEvent(ev)
	}
	return true, false, s.send(provider.KindProgress, "")
}

// errorEvent classifies an error event: Google's transient statuses
// (RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED, or their
// HTTP codes) may go away; anything else is deterministic. The interaction
// may still be running, so a transient one is a disconnect: the executor
// checks the status and re-attaches.
func (s *session) errorEvent(ev event) error {
	err := fmt.Errorf("interaction %s: %w at event %d: %s", s.ref, ErrErrorEvent, s.seq, ev.Err)
	switch ev.ErrCode {
	case "RESOURCE_EXHAUSTED", "429":
		return &diagnostics.Error{Class: diagnostics.ClassRateLimited, Err: err}
	case "UNAVAILABLE", "503", "DEADLINE_EXCEEDED", "504":
		return &diagnostics.Error{Class: diagnostics.ClassDisconnect, Err: fmt.Errorf("%w: %w", err, diagnostics.ErrDisconnected)}
	case "INTERNAL", "500":
		return &diagnostics.Error{Class: diagnostics.ClassServer, Err: err}
	}
	return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: err}
}

// complete emits KindDone. interaction.completed carries no outputs by
// design (the deltas did); when it does and this session streamed the whole
// interaction, the final output wins over a differing stream.
func (s *session) complete(it *interaction) error {
	var u *provider.Usage
	if it != nil {
		u = it.Usage.provider()
		if full := it.outputText(); s.fromStart && full != "" && full != s.text.String() {
			s.log.Warn("streamed text differs from the completed interaction; taking the interaction's output",
				diagnostics.KeyRef.Attr(s.ref), slog.Int("streamed_bytes", s.text.Len()), slog.Int("output_bytes", len(full)))
			if err := s.emit(provider.Event{Kind: provider.KindReset, Ref: s.ref, Seq: -1, Time: time.Now()}); err != nil {
				return err
			}
			if err := s.emit(provider.Event{Kind: provider.KindDelta, Ref: s.ref, Seq: -1, Text: full, Time: time.Now()}); err != nil {
				return err
			}
		}
	}
	s.p.forget(s.ref)
	return s.emit(provider.Event{Kind: provider.KindDone, Ref: s.ref, Seq: s.seq, Usage: u, Time: time.Now()})
}

// ended is terminalError for an interaction that is over: this process
// will not re-attach to it, so its mark goes.
func (s *session) ended(ref, status, msg string) error {
	s.p.forget(ref)
	return terminalError(ref, status, msg)
}

func (s *session) send(k provider.Kind, text string) error {
	return s.emit(provider.Event{Kind: k, Ref: s.ref, Seq: s.seq, Text: text, Time: s.lastEventAt})
}

func (s *session) diag(code diagnostics.Code, msg string, attrs ...slog.Attr) error {
	attrs = append([]slog.Attr{diagnostics.KeyRef.Attr(s.ref), diagnostics.KeySeq.Attr(s.seq)}, attrs...)
	d := diagnostics.New(code, msg, attrs...)
	s.log.LogAttrs(context.Background(), slog.LevelDebug, code.String()+": "+msg, attrs...)
	return s.emit(provider.Event{Kind: provider.KindDiagnostic, Ref: s.ref, Seq: -1, Diag: &d, Time: time.Now()})
}

// progressMark is what a status poll can show of an interaction's progress.
type progressMark struct {
	status    string
	outputs   int
	textBytes int
	outTokens int
}

func progressOf(it *interaction) progressMark {
	m := progressMark{status: it.Status, outputs: len(it.Outputs) + len(it.Steps)}
	if it.Usage != nil {
		m.outTokens = it.Usage.TotalOutputTokens + it.Usage.TotalThoughtTokens
	}
	for _, o := range it.Outputs {
		m.textBytes += len(o.Text) + len(o.Summary)
	}
	for _, st := range it.Steps {
		for _, c := range st.Content {
			m.textBytes += len(c.Text)
		}
	}
	return m
}

// Poll waits out silence by reading the interaction's status every poll
// interval, as the Responses adapter does: nil when the stream should be
// re-attached (the status shows progress or completion), a classified error
// for a terminal status, diagnostics.ErrStuck for an interaction that shows
// no status and no progress for StuckAfter. An interaction in progress is
// healthy (KindAlive) however long it is silent.
func (s *session) Poll(ctx context.Context) (completed bool, err error) {
	pol := s.req.Policy
	interval := pol.PollInterval.D()
	if interval <= 0 {
		interval = time.Second
	}
	stuckAfter := pol.StuckAfter.D()
	if err := s.diag(diagnostics.PollingStarted,
		fmt.Sprintf("no event for %s; polling interaction %s every %s", pol.PollAfter.D().Round(time.Millisecond), s.ref, interval),
		diagnostics.KeyState.Attr(s.state), diagnostics.KeyIdle.Attr(pol.PollAfter.D()), diagnostics.KeyInterval.Attr(interval)); err != nil {
		return false, err
	}
	var pendingSince time.Time
	if s.state == "" {
		pendingSince = s.lastEventAt
	}
	var prev *progressMark
	polls := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("gemini %s: polling: %w", s.ref, ctx.Err())
		case <-timer.C:
		}
		it, err := s.pollOnce(ctx)
		if err != nil {
			return false, err
		}
		polls++
		m := progressOf(it)
		checked := func(msg string, attrs ...slog.Attr) error {
			return s.diag(diagnostics.StatusChecked, msg, append([]slog.Attr{diagnostics.KeyState.Attr(it.Status), diagnostics.KeyPolls.Attr(polls)}, attrs...)...)
		}
		reason := ""
		switch {
		case it.Status == statusCompleted:
			reason = "completed"
		case terminalStatus(it.Status):
			if err := checked(fmt.Sprintf("interaction %s is %s", s.ref, it.Status)); err != nil {
				return false, err
			}
			return false, s.ended(s.ref, it.Status, it.failureText())
		case prev != nil && m != *prev:
			reason = "progress"
		case prev == nil && s.state != "" && it.Status != "" && it.Status != s.state:
			reason = "status changed from " + s.state
		}
		if reason != "" {
			err := checked(fmt.Sprintf("interaction %s is %s (%s); re-attaching after event %d", s.ref, it.Status, reason, s.seq),
				diagnostics.KeyReason.Attr(reason))
			return it.Status == statusCompleted, err
		}
		if it.Status == "" {
			if pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			if stuckAfter > 0 && time.Since(pendingSince) >= stuckAfter {
				if err := checked(fmt.Sprintf("interaction %s shows no status and no progress", s.ref)); err != nil {
					return false, err
				}
				return false, &diagnostics.Error{Class: diagnostics.ClassStuck,
					Err: fmt.Errorf("interaction %s: no progress for %s: %w", s.ref, time.Since(pendingSince).Round(time.Millisecond), diagnostics.ErrStuck)}
			}
		} else {
			pendingSince = time.Time{}
			if err := s.emit(provider.Event{Kind: provider.KindAlive, Ref: s.ref, Seq: -1, Time: time.Now()}); err != nil {
				return false, err
			}
		}
		prev = &m
		timer.Reset(interval)
	}
}

// pollOnce is one status request, bounded by the idle window.
func (s *session) pollOnce(ctx context.Context) (*interaction, error) {
	if w := s.req.Policy.PollAfter.D(); w > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w)
		defer cancel()
	}
	return s.p.get(ctx, s.ref)
}
