package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// decoder turns the events of one Messages stream into provider Events. It
// is the only code that reads the untrusted event stream (fuzz_test.go).
//
// Text deltas are output. Thinking deltas are KindReasoning, journaled
// apart and never output. A thinking block's signature (signature_delta,
// sent just before the block's content_block_stop) and a redacted_thinking
// block's data are journaled as one KindRaw event per block, at the block's
// end: its payload is the block as the API wants it sent back in a later
// assistant turn ({"type":"thinking","signature":...} with the thinking
// text rebuilt from the attempt's reasoning events, or the redacted block
// whole), so a continued conversation stays valid. The decoder holds only
// the signature of the block being read.
type decoder struct {
	blocks   map[int]*block
	usage    provider.Usage
	thinking int    // bytes of thinking text, to estimate reasoning tokens
	stop     string // message_delta's stop_reason
	done     bool   // message_stop after a stop_reason: terminal evidence
}

type block struct {
	typ string
	sig strings.Builder
}

// wire shapes, only the fields read
type (
	wireEvent struct {
		Type         string       `json:"type"`
		Index        int          `json:"index"`
		Message      *wireMessage `json:"message"`
		ContentBlock *wireBlock   `json:"content_block"`
		Delta        *wireDelta   `json:"delta"`
		Usage        *wireUsage   `json:"usage"`
		Error        *wireError   `json:"error"`
	}
	wireMessage struct {
		ID    string     `json:"id"`
		Usage *wireUsage `json:"usage"`
	}
	wireBlock struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
		Data     string `json:"data"`
	}
	wireDelta struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		Thinking   string `json:"thinking"`
		Signature  string `json:"signature"`
		StopReason string `json:"stop_reason"`
	}
	// wireUsage: pointers, because message_delta repeats only some
	// counts and a count left out must not reset one already read.
	wireUsage struct {
		InputTokens              *int `json:"input_tokens"`
		OutputTokens             *int `json:"output_tokens"`
		CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	}
	wireError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
)

// event handles one SSE event's data. It returns a classified error for an
// error event or an answer that is not the protocol.
func (d *decoder) event(data []byte, at time.Time, emit provider.Emit) error {
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return &diagnostics.Error{Class: diagnostics.ClassProtocol,
			Err: fmt.Errorf("messages stream: %w: an event does not decode: %w", diagnostics.ErrProtocol, err)}
	}
	if d.done {
		return nil // nothing follows message_stop; the caller stops reading
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			d.addUsage(ev.Message.Usage)
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return protocolf("content_block_start %d without content_block", ev.Index)
		}
		if d.blocks == nil {
			d.blocks = map[int]*block{}
		}
		if len(d.blocks) >= maxOpenBlocks {
			return limitf("more than %d content blocks open at once", maxOpenBlocks)
		}
		b := &block{typ: ev.ContentBlock.Type}
		d.blocks[ev.Index] = b
		switch b.typ {
		case "text":
			return d.emitText(provider.KindDelta, ev.ContentBlock.Text, at, emit)
		case "thinking":
			return d.emitText(provider.KindReasoning, ev.ContentBlock.Thinking, at, emit)
		case "redacted_thinking":
			// encrypted reasoning: nothing to show, but it must go back as it came
			return emit(provider.Event{Kind: provider.KindRaw, Raw: redacted(ev.Index, ev.ContentBlock.Data), Seq: -1, Time: at})
		}
		// tool_use blocks: noderun offers no tools, so none comes, and a
		// tool's input (input_json_delta) is never answer text: ignored.
		// A partial answer is therefore text alone, which a prefill carries.
	case "content_block_delta":
		if ev.Delta == nil {
			return protocolf("content_block_delta %d without delta", ev.Index)
		}
		switch ev.Delta.Type {
		case "text_delta":
			return d.emitText(provider.KindDelta, ev.Delta.Text, at, emit)
		case "thinking_delta":
			return d.emitText(provider.KindReasoning, ev.Delta.Thinking, at, emit)
		case "signature_delta":
			if b := d.blocks[ev.Index]; b != nil {
				if b.sig.Len()+len(ev.Delta.Signature) > maxSignatureBytes {
					return limitf("a thinking block's signature is longer than %d bytes", maxSignatureBytes)
				}
				b.sig.WriteString(ev.Delta.Signature)
			}
		}
	case "content_block_stop":
		b := d.blocks[ev.Index]
		delete(d.blocks, ev.Index)
		if b != nil && b.typ == "thinking" && b.sig.Len() > 0 {
			return emit(provider.Event{Kind: provider.KindRaw, Raw: signature(ev.Index, b.sig.String()), Seq: -1, Time: at})
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			d.stop = ev.Delta.StopReason
		}
		d.addUsage(ev.Usage)
	case "message_stop":
		if d.stop == "" {
			return protocolf("message_stop without a stop_reason in a message_delta before it")
		}
		d.done = true
		u := d.usage
		// Anthropic counts thinking in output_tokens without a separate
		// figure: the reasoning share is estimated from the thinking text.
		if d.thinking > 0 {
			u.ReasoningTokens = min((d.thinking+3)/4, max(u.OutputTokens, 0)) // provider.EstimateTokens' rule
		}
		return emit(provider.Event{Kind: provider.KindDone, Usage: &u, Seq: -1, Time: at})
	case "error":
		if ev.Error == nil {
			return protocolf("error event without error")
		}
		return streamError(ev.Error)
	case "ping":
		// a keepalive, not progress: it must not feed the idle watchdog
	}
	// Other types are ignored: Anthropic may add event types
	// (https://platform.claude.com/docs/en/build-with-claude/streaming).
	return nil
}

func (d *decoder) emitText(k provider.Kind, text string, at time.Time, emit provider.Emit) error {
	if text == "" {
		return nil
	}
	if k == provider.KindReasoning {
		d.thinking += len(text)
	}
	return emit(provider.Event{Kind: k, Text: text, Seq: -1, Time: at})
}

func (d *decoder) addUsage(u *wireUsage) {
	if u == nil {
		return
	}
	set := func(dst *int, v *int) {
		if v != nil && *v >= 0 {
			*dst = *v
		}
	}
	set(&d.usage.InputTokens, u.InputTokens)
	set(&d.usage.OutputTokens, u.OutputTokens)
	set(&d.usage.CacheWriteTokens, u.CacheCreationInputTokens)
	set(&d.usage.CacheReadTokens, u.CacheReadInputTokens)
}

// signature is the journaled form of a thinking block's signature.
func signature(index int, sig string) []byte {
	b, _ := json.Marshal(map[string]any{"anthropic": "thinking_signature", "index": index, "signature": sig})
	return b
}

// redacted is the journaled form of a redacted_thinking block.
func redacted(index int, data string) []byte {
	b, _ := json.Marshal(map[string]any{"anthropic": "redacted_thinking", "index": index, "data": data})
	return b
}

// Bounds on what the decoder holds for a hostile or broken server: a
// signature is a few hundred bytes, and blocks are opened and closed one
// after another.
const (
	maxSignatureBytes = 1 << 20
	maxOpenBlocks     = 1024
)

func limitf(format string, args ...any) error {
	return &diagnostics.Error{Class: diagnostics.ClassLimit,
		Err: fmt.Errorf("messages stream: %w: %s", diagnostics.ErrLimit, fmt.Sprintf(format, args...))}
}

func protocolf(format string, args ...any) error {
	return &diagnostics.Error{Class: diagnostics.ClassProtocol,
		Err: fmt.Errorf("messages stream: %w: %s", diagnostics.ErrProtocol, fmt.Sprintf(format, args...))}
}

// errorStatus is the HTTP status Anthropic gives each error type
// (https://platform.claude.com/docs/en/api/errors): an error event in a
// stream that already answered 200 is classified as its status would be.
func errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return StatusOverloaded
	}
	return http.StatusInternalServerError // api_error, and types added later
}

// StatusOverloaded is Anthropic's HTTP 529: the API is overloaded for
// everyone; transient.
const StatusOverloaded = 529

// streamError classifies an error event received mid-stream.
func streamError(e *wireError) error {
	status := errorStatus(e.Type)
	return &diagnostics.Error{Class: diagnostics.FromStatus(status), Status: status,
		Err: fmt.Errorf("messages stream: error event %s: %s", e.Type, e.Message)}
}
