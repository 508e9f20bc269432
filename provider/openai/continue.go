package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// Continue re-sends req with the output delivered so far as the final
// assistant message, in the server's form, and emits only the text that
// follows it (see provider.Continuer). A 400 or 422 to the first
// continuation of this adapter means the server does not take the form: the
// error wraps provider.ErrContinueRejected and Continue is no longer
// declared. After one was accepted, such a status is an ordinary error.
func (p *Provider) Continue(ctx context.Context, req provider.Request, have string, emit provider.Emit) error {
	prefix, tail := provider.SplitWhole(have)
	creq := chatRequest(req)
	obs := &observation{}
	if prefix != "" {
		// go-openai omits an empty content, so an empty prefix would be a
		// message without content: that case is a plain request instead.
		creq.Messages = append(creq.Messages, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: prefix})
		obs.patch = formPatch(p.form)
	}
	c := &continuation{prefix: prefix, tail: tail, out: emit}
	err := p.stream(context.WithValue(ctx, observationKey{}, obs), obs, creq, c.emit)
	if obs.status.Load() == http.StatusOK && prefix != "" {
		p.accepted.Store(true)
	}
	if err == nil || prefix == "" {
		return err
	}
	ce := diagnostics.Classify(err)
	if (ce.Status == http.StatusBadRequest || ce.Status == http.StatusUnprocessableEntity) && !p.accepted.Load() {
		p.rejected.Store(true)
		return &diagnostics.Error{Class: ce.Class, Status: ce.Status, RetryAfter: ce.RetryAfter,
			Err: fmt.Errorf("%w (continuation: %s): %w", provider.ErrContinueRejected, p.form, err)}
	}
	return err
}

// formPatch adds what go-openai cannot express to a request body whose last
// message is the partial answer.
func formPatch(form provider.Continuation) func(map[string]json.RawMessage) error {
	switch form {
	case provider.ContinuePrefix: // DeepSeek (beta), Mistral: the message says it is a prefix
		return func(body map[string]json.RawMessage) error {
			var msgs []map[string]json.RawMessage
			if err := json.Unmarshal(body["messages"], &msgs); err != nil || len(msgs) == 0 {
				return fmt.Errorf("no messages to mark as a prefix: %v", err)
			}
			msgs[len(msgs)-1]["prefix"] = json.RawMessage("true")
			b, err := json.Marshal(msgs)
			body["messages"] = b
			return err
		}
	case provider.ContinueFinalMessage: // vLLM: both flags, or it answers 400
		return func(body map[string]json.RawMessage) error {
			body["continue_final_message"] = json.RawMessage("true")
			body["add_generation_prompt"] = json.RawMessage("false")
			return nil
		}
	}
	return nil // assistant_last: the message as it is
}

// continuation filters the continued stream's deltas so that only new text
// reaches the executor: a prefix the server repeats is stripped, then the
// bytes of a character that the drop cut short (tail, already delivered)
// are matched against the continuation and skipped. Text is held back only
// while it is still ambiguous; what is held when the stream drops was never
// delivered, and the next continuation asks for it again.
type continuation struct {
	prefix, tail string
	out          provider.Emit
	stage        int // 0 looking for a repeated prefix, 1 matching tail, 2 passing through
	held         string
}

func (c *continuation) emit(ev provider.Event) error {
	switch ev.Kind {
	case provider.KindDelta:
		return c.delta(ev, false)
	case provider.KindDone:
		if err := c.delta(provider.Event{Kind: provider.KindDelta, Seq: -1, Time: ev.Time}, true); err != nil {
			return err
		}
	}
	return c.out(ev)
}

// delta takes the next piece of content; end is true at terminal evidence,
// when nothing more can resolve an ambiguity.
func (c *continuation) delta(ev provider.Event, end bool) error {
	if c.stage == 2 {
		if ev.Text == "" {
			return nil
		}
		return c.out(ev)
	}
	c.held += ev.Text
	if c.stage == 0 {
		if !end && c.prefix != "" && len(c.held) < len(c.prefix) && strings.HasPrefix(c.prefix, c.held) {
			return nil // could still be the prefix repeated
		}
		repeated := c.prefix != "" && strings.HasPrefix(c.held, c.prefix)
		if repeated {
			c.held = c.held[len(c.prefix):]
		}
		if c.prefix != "" {
			msg := "the server returned only the continuation"
			if repeated {
				msg = fmt.Sprintf("the server repeated the %d-byte prefix before the continuation; the repeat was stripped", len(c.prefix))
			}
			d := diagnostics.New(diagnostics.ContinueAccepted, msg, diagnostics.KeyPrefixRepeated.Attr(repeated), diagnostics.KeyContinuedFrom.Attr(len(c.prefix)+len(c.tail)))
			if err := c.out(provider.Event{Kind: provider.KindDiagnostic, Diag: &d, Seq: -1, Time: time.Now()}); err != nil {
				return err
			}
		}
		c.stage = 1
	}
	if c.tail != "" {
		if !end && len(c.held) < len(c.tail) && strings.HasPrefix(c.tail, c.held) {
			return nil
		}
		if !strings.HasPrefix(c.held, c.tail) {
			return c.realign(ev)
		}
		c.held = c.held[len(c.tail):]
	}
	c.stage = 2
	text := c.held
	c.held = ""
	if text == "" {
		return nil
	}
	ev.Text = text
	return c.out(ev)
}

// realign rewrites the output when the continuation does not begin with the
// delivered bytes of the cut character: those bytes are void, so the output
// is the whole-character prefix followed by the continuation.
func (c *continuation) realign(ev provider.Event) error {
	d := diagnostics.New(diagnostics.ContinueRealigned,
		fmt.Sprintf("the continuation does not begin with the %d byte(s) of the character the drop cut short; the output is rewritten from the %d-byte whole-character prefix", len(c.tail), len(c.prefix)))
	for _, e := range []provider.Event{
		{Kind: provider.KindDiagnostic, Diag: &d, Seq: -1, Time: ev.Time},
		{Kind: provider.KindReset, Seq: -1, Time: ev.Time},
		{Kind: provider.KindDelta, Text: c.prefix + c.held, Seq: -1, Time: ev.Time},
	} {
		if e.Kind == provider.KindDelta && e.Text == "" {
			continue
		}
		if err := c.out(e); err != nil {
			return err
		}
	}
	c.stage, c.held = 2, ""
	return nil
}
