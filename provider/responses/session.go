package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/idle"
	"github.com/noderun/noderun/provider/sse"
)

// session is one Stream or Resume call: the cursor and what the stream has
// shown so far. It is used by one goroutine.
type session struct {
	p    *Provider
	req  provider.Request
	emit provider.Emit
	log  *slog.Logger

	ref   string
	seq   int64                 // the cursor: last sequence_number accepted, -1 before any
	state openai.ResponseStatus // last status the events showed, "" if none
	// lastEventAt is when the last event accepted arrived (sse.Reader's
	// Received), or when the stream opened.
	lastEventAt time.Time
	// fromStart: this session saw the response from its first event, so text
	// is its whole output so far.
	fromStart bool
	text      strings.Builder
	warnedRef bool
}

func (p *Provider) newSession(req provider.Request, emit provider.Emit, cur provider.Cursor) *session {
	return &session{p: p, req: req, emit: emit, ref: cur.Ref, seq: cur.Seq,
		log: p.log.With(slog.String("node", req.Node)), lastEventAt: time.Now()}
}

// run reads c to the response's end (idle.Run): polling through silence,
// re-attaching when the status moves; a nil c polls first.
func (s *session) run(ctx context.Context, c *conn) error { return idle.Run(ctx, s, c) }

// HasRef: the response id is known, so there is something to poll.
func (s *session) HasRef() bool { return s.ref != "" }

// SilentAfterCompletion: the response is done but its stream does not answer;
// the executor takes the output from a status check.
func (s *session) SilentAfterCompletion() error {
	return fmt.Errorf("responses %s: completed, but the re-attach got no answer in %s: %w: %w",
		s.ref, s.req.Policy.PollAfter.D(), diagnostics.ErrDisconnected, diagnostics.ErrIdleTimeout)
}

// IdleBeforeRef is the error of silence before the response id arrived:
// there is nothing to poll, so it is an idle disconnect.
func (s *session) IdleBeforeRef() error {
	return fmt.Errorf("responses: no response id after %s of silence: %w: %w",
		s.req.Policy.PollAfter.D(), diagnostics.ErrDisconnected, diagnostics.ErrIdleTimeout)
}

// Read consumes one event stream. It returns idle=true when no event arrived
// within the idle window (the stream is then closed; keepalive comments do not
// count as events), nil after KindDone, or the error that ended the stream.
func (s *session) Read(ctx context.Context, c *conn) (idle bool, err error) {
	defer c.close()
	r := sse.NewReader(c.body)
	for {
		ev, err := r.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return false, fmt.Errorf("responses %s: %w", s.ref, ctx.Err())
			case c.dog.Idle():
				s.log.Debug("stream silent past the idle window", diagnostics.KeyRef.Attr(s.ref), diagnostics.KeySeq.Attr(s.seq), slog.Duration("idle", c.dog.Window()))
				return true, nil
			case errors.Is(err, io.EOF):
				return false, fmt.Errorf("responses %s: stream ended at sequence %d without response.completed: %w", s.ref, s.seq, diagnostics.ErrDisconnected)
			case errors.Is(err, sse.ErrEventTooLarge):
				return false, fmt.Errorf("%w: %w", err, guard.LineLimit("responses "+s.ref))
			}
			return false, fmt.Errorf("responses %s: stream broke at sequence %d: %w: %w", s.ref, s.seq, diagnostics.ErrDisconnected, err)
		}
		accepted, done, err := s.handle(ev, r.Received())
		if err != nil || done {
			return false, err
		}
		if accepted {
			c.dog.KickAt(r.Received())
		}
	}
}

// wireEvent is the part of a Responses streaming event the adapter reads.
type wireEvent struct {
	Type           string                         `json:"type"`
	SequenceNumber *int64                         `json:"sequence_number"`
	Delta          string                         `json:"delta"`
	Response       *openai.CreateResponseResponse `json:"response"`
	// "error" events carry code and message at the top level (older
	// servers nest them in "error").
	Code    any `json:"code"`
	Message any `json:"message"`
	Error   any `json:"error"`
}

// handle translates one SSE event. accepted is false for an event at or
// below the cursor (dropped); done is true after KindDone.
func (s *session) handle(ev sse.Event, at time.Time) (accepted, done bool, err error) {
	var w wireEvent
	if err := json.Unmarshal([]byte(ev.Data), &w); err != nil {
		return false, false, &diagnostics.Error{Class: diagnostics.ClassProtocol,
			Err: fmt.Errorf("responses %s: %w: undecodable %q event after sequence %d (%v): %s",
				s.ref, ErrProtocol, ev.Type, s.seq, err, guard.Excerpt([]byte(ev.Data), 120))}
	}
	typ := w.Type
	if typ == "" {
		typ = ev.Type
	}
	seq := s.seq
	if w.SequenceNumber != nil {
		n := *w.SequenceNumber
		if n <= s.seq {
			s.log.Debug("dropped an event at or below the cursor", diagnostics.KeyRef.Attr(s.ref), slog.Int64("seq", n), slog.Int64("cursor", s.seq), slog.String("type", typ))
			return false, false, nil
		}
		if s.seq >= 0 && n > s.seq+1 {
			s.log.Warn("sequence gap in the response stream", diagnostics.KeyRef.Attr(s.ref), slog.Int64("seq", n), slog.Int64("cursor", s.seq), slog.String("type", typ))
		}
		seq = n
	}
	s.seq = seq
	s.lastEventAt = at

	refSent := false
	if s.ref == "" && w.Response != nil && w.Response.ID != "" {
		s.ref = w.Response.ID
		if err := s.send(provider.KindRef, ""); err != nil {
			return true, false, err
		}
		refSent = true
	} else if s.ref == "" && !s.warnedRef {
		s.warnedRef = true
		s.log.Warn("response event before the response id", slog.String("type", typ), slog.Int64("seq", seq))
	}
	if w.Response != nil && w.Response.Status != "" {
		s.state = w.Response.Status
	}

	switch typ {
	case "response.created":
		if refSent {
			return true, false, nil // KindRef carried this event's Seq
		}
	case "response.queued":
		s.state = openai.ResponseStatusQueued
	case "response.in_progress":
		s.state = openai.ResponseStatusInProgress
	case "response.output_text.delta":
		if s.fromStart {
			s.text.WriteString(w.Delta)
		}
		return true, false, s.send(provider.KindDelta, w.Delta)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return true, false, s.send(provider.KindReasoning, w.Delta)
	case "response.completed":
		return true, true, s.complete(w.Response)
	case "response.failed":
		return true, false, terminalError(s.ref, openai.ResponseStatusFailed, eventFailure(w, typ))
	case "response.incomplete":
		return true, false, terminalError(s.ref, openai.ResponseStatusIncomplete, eventFailure(w, typ))
	case "response.cancelled":
		return true, false, terminalError(s.ref, openai.ResponseStatusCancelled, eventFailure(w, typ))
	case "error":
		return true, false, &diagnostics.Error{Class: diagnostics.ClassDeterministic,
			Err: fmt.Errorf("response %s: %w at sequence %d: %s", s.ref, ErrErrorEvent, seq, eventFailure(w, typ))}
	}
	if s.state == openai.ResponseStatusCancelled || s.state == openai.ResponseStatusCancelling {
		return true, false, terminalError(s.ref, s.state, eventFailure(w, typ))
	}
	return true, false, s.send(provider.KindProgress, "")
}

// complete emits KindDone. When this session streamed the whole response it
// checks its text against the response's final output; should they differ
// (events lost to a sequence gap), the final output wins: KindReset, then the
// whole output as one delta.
func (s *session) complete(r *openai.CreateResponseResponse) error {
	var u *provider.Usage
	if r != nil {
		u = usage(r.Usage)
		if full := outputText(r.Output); s.fromStart && full != "" && full != s.text.String() {
			s.log.Warn("streamed text differs from the completed response; taking the response's output",
				diagnostics.KeyRef.Attr(s.ref), slog.Int("streamed_bytes", s.text.Len()), slog.Int("output_bytes", len(full)))
			// Seq -1: not wire events; KindDone below carries the cursor.
			if err := s.emit(provider.Event{Kind: provider.KindReset, Ref: s.ref, Seq: -1, Time: time.Now()}); err != nil {
				return err
			}
			if err := s.emit(provider.Event{Kind: provider.KindDelta, Ref: s.ref, Seq: -1, Text: full, Time: time.Now()}); err != nil {
				return err
			}
		}
	}
	return s.emit(provider.Event{Kind: provider.KindDone, Ref: s.ref, Seq: s.seq, Usage: u, Time: time.Now()})
}

func eventFailure(w wireEvent, typ string) string {
	if w.Response != nil {
		if msg := failureText(*w.Response); msg != "" && msg != string(w.Response.Status) {
			return msg
		}
	}
	var parts []string
	for _, v := range []any{w.Code, w.Message, w.Error} {
		switch v := v.(type) {
		case nil:
		case string:
			if v != "" {
				parts = append(parts, v)
			}
		default:
			if b, err := json.Marshal(v); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 {
		return typ
	}
	return strings.Join(parts, ": ")
}

// send emits what the event just accepted carries, stamped with its arrival
// (lastEventAt): the clock is read once per read of the stream, not per event.
func (s *session) send(k provider.Kind, text string) error {
	return s.emit(provider.Event{Kind: k, Ref: s.ref, Seq: s.seq, Text: text, Time: s.lastEventAt})
}

// diag emits a diagnostic with the ref and cursor as attributes.
func (s *session) diag(code diagnostics.Code, msg string, attrs ...slog.Attr) error {
	attrs = append([]slog.Attr{diagnostics.KeyRef.Attr(s.ref), diagnostics.KeySeq.Attr(s.seq)}, attrs...)
	d := diagnostics.New(code, msg, attrs...)
	s.log.LogAttrs(context.Background(), slog.LevelDebug, code.String()+": "+msg, attrs...)
	// Seq -1: a diagnostic is not a wire event and must not move (or be
	// filtered by) the receiver's cursor; the cursor is in the attributes.
	return s.emit(provider.Event{Kind: provider.KindDiagnostic, Ref: s.ref, Seq: -1, Diag: &d, Time: time.Now()})
}

// mark is what a status poll can show of a response's progress.
type mark struct {
	status    openai.ResponseStatus
	items     int
	textBytes int // output text, refusals, reasoning summaries, tool arguments
	outTokens int
}

func markOf(r openai.CreateResponseResponse) mark {
	m := mark{status: r.Status, items: len(r.Output)}
	if r.Usage != nil {
		m.outTokens = r.Usage.OutputTokens
	}
	str := func(v any) int { s, _ := v.(string); return len(s) }
	for _, it := range r.Output {
		im, _ := it.(map[string]any)
		if im == nil {
			continue
		}
		m.textBytes += str(im["arguments"])
		for _, key := range []string{"content", "summary"} {
			parts, _ := im[key].([]any)
			for _, part := range parts {
				pm, _ := part.(map[string]any)
				if pm != nil {
					m.textBytes += str(pm["text"]) + str(pm["refusal"])
				}
			}
		}
	}
	return m
}

// Poll waits out silence by polling the response status every poll interval.
// It returns nil when the stream should be re-attached: the status shows
// progress (output grew, status changed) or the response completed. A
// response that failed, was cancelled or is incomplete returns its classified
// error; one that stays queued with no progress for StuckAfter returns
// diagnostics.ErrStuck. Silence alone never ends polling. completed reports
// that the status said completed.
func (s *session) Poll(ctx context.Context) (completed bool, err error) {
	pol := s.req.Policy
	interval := pol.PollInterval.D()
	if interval <= 0 {
		interval = time.Second
	}
	stuckAfter := pol.StuckAfter.D()
	if err := s.diag(diagnostics.PollingStarted,
		fmt.Sprintf("no event for %s; polling response %s every %s", pol.PollAfter.D().Round(time.Millisecond), s.ref, interval),
		diagnostics.KeyState.Attr(string(s.state)), diagnostics.KeyIdle.Attr(pol.PollAfter.D()), diagnostics.KeyInterval.Attr(interval)); err != nil {
		return false, err
	}
	// The queued clock runs from the last evidence that the response was
	// queued: the last event, if it left the response queued (or said nothing).
	var queuedSince time.Time
	if s.state == "" || s.state == openai.ResponseStatusQueued {
		queuedSince = s.lastEventAt
	}
	var prev *mark
	polls := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("responses %s: polling: %w", s.ref, ctx.Err())
		case <-timer.C:
		}
		r, err := s.pollOnce(ctx)
		if err != nil {
			return false, err
		}
		polls++
		m := markOf(r)
		checked := func(msg string, attrs ...slog.Attr) error {
			return s.diag(diagnostics.StatusChecked, msg, append([]slog.Attr{diagnostics.KeyState.Attr(string(r.Status)), diagnostics.KeyPolls.Attr(polls)}, attrs...)...)
		}
		reason := ""
		switch {
		case r.Status == openai.ResponseStatusCompleted:
			reason = "completed"
		case r.Status == openai.ResponseStatusFailed, r.Status == openai.ResponseStatusIncomplete,
			r.Status == openai.ResponseStatusCancelled, r.Status == openai.ResponseStatusCancelling:
			if err := checked(fmt.Sprintf("response %s is %s", s.ref, r.Status)); err != nil {
				return false, err
			}
			return false, terminalError(s.ref, r.Status, failureText(r))
		case prev != nil && m != *prev:
			reason = "progress"
		case prev == nil && s.state != "" && r.Status != "" && r.Status != s.state:
			reason = "status changed from " + string(s.state)
		case prev == nil && s.fromStart && len(outputText(r.Output)) > s.text.Len():
			reason = "output grew"
		}
		if reason != "" {
			err := checked(fmt.Sprintf("response %s is %s (%s); re-attaching from sequence %d", s.ref, r.Status, reason, s.seq),
				diagnostics.KeyReason.Attr(reason))
			return r.Status == openai.ResponseStatusCompleted, err
		}
		if r.Status == openai.ResponseStatusQueued {
			if queuedSince.IsZero() {
				queuedSince = time.Now()
			}
			if stuckAfter > 0 && time.Since(queuedSince) >= stuckAfter {
				if err := checked(fmt.Sprintf("response %s still queued with no progress", s.ref), since(queuedSince)); err != nil {
					return false, err
				}
				return false, &diagnostics.Error{Class: diagnostics.ClassStuck,
					Err: fmt.Errorf("response %s queued for %s with no progress: %w", s.ref, time.Since(queuedSince).Round(time.Millisecond), diagnostics.ErrStuck)}
			}
		} else {
			queuedSince = time.Time{}
			// In progress: the provider is up and working on it, which is
			// healthy progress for the executor (its recovery deadline and
			// backoff start over), though no event has arrived.
			if err := s.emit(provider.Event{Kind: provider.KindAlive, Ref: s.ref, Seq: -1, Time: time.Now()}); err != nil {
				return false, err
			}
		}
		prev = &m
		timer.Reset(interval)
	}
}

// pollOnce is one status request, bounded by the idle window: a poll that
// gets no answer is as silent as the stream it replaces (the error is then a
// deadline, classified as a disconnect).
func (s *session) pollOnce(ctx context.Context) (openai.CreateResponseResponse, error) {
	if w := s.req.Policy.PollAfter.D(); w > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w)
		defer cancel()
	}
	return s.p.get(ctx, s.ref)
}
