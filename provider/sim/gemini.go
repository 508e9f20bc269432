// The Gemini API (POST /v1beta/models/MODEL:streamGenerateContent?alt=sse
// and :generateContent), as Gemini CLI speaks it.

package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/noderun/noderun/provider"
)

// geminiRequest is the part of a generateContent request the simulator
// reads. Gemini CLI also sends systemInstruction, tools and the rest of
// generationConfig; all are ignored.
type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text    string `json:"text"`
			Thought bool   `json:"thought"`
		} `json:"parts"`
	} `json:"contents"`
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// GeminiInput derives the input of a generateContent request body: the
// text parts of the last content with role "user", without the context part
// Gemini CLI injects (a part that starts with <session_context>), joined with
// "\n" ("" when there is none).
func GeminiInput(body []byte) (string, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", fmt.Errorf("gemini request: %w", err)
	}
	return req.input(), nil
}

func (r *geminiRequest) input() string {
	for i := len(r.Contents) - 1; i >= 0; i-- {
		c := r.Contents[i]
		if c.Role != "user" {
			continue
		}
		var texts []string
		for _, p := range c.Parts {
			if p.Text != "" && !p.Thought && !strings.HasPrefix(strings.TrimSpace(p.Text), "<session_context>") {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// geminiStatus is the status name Google APIs send with an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func writeGeminiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": status, "message": msg, "status": geminiStatus(status)}})
}

// handleGemini serves POST /v1beta/models/{call}, where call is
// MODEL:streamGenerateContent or MODEL:generateContent.
func (s *Server) handleGemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	var ep string
	switch method {
	case "streamGenerateContent":
		ep = EndpointGeminiStream
	case "generateContent":
		ep = EndpointGeminiGenerate
	default:
		writeGeminiError(w, http.StatusNotFound, "sim: no method "+strconv.Quote(method)+" (want streamGenerateContent or generateContent)")
		return
	}
	var req geminiRequest
	if !readJSON(w, r, &req) {
		s.count(ep, r, nil)
		return
	}
	at := s.count(ep, r, nil)
	count := s.stats.tokensFor(at.node, at.attempt)
	p, err := s.params(0, nil)
	if err != nil {
		writeGeminiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if m := req.GenerationConfig.MaxOutputTokens; m > 0 && m < p.tokens {
		p.tokens, p.cut = m, true
	}
	f := s.faults.match(at)
	s.log.Debug("sim request", "endpoint", ep, "n", at.n, "node", at.node, "tokens", p.tokens)
	if f != nil && f.Kind == FaultStatus {
		s.faultActed(f, siteOf(r, ep))
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		writeGeminiError(w, f.Status, "sim: injected HTTP "+strconv.Itoa(f.Status)+" ("+http.StatusText(f.Status)+")")
		return
	}
	if s.earlyFault(w, r, f, ep) { // an outage
		return
	}
	input := req.input()
	tokens := Text(model, input, s.cfg.Seed, p.tokens)
	id := newID("")[:24]
	finish := "STOP"
	if p.cut {
		finish = "MAX_TOKENS"
	}
	in := provider.EstimateTokens(input)
	if !s.admit(w, r, ep, at.node, formGoogle, in+len(tokens)) {
		return
	}
	usage := func(out int) map[string]any {
		return map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out}
	}
	chunk := func(text, finish string, out int) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage(out), "modelVersion": model, "responseId": id}
	}
	if ep == EndpointGeminiGenerate {
		if err := s.pace(r.Context(), p, len(tokens), count); err != nil {
			return
		}
		s.answer(w, r, ep, f, chunk(strings.Join(tokens, ""), finish, len(tokens)))
		return
	}
	sw, err := s.startSSE(w, r, ep, f, p.keepalive, nil)
	if err != nil {
		return
	}
	// One data frame per token; the last token's frame carries finishReason.
	if len(tokens) == 0 {
		tokens = []string{""}
	}
	for i, tok := range tokens {
		if d := p.wait(i, false); d > 0 {
			if sw.idle(nil, d) != nil {
				return
			}
		}
		if tok != "" {
			count.add()
		}
		fin := ""
		if i == len(tokens)-1 {
			fin = finish
		}
		b, _ := json.Marshal(chunk(tok, fin, i+1))
		frame := append(append([]byte("data: "), b...), "\n\n"...)
		if sw.send(frame) != nil {
			return
		}
	}
	_ = sw.flush()
}
