package provider

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Continuation is how a chat server continues a partial assistant message
// that is sent back to it as the final message of the request (see
// docs/providers.md for the servers behind each form).
type Continuation string

// Continuation forms.
const (
	// ContinueNone: the server cannot continue; a dropped stream is retried from scratch.
	ContinueNone Continuation = "none"
	// ContinuePrefix: the final assistant message carries "prefix": true
	// (DeepSeek's beta chat prefix completion, Mistral).
	ContinuePrefix Continuation = "prefix"
	// ContinueFinalMessage: the request carries "continue_final_message": true
	// and "add_generation_prompt": false (vLLM, SGLang, llama.cpp's server).
	ContinueFinalMessage Continuation = "continue_final_message"
	// ContinueAssistantLast: a final assistant message is continued as it is
	// (Ollama, llama.cpp's server, OpenRouter).
	ContinueAssistantLast Continuation = "assistant_last"
)

// Continuations lists the forms, none first.
func Continuations() []Continuation {
	return []Continuation{ContinueNone, ContinuePrefix, ContinueFinalMessage, ContinueAssistantLast}
}

// ParseContinuation checks a form's name; "" is ContinueNone.
func ParseContinuation(s string) (Continuation, error) {
	if s == "" {
		return ContinueNone, nil
	}
	for _, c := range Continuations() {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown continuation %q (want none, prefix, continue_final_message or assistant_last)", s)
}

// ErrContinueRejected: the server answered a continuation request with a
// client error (HTTP 400 or 422): it does not accept the form. The adapter
// stops declaring Capabilities.Continue for the rest of its life (one run).
var ErrContinueRejected = errors.New("the server rejected the continuation form")

// Continuer is implemented by adapters with Capabilities.Continue. Continue
// re-sends req with have, the output delivered so far, as the final
// assistant message and emits only what comes after have: a prefix the
// server repeats is stripped. The output stays byte-identical: have is cut
// back to whole UTF-8 characters before it is sent (SplitWhole), and the
// incomplete bytes are matched against the start of the continuation.
type Continuer interface {
	Continue(ctx context.Context, req Request, have string, emit Emit) error
}

// SplitWhole splits s before a trailing incomplete UTF-8 character: prefix
// holds whole characters (what may be sent back to a server, which would
// reject or mangle a broken one), tail the 1-3 bytes of a character cut
// short ("" when s ends on a character boundary). Invalid bytes that cannot
// start a longer character stay in prefix: they are not a cut.
func SplitWhole(s string) (prefix, tail string) {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i], s[i:]
			}
			break
		}
	}
	return s, ""
}

// ContinuePrefill: the partial answer is sent as the final assistant turn
// of an Anthropic Messages request (a "prefill"), which the model
// continues. Only kind anthropic takes it, and only some models accept it
// (docs/providers.md); it is not among Continuations(), the chat forms.
const ContinuePrefill Continuation = "prefill"

// RequestContinuer is implemented by a Continuer that can continue some
// requests only (an Anthropic request with extended thinking cannot be
// prefilled). The recovery loop asks it before choosing to continue.
type RequestContinuer interface {
	CanContinue(req Request) bool
}

// CanContinue reports whether p, which declares Capabilities.Continue, can
// continue req: true unless p is a RequestContinuer that says otherwise.
func CanContinue(p Provider, req Request) bool {
	rc, ok := p.(RequestContinuer)
	return !ok || rc.CanContinue(req)
}
