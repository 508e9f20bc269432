// The Anthropic Messages API (POST /v1/messages), as Claude Code speaks it:
// streaming SSE with `event:` lines, or one JSON message when stream is false.

package sim

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/noderun/noderun/provider"
)

// messagesRequest is the part of a Messages API request the simulator
// reads. Claude Code also sends system, tools, metadata, thinking,
// context_management and output_config; all are ignored. It puts an entry
// with role "system" inside messages and sends user content as several
// text blocks, the first a <system-reminder>: both are accepted.
type messagesRequest struct {
	Model     string    `json:"model"`
	Messages  []message `json:"messages"`
	MaxTokens int       `json:"max_tokens"`
	Stream    bool      `json:"stream"`
	// System is a string or text blocks; a block with cache_control is
	// counted as written to the prompt cache, and read from it when the
	// same text comes again (cache.go).
	System   content `json:"system"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
}

// MessagesInput derives the input of a Messages API request body: the text
// blocks of the last message with role "user", without the context blocks a
// harness injects (a block that starts with <system-reminder>), joined with
// "\n" ("" when there is none). Like Codex's context, those blocks carry
// run-specific text (dates, paths), so only the user's own words are
// something a test can know in advance.
func MessagesInput(body []byte) (string, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", fmt.Errorf("messages request: %w", err)
	}
	return req.input(), nil
}

func (r *messagesRequest) input() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			return userText(m.Content, "<system-reminder>")
		}
	}
	return ""
}

// userText is the text of a content (a string, or blocks of which only
// "text" ones count), leaving out text blocks that start with injected.
func userText(c content, injected string) string {
	raw := []byte(c)
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), injected) {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// anthropicErrorType is the error type Anthropic sends with a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// writeAnthropicError answers {"type":"error","error":{"type","message"},
// "request_id"}, the id also in the request-id header, as the API does
// (https://platform.claude.com/docs/en/api/errors).
func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	id := "req_sim" + rand.Text()
	w.Header().Set("request-id", id)
	writeJSON(w, status, map[string]any{"type": "error",
		"error": map[string]any{"type": anthropicErrorType(status), "message": msg}, "request_id": id})
}

// anthropicStatusFault answers a status fault in Anthropic's error shape,
// reporting whether it did.
func (s *Server) anthropicStatusFault(w http.ResponseWriter, r *http.Request, f *Fault, endpoint string) bool {
	if f == nil || f.Kind != FaultStatus {
		return false
	}
	s.faultActed(f, siteOf(r, endpoint))
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	text := http.StatusText(f.Status)
	if f.Status == 529 {
		text = "Overloaded"
	}
	writeAnthropicError(w, f.Status, "sim: injected HTTP "+strconv.Itoa(f.Status)+" ("+text+")")
	return true
}

// handleMessages serves POST /v1/messages. The text is Text(model, input)
// as for the OpenAI endpoints; max_tokens (which Claude Code always sends,
// and large) only cuts it, with stop_reason "max_tokens".
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	const ep = EndpointMessages
	var req messagesRequest
	if !readJSON(w, r, &req) {
		s.count(ep, r, nil)
		return
	}
	at := s.count(ep, r, nil)
	count := s.stats.tokensFor(at.node, at.attempt)
	p, err := s.params(0, nil)
	if err != nil {
		writeAnthropicError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.MaxTokens > 0 && req.MaxTokens < p.tokens {
		p.tokens, p.cut = req.MaxTokens, true
	}
	f := s.faults.match(at)
	s.log.Debug("sim request", "endpoint", ep, "n", at.n, "node", at.node, "stream", req.Stream, "tokens", p.tokens)
	if s.anthropicStatusFault(w, r, f, ep) || s.earlyFault(w, r, f, ep) { // status in Anthropic's shape; outage
		return
	}
	input := req.input()
	tokens := Text(req.Model, input, s.cfg.Seed, p.tokens)
	id := newID("msg_")
	in := provider.EstimateTokens(input)
	prefill, status, msg := req.prefill()
	if status != 0 {
		writeAnthropicError(w, status, msg)
		return
	}
	if prefill != "" {
		tokens = s.rest(req.Model, input, tokens, prefill)
		in += provider.EstimateTokens(prefill) // the partial answer is input again
	}
	var thinking []string
	if req.Thinking != nil && req.Thinking.Type == "enabled" {
		thinking = Text(req.Model, "thinking:"+input, s.cfg.Seed, ThinkingTokens)
	}
	// a 429 leaves no trace: no continuation counted, no prompt cached
	if !s.admit(w, r, ep, at.node, formAnthropic, in+len(thinking)+len(tokens)) {
		return
	}
	if prefill != "" {
		s.stats.continued.Add(1)
	}
	cacheWrite, cacheRead := s.promptCache(req.System)
	usage := map[string]any{"input_tokens": in, "output_tokens": 1,
		"cache_creation_input_tokens": cacheWrite, "cache_read_input_tokens": cacheRead}
	stop := "end_turn"
	if p.cut {
		stop = "max_tokens"
	}
	if !req.Stream {
		if err := s.pace(r.Context(), p, len(tokens), count); err != nil {
			return
		}
		var blocks []any
		if thinking != nil {
			s.stats.reasoning.Add(int64(len(thinking)))
			blocks = append(blocks, map[string]any{"type": "thinking", "thinking": strings.Join(thinking, ""), "signature": signatureOf(id)})
		}
		usage["output_tokens"] = len(thinking) + len(tokens)
		s.answer(w, r, ep, f, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content":     append(blocks, map[string]any{"type": "text", "text": strings.Join(tokens, "")}),
			"stop_reason": stop, "stop_sequence": nil,
			"usage": usage,
		})
		return
	}
	var errEvent *Fault // a mid-stream error event (FaultErrorEvent)
	if f != nil && f.Kind == FaultErrorEvent {
		errEvent = f
	}
	sw, err := s.startSSE(w, r, ep, f, p.keepalive, nil)
	if err != nil {
		return
	}
	pinged := false
	send := func(typ string, v map[string]any) error {
		if errEvent != nil && sw.events == errEvent.AfterEvents {
			s.faultActed(errEvent, sw.site())
			errEvent = nil
			b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(f.Status),
				"message": "sim: injected error event (" + anthropicErrorType(f.Status) + ")"}})
			_ = sw.send(append(append([]byte("event: error\ndata: "), b...), "\n\n"...))
			_ = sw.flush()
			return errFaulted // the server ends the stream after an error event
		}
		v["type"] = typ
		b, _ := json.Marshal(v)
		frame := make([]byte, 0, len(b)+len(typ)+16)
		frame = append(append(append(frame, "event: "...), typ...), "\ndata: "...)
		if err := sw.send(append(append(frame, b...), "\n\n"...)); err != nil {
			return err
		}
		if typ == "content_block_start" && !pinged { // where the documented stream has its ping
			pinged = true
			return sw.write(pingFrame)
		}
		return nil
	}
	if send("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}}) != nil {
		return
	}
	block := 0
	if thinking != nil {
		if send("content_block_start", map[string]any{"index": block,
			"content_block": map[string]any{"type": "thinking", "thinking": ""}}) != nil {
			return
		}
		for i, tok := range thinking {
			if d := p.wait(i, false); d > 0 {
				if sw.idle(nil, d) != nil {
					return
				}
			}
			s.stats.reasoning.Add(1)
			if send("content_block_delta", map[string]any{"index": block,
				"delta": map[string]any{"type": "thinking_delta", "thinking": tok}}) != nil {
				return
			}
		}
		if send("content_block_delta", map[string]any{"index": block,
			"delta": map[string]any{"type": "signature_delta", "signature": signatureOf(id)}}) != nil {
			return
		}
		if send("content_block_stop", map[string]any{"index": block}) != nil {
			return
		}
		block++
	}
	if send("content_block_start", map[string]any{"index": block,
		"content_block": map[string]any{"type": "text", "text": ""}}) != nil {
		return
	}
	for i, tok := range tokens {
		if d := p.wait(i, false); d > 0 {
			if sw.idle(nil, d) != nil {
				return
			}
		}
		// A token whose frame a cut fault halves, or that an error event
		// replaces, is never delivered: not counted, since a continuation
		// generates it (once) again.
		if !sw.cutNext && (errEvent == nil || sw.events != errEvent.AfterEvents) {
			count.add()
		}
		if send("content_block_delta", map[string]any{"index": block,
			"delta": map[string]any{"type": "text_delta", "text": tok}}) != nil {
			return
		}
	}
	if send("content_block_stop", map[string]any{"index": block}) != nil {
		return
	}
	if send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": len(thinking) + len(tokens)}}) != nil {
		return
	}
	if send("message_stop", map[string]any{}) != nil {
		return
	}
	_ = sw.flush()
}

// ThinkingTokens is the length of the thinking block the simulator streams
// before the answer when a Messages request enables extended thinking.
const ThinkingTokens = 12

// PrefillRejected reports whether the simulator answers a prefilled
// assistant turn for model with 400, as Claude 4.6 models do
// ("Prefilling assistant messages is not supported for this model",
// https://platform.claude.com/docs/en/about-claude/models/migration-guide):
// model names with "-4-6" (claude-opus-4-6, claude-sonnet-4-6) or
// "noprefill" in them. Every other model accepts a prefill.
func PrefillRejected(model string) bool {
	return strings.Contains(model, "-4-6") || strings.Contains(model, "noprefill")
}

// prefill is the partial answer a request prefills (its last message is
// the assistant's), or an HTTP status and message for the 400 the real API
// gives: a model that takes no prefill, a prefill with extended thinking
// on, a prefill ending in whitespace.
func (r *messagesRequest) prefill() (string, int, string) {
	if len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Role != "assistant" {
		return "", 0, ""
	}
	text, _ := r.Messages[len(r.Messages)-1].Content.text()
	switch {
	case PrefillRejected(r.Model):
		return "", http.StatusBadRequest, "Prefilling assistant messages is not supported for this model."
	case r.Thinking != nil && r.Thinking.Type == "enabled":
		return "", http.StatusBadRequest, "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."
	case strings.TrimRight(text, " \t\r\n") != text:
		return "", http.StatusBadRequest, "messages: final assistant content cannot end with trailing whitespace"
	}
	return text, 0, ""
}

// promptCache counts a system prompt marked with cache_control: written to
// the cache the first time the server sees it, read from it after. It
// returns the tokens written and read (0, 0 for a prompt not marked).
func (s *Server) promptCache(system content) (write, read int) {
	var blocks []struct {
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if json.Unmarshal([]byte(system), &blocks) != nil {
		return 0, 0
	}
	var text strings.Builder
	marked := false
	for _, b := range blocks {
		text.WriteString(b.Text)
		marked = marked || len(b.CacheControl) > 0 && string(b.CacheControl) != "null"
	}
	if !marked {
		return 0, 0
	}
	n := provider.EstimateTokens(text.String())
	if _, seen := s.prompts.LoadOrStore(text.String(), true); seen {
		return 0, n
	}
	return n, 0
}

// signatureOf is a thinking block's signature: opaque, as the real one is.
func signatureOf(id string) string { return "sim-signature-" + id }
