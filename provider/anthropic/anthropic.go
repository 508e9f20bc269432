// Package anthropic is the Anthropic Messages API adapter (kind anthropic):
// POST /v1/messages with "stream": true, read with provider/sse and
// net/http. No SDK: the official Go SDK retries on its own (twice by
// default), and noderun owns retrying; all the adapter needs is one request
// and an event reader.
//
// The Messages API has no server-side resume: a dropped stream is retried
// within the budget, or, with continuation: prefill, continued by sending
// the partial answer as a prefilled assistant turn (continue.go).
// Terminal evidence is message_stop after a message_delta with a
// stop_reason, never the body merely ending.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/conns"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/sse"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent with every request
// (https://platform.claude.com/docs/en/api/versioning).
const Version = "2023-06-01"

// DefaultMaxTokens is max_tokens (required by the API) when a node sets no
// max_output_tokens; thinking budgets are added on top.
const DefaultMaxTokens = 8192

// Config configures the adapter.
type Config struct {
	// BaseURL is the API root (default DefaultBaseURL); a URL ending in /v1
	// is taken as the versioned root (the simulator's BaseURL).
	BaseURL string
	APIKey  string // sent as x-api-key; empty sends none
	// HTTPClient defaults to one with dial and header timeouts but no overall
	// timeout (a stream may last hours), its connects bounded by MaxDials.
	HTTPClient *http.Client
	MaxDials   int
	// Continuation is provider.ContinuePrefill to continue a dropped answer
	// by prefilling it; "" or none: a dropped stream is retried.
	Continuation provider.Continuation
}

// Provider streams Anthropic messages.
type Provider struct {
	url  string
	key  string
	hc   *http.Client
	own  conns.Owned
	form provider.Continuation
	// rejected: the server answered a prefill with 400 (the model does not
	// accept prefills); continuation is off for this adapter's life (one run).
	rejected atomic.Bool
	accepted atomic.Bool // a prefill was accepted: a later 400 is the request's, not the form's
}

// New returns an adapter.
func New(cfg Config) *Provider {
	hc, own := conns.Own(cfg.HTTPClient, func() *http.Client {
		return &http.Client{Transport: conns.Transport(cfg.MaxDials, 10*time.Second, 2*time.Minute)}
	})
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	url := base + "/v1/messages"
	if strings.HasSuffix(base, "/v1") {
		url = base + "/messages"
	}
	return &Provider{url: url, key: cfg.APIKey, hc: guard.Client(hc), own: own, form: cfg.Continuation}
}

// Close closes the idle connections of the client New made.
func (p *Provider) Close() error { return p.own.Close() }

// Capabilities: continuing by prefill when configured and not rejected.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Continue: p.form == provider.ContinuePrefill && !p.rejected.Load()}
}

// CanContinue (provider.RequestContinuer): a request with extended
// thinking cannot be prefilled (the API rejects it), and its partial
// answer follows thinking blocks that a prefill could not carry.
func (p *Provider) CanContinue(req provider.Request) bool { return thinkingBudget(req) == 0 }

// Stream sends the request and emits its events. It returns nil only after
// message_stop; otherwise a classified error.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	_, err := p.stream(ctx, request(req, ""), emit)
	return err
}

// wireRequest is the request body.
type wireRequest struct {
	Model     string        `json:"model"`
	MaxTokens int           `json:"max_tokens"`
	System    []textBlock   `json:"system,omitempty"`
	Messages  []wireMsg     `json:"messages"`
	Stream    bool          `json:"stream"`
	Thinking  *wireThinking `json:"thinking,omitempty"`
}

type textBlock struct {
	Type         string        `json:"type"`
	Text         string        `json:"text"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type wireMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type wireThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// thinkingBudget maps a node's reasoning_effort to an extended thinking
// budget (0: no thinking). The API's minimum budget is 1024 tokens.
func thinkingBudget(req provider.Request) int {
	switch req.ReasoningEffort {
	case "minimal":
		return 1024
	case "low":
		return 2048
	case "medium":
		return 8192
	case "high":
		return 16384
	}
	return 0
}

// request is a node's wire request; prefill, when set, is the final
// assistant turn the answer continues.
func request(req provider.Request, prefill string) wireRequest {
	w := wireRequest{Model: req.Model, Stream: true, MaxTokens: req.MaxOutputTokens}
	if w.MaxTokens <= 0 {
		w.MaxTokens = DefaultMaxTokens
	}
	if b := thinkingBudget(req); b > 0 {
		if req.MaxOutputTokens <= 0 {
			w.MaxTokens += b // the budget counts against max_tokens
		}
		if b = min(b, w.MaxTokens-1); b >= 1024 {
			w.Thinking = &wireThinking{Type: "enabled", BudgetTokens: b}
		}
	}
	if req.System != "" {
		// The system prompt is marked for the prompt cache: graph nodes
		// often share one, and a cached read is billed at a tenth of
		// input. One shorter than the model's minimum is simply not cached.
		w.System = []textBlock{{Type: "text", Text: req.System, CacheControl: &cacheControl{Type: "ephemeral"}}}
	}
	w.Messages = []wireMsg{{Role: "user", Content: req.Prompt}}
	if prefill != "" {
		w.Messages = append(w.Messages, wireMsg{Role: "assistant", Content: prefill})
	}
	return w
}

// stream sends body and emits what comes back until terminal evidence. It
// returns the HTTP status (0 when no answer came).
func (p *Provider) stream(ctx context.Context, body wireRequest, emit provider.Emit) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("messages request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(raw))
	if err != nil {
		return 0, &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("messages request: %w", err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("anthropic-version", Version)
	if p.key != "" {
		hreq.Header.Set("x-api-key", p.key)
	}
	resp, err := provider.Send(p.hc, hreq)
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("messages request: %w", context.Cause(ctx))
		}
		return 0, diagnostics.Classify(fmt.Errorf("messages request: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, statusError(resp, time.Now())
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return resp.StatusCode, guard.NotEventStream("messages stream", resp)
	}
	r := sse.NewReader(resp.Body)
	r.MaxEventBytes = guard.MaxEventBytes
	var d decoder
	for {
		ev, err := r.Next()
		if err != nil {
			return resp.StatusCode, p.readError(ctx, &d, err)
		}
		if err := d.event([]byte(ev.Data), r.Received(), emit); err != nil {
			return resp.StatusCode, err
		}
		if d.done {
			return resp.StatusCode, nil
		}
	}
}

// readError classifies the end of a body before message_stop.
func (p *Provider) readError(ctx context.Context, d *decoder, err error) error {
	switch {
	case ctx.Err() != nil:
		// The executor's idle watchdog and Ctrl-C both cancel ctx; its cause says which.
		return fmt.Errorf("messages stream: %w", context.Cause(ctx))
	case errors.Is(err, sse.ErrEventTooLarge):
		return guard.LineLimit("messages stream")
	case errors.Is(err, io.EOF):
		return diagnostics.Wrap(diagnostics.ClassDisconnect,
			fmt.Errorf("%w: body ended before message_stop (stop_reason %q)", diagnostics.ErrDisconnected, d.stop))
	}
	return diagnostics.Classify(fmt.Errorf("messages stream: %w", err))
}

// statusError classifies an answer other than 200: its status, Anthropic's
// error type and message, and how long to wait: retry-after, else (on a 429)
// the anthropic-ratelimit-*-reset time that is furthest.
func statusError(resp *http.Response, now time.Time) error {
	guard.BoundErrorBody(resp)
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error wireError `json:"error"`
	}
	msg := guard.Excerpt(body, 300)
	if json.Unmarshal(body, &e) == nil && e.Error.Type != "" {
		msg = e.Error.Type + ": " + e.Error.Message
	}
	out := &diagnostics.Error{Class: diagnostics.FromStatus(resp.StatusCode), Status: resp.StatusCode,
		RetryAfter: diagnostics.ParseRetryAfter(resp.Header.Get("Retry-After"), now),
		Err:        fmt.Errorf("messages request: HTTP %d: %s", resp.StatusCode, msg)}
	if out.RetryAfter == 0 && resp.StatusCode == http.StatusTooManyRequests {
		out.RetryAfter = rateLimitReset(resp.Header, now)
	}
	return out
}

// rateLimitReset is the wait until the furthest anthropic-ratelimit-*-reset
// (RFC 3339 times) of the limits that are spent.
func rateLimitReset(h http.Header, now time.Time) time.Duration {
	var wait time.Duration
	for _, lim := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		if h.Get("anthropic-ratelimit-"+lim+"-remaining") != "0" {
			continue
		}
		if t, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-"+lim+"-reset")); err == nil {
			wait = max(wait, t.Sub(now))
		}
	}
	return wait
}
