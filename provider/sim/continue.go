package sim

import (
	"net/http"
	"slices"
	"strings"

	"github.com/noderun/noderun/provider"
)

// The continuation forms the simulator accepts (Config.Continuation; the
// Form* constants), as the servers behind them do (docs/providers.md):
//
//   - prefix: the last message is an assistant message with "prefix": true
//     (DeepSeek's beta chat prefix completion, Mistral). "prefix" on any other
//     message is a 400.
//   - continue_final_message: the request has "continue_final_message": true,
//     which needs "add_generation_prompt": false (vLLM's default is true: both
//     true is a 400) and a last message from the assistant.
//   - assistant_last: a last assistant message is continued as it is (Ollama,
//     llama.cpp's server).
//
// A server that does not know a form answers as a real one would: the
// unknown field "prefix" or "continue_final_message" is a 400 (as OpenAI
// rejects unknown arguments); a last assistant message is ignored and the
// answer starts from scratch (as OpenAI does).

// continued is a request that continues a partial answer.
type continued struct {
	form   string
	prefix string // the partial answer, as sent
}

// continuation validates the continuation fields of a chat request. It
// returns the continuation (nil for an ordinary request), or an HTTP status,
// message and param for a 400.
func (s *Server) continuation(req *chatRequest) (*continued, int, string, string) {
	accepts := func(form string) bool {
		return s.cfg.Continuation == nil || slices.Contains(s.cfg.Continuation, form)
	}
	msgs := req.Messages
	for i, m := range msgs {
		if m.Prefix == nil {
			continue
		}
		if !accepts(FormPrefix) {
			return nil, http.StatusBadRequest, "Additional properties are not allowed ('prefix' was unexpected) - 'messages." + itoa(i) + "'", "messages"
		}
		if *m.Prefix && (i != len(msgs)-1 || m.Role != "assistant") {
			return nil, http.StatusBadRequest, "Invalid request: prefix is only allowed on the last message, which must have role assistant (messages." + itoa(i) + ")", "messages"
		}
	}
	last := message{}
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1]
	}
	text, _ := last.Content.text()
	if req.ContinueFinalMessage != nil {
		if !accepts(FormContinueFinal) {
			return nil, http.StatusBadRequest, "Unrecognized request argument supplied: continue_final_message", "continue_final_message"
		}
		if *req.ContinueFinalMessage {
			if req.AddGenerationPrompt == nil || *req.AddGenerationPrompt {
				return nil, http.StatusBadRequest, "Cannot set both `continue_final_message` and `add_generation_prompt` to True.", "continue_final_message"
			}
			if last.Role != "assistant" {
				return nil, http.StatusBadRequest, "continue_final_message is set but the final message is not an assistant message", "messages"
			}
			return &continued{form: FormContinueFinal, prefix: text}, 0, "", ""
		}
	}
	if last.Role != "assistant" {
		return nil, 0, "", ""
	}
	if last.Prefix != nil && *last.Prefix {
		return &continued{form: FormPrefix, prefix: text}, 0, "", ""
	}
	if accepts(FormAssistantLast) {
		return &continued{form: FormAssistantLast, prefix: text}, 0, "", ""
	}
	return nil, 0, "", "" // ignored: a fresh answer
}

// rest is what a continued request streams: the tokens of the answer that
// follow the prefix when the prefix is a prefix of the deterministic answer
// (a cut inside a token continues with the rest of that token), else a
// deterministic continuation of its own.
func (s *Server) rest(model, input string, full []string, prefix string) []string {
	if prefix == "" {
		return full
	}
	at := 0
	for i, tok := range full {
		if at == len(prefix) {
			return full[i:]
		}
		if !strings.HasPrefix(prefix[at:], tok) {
			if rest, ok := strings.CutPrefix(tok, prefix[at:]); ok {
				return append([]string{rest}, full[i+1:]...)
			}
			break
		}
		at += len(tok)
	}
	if at == len(prefix) && at > 0 {
		return nil // the prefix is the whole answer
	}
	n := max(len(full)-provider.EstimateTokens(prefix), 1)
	return Text(model, input+"\x00continue\x00"+prefix, s.cfg.Seed, n)
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
