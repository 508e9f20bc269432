package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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
	c := provider.NewContinueFilter(prefix, tail, emit)
	err := p.stream(context.WithValue(ctx, observationKey{}, obs), obs, creq, c.Emit)
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
