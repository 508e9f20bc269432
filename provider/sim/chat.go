package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/noderun/noderun/provider"
)

// chatChunk is a chat.completion.chunk frame.
type chatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *chatUsage    `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// chatUsage is the usage object with the details objects the real API
// always sends (the official SDKs read them without a nil check).
type chatUsage struct {
	PromptTokens      int                `json:"prompt_tokens"`
	CompletionTokens  int                `json:"completion_tokens"`
	TotalTokens       int                `json:"total_tokens"`
	PromptDetails     *promptDetails     `json:"prompt_tokens_details"`
	CompletionDetails *completionDetails `json:"completion_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
	AudioTokens  int `json:"audio_tokens"`
}

type completionDetails struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AudioTokens              int `json:"audio_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

const fingerprint = "fp_noderun_sim"

// chatCall is one chat request being answered.
type chatCall struct {
	id      string
	created int64
	model   string
	tokens  []string
	echo    string // a repeated prefix sent before the tokens (Config.ContinuationEcho)
	p       params
	usage   chatUsage
	count   tokenCounter
	// prefix and suffix of a content chunk's frame around the JSON string
	prefix, suffix []byte
}

func (c *chatCall) finishReason() string {
	if c.p.cut {
		return "length"
	}
	return "stop"
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !readJSON(w, r, &req) {
		s.count(EndpointChat, r, nil)
		return
	}
	at := s.count(EndpointChat, r, req.Metadata)
	p, err := s.params(req.maxTokens(), req.Metadata)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "metadata")
		return
	}
	f := s.faults.match(at)
	s.log.Debug("sim request", "endpoint", EndpointChat, "n", at.n, "node", at.node, "stream", req.Stream, "tokens", p.tokens)
	if s.earlyFault(w, r, f, EndpointChat) {
		return
	}
	cont, status, msg, param := s.continuation(&req)
	if status != 0 {
		writeError(w, status, msg, param)
		return
	}
	input := req.input()
	c := &chatCall{
		id: newID("chatcmpl-"), created: unixNow(), model: req.Model, p: p,
		tokens: Text(req.Model, input, s.cfg.Seed, p.tokens), count: s.stats.tokensFor(at.node, at.attempt),
	}
	prompt := provider.EstimateTokens(input)
	if cont != nil {
		c.tokens = s.rest(req.Model, input, c.tokens, cont.prefix)
		prompt += provider.EstimateTokens(cont.prefix) // the partial answer is input again
		if s.cfg.ContinuationEcho {
			c.echo = cont.prefix
		}
	}
	c.usage = chatUsage{PromptTokens: prompt, CompletionTokens: len(c.tokens),
		PromptDetails: &promptDetails{}, CompletionDetails: &completionDetails{}}
	c.usage.TotalTokens = c.usage.PromptTokens + c.usage.CompletionTokens
	if !s.admit(w, r, EndpointChat, at.node, formOpenAI, c.usage.TotalTokens) {
		return
	}
	if cont != nil {
		s.stats.continued.Add(1)
	}
	if !req.Stream {
		if err := s.pace(r.Context(), p, len(c.tokens), c.count); err != nil {
			return
		}
		s.answer(w, r, EndpointChat, f, c.completion())
		return
	}
	sw, err := s.startSSE(w, r, EndpointChat, f, p.keepalive, nil)
	if err != nil {
		return
	}
	_ = s.streamChat(sw, c, req.includeUsage())
}

// pace produces n tokens at the request's pace, counting them, for an
// answer that is not streamed.
func (s *Server) pace(ctx context.Context, p params, n int, count tokenCounter) error {
	for i := range n {
		if err := sleep(ctx, p.wait(i, false)); err != nil {
			return err
		}
		count.add()
	}
	return nil
}

// streamChat writes the chunks: the role, one chunk per token, the
// finish_reason, the usage chunk when asked, then [DONE]. It stops at the
// first write error or fault: a non-background stream stops generating
// when its client goes.
func (s *Server) streamChat(sw *sseWriter, c *chatCall, includeUsage bool) error {
	empty := ""
	if err := sw.send(c.frame(chunkDelta{Role: "assistant", Content: &empty}, nil)); err != nil {
		return err
	}
	if c.echo != "" { // repeated, not generated
		if err := sw.send(c.contentFrame(c.echo)); err != nil {
			return err
		}
	}
	for i, tok := range c.tokens {
		if d := c.p.wait(i, false); d > 0 {
			if err := sw.idle(nil, d); err != nil {
				return err
			}
		}
		// A token whose frame a cut fault halves is never delivered: not
		// counted, since a continuation generates it (once) again.
		if !sw.cutNext {
			c.count.add()
		}
		if err := sw.send(c.contentFrame(tok)); err != nil {
			return err
		}
	}
	fr := c.finishReason()
	if err := sw.send(c.frame(chunkDelta{}, &fr)); err != nil {
		return err
	}
	if includeUsage {
		u := c.usage
		if err := sw.send(c.marshal(chatChunk{Choices: []chunkChoice{}, Usage: &u})); err != nil {
			return err
		}
	}
	return sw.send([]byte("data: [DONE]\n\n"))
}

// contentFrame is frame(chunkDelta{Content: &tok}, nil) without the
// reflection: the hot path of every chat stream.
func (c *chatCall) contentFrame(tok string) []byte {
	if c.prefix == nil {
		head := c.marshal(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{Content: new(string)}}}})
		i := bytes.Index(head, []byte(`"content":""`))
		c.prefix = head[:i+len(`"content":`)]
		c.suffix = head[i+len(`"content":""`):]
	}
	q, _ := json.Marshal(tok)
	out := make([]byte, 0, len(c.prefix)+len(q)+len(c.suffix))
	return append(append(append(out, c.prefix...), q...), c.suffix...)
}

func (c *chatCall) frame(d chunkDelta, finish *string) []byte {
	return c.marshal(chatChunk{Choices: []chunkChoice{{Delta: d, FinishReason: finish}}})
}

func (c *chatCall) marshal(ch chatChunk) []byte {
	ch.ID, ch.Object, ch.Created, ch.Model, ch.SystemFingerprint = c.id, "chat.completion.chunk", c.created, c.model, fingerprint
	b, _ := json.Marshal(ch)
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// completion is the non-streaming chat.completion object.
func (c *chatCall) completion() map[string]any {
	return map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"system_fingerprint": fingerprint,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": c.echo + strings.Join(c.tokens, ""), "refusal": nil},
			"logprobs":      nil,
			"finish_reason": c.finishReason(),
		}},
		"usage": c.usage,
	}
}
