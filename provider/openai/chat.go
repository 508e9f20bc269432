// Package openai is the Chat Completions adapter, built on go-openai. It
// tracks terminal evidence itself: go-openai's Recv returns io.EOF both after
// `data: [DONE]` and when the server merely closes the body, so io.EOF counts
// as success only when a finish_reason and [DONE] were both seen.
package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/conns"
	"github.com/noderun/noderun/provider/guard"
)

// Config configures the adapter.
type Config struct {
	BaseURL string // e.g. https://api.openai.com/v1 or the simulator's URL
	APIKey  string // empty sends no Authorization header
	// HTTPClient defaults to one with dial and header timeouts but no overall
	// timeout (a stream may last hours), its connects bounded per host by
	// MaxDials (see package conns).
	HTTPClient *http.Client
	// MaxDials bounds concurrent connects per host of the default client
	// (0: conns.DefaultMaxDials).
	MaxDials int
	// Continuation is the server's form for continuing a partial answer
	// (continue.go); "" or none: a dropped stream can only be retried.
	Continuation provider.Continuation
}

// Provider streams chat completions. It cannot resume or check a stream:
// the Chat Completions API has no id to re-attach to. It can continue one
// when the server takes a partial assistant message (Config.Continuation).
type Provider struct {
	client *goopenai.Client
	form   provider.Continuation
	// rejected: the server answered a continuation with 400/422; the form
	// is not declared again for the rest of this adapter's life (one run).
	rejected atomic.Bool
	accepted atomic.Bool // a continuation was accepted: the form works
	own      conns.Owned
}

// New returns a chat adapter.
func New(cfg Config) *Provider {
	hc, own := conns.Own(cfg.HTTPClient, func() *http.Client { return httpClient(cfg.MaxDials) })
	hc = guard.Client(hc)
	oc := goopenai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		oc.BaseURL = cfg.BaseURL
	}
	oc.HTTPClient = &watchingDoer{hc}
	// Keepalive comments and event lines count against this limit within one
	// Recv; a quiet reasoning model sends many. The executor's idle window,
	// not a line count, decides when a silent stream is dead.
	oc.EmptyMessagesLimit = math.MaxInt32
	return &Provider{client: goopenai.NewClientWithConfig(oc), form: cfg.Continuation, own: own}
}

// Close closes the idle connections of the client New made (conns.Owned).
func (p *Provider) Close() error { return p.own.Close() }

// DefaultHTTPClient has no overall timeout, since streams are long, but
// bounds connecting and waiting for response headers, and how many connects
// go to one host at once (conns.DefaultMaxDials).
func DefaultHTTPClient() *http.Client { return httpClient(0) }

func httpClient(maxDials int) *http.Client {
	return &http.Client{Transport: conns.Transport(maxDials, 10*time.Second, 2*time.Minute)}
}

// Capabilities: continuing a dropped answer, when the server has a form for
// it and has not rejected it.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Continue: p.form != "" && p.form != provider.ContinueNone && !p.rejected.Load()}
}

// Stream sends the request and emits its output deltas. It returns nil only
// after finish_reason and [DONE]; otherwise a classified error.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	obs := &observation{}
	return p.stream(context.WithValue(ctx, observationKey{}, obs), obs, chatRequest(req), emit)
}

// chatRequest is the wire request of a node.
func chatRequest(req provider.Request) goopenai.ChatCompletionRequest {
	creq := goopenai.ChatCompletionRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	}
	if req.System != "" {
		creq.Messages = append(creq.Messages, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: req.System})
	}
	creq.Messages = append(creq.Messages, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: req.Prompt})
	if req.MaxOutputTokens > 0 {
		creq.MaxCompletionTokens = req.MaxOutputTokens
	}
	creq.ReasoningEffort = req.ReasoningEffort
	return creq
}

// stream sends creq and emits what comes back, until terminal evidence.
func (p *Provider) stream(ctx context.Context, obs *observation, creq goopenai.ChatCompletionRequest, emit provider.Emit) error {
	stream, err := p.client.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return obs.classify(err)
	}
	defer stream.Close()

	var finish goopenai.FinishReason
	var usage *provider.Usage
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if finish != "" && obs.sawDone() {
				return emit(provider.Event{Kind: provider.KindDone, Seq: -1, Usage: usage, Time: time.Now()})
			}
			return diagnostics.Wrap(diagnostics.ClassDisconnect,
				fmt.Errorf("%w: body ended (finish_reason %q, [DONE] %v)", diagnostics.ErrDisconnected, finish, obs.sawDone()))
		}
		if err != nil {
			if ctx.Err() != nil {
				// The executor's idle watchdog and Ctrl-C both cancel ctx; its cause says which.
				return fmt.Errorf("chat stream: %w", context.Cause(ctx))
			}
			return obs.classify(fmt.Errorf("chat stream: %w", err))
		}
		if resp.Usage != nil {
			usage = &provider.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
			if d := resp.Usage.CompletionTokensDetails; d != nil {
				usage.ReasoningTokens = d.ReasoningTokens
			}
		}
		for i := range resp.Choices {
			ch := &resp.Choices[i] // not a copy: a choice is ~300 bytes, and there is one a chunk
			if ch.Index != 0 {
				continue // one output per node; n > 1 is never requested
			}
			if ch.Delta.Content != "" {
				if err := emit(provider.Event{Kind: provider.KindDelta, Text: ch.Delta.Content, Seq: -1, Time: obs.arrived}); err != nil {
					return err
				}
			}
			if ch.Delta.ReasoningContent != "" {
				if err := emit(provider.Event{Kind: provider.KindReasoning, Text: ch.Delta.ReasoningContent, Seq: -1, Time: obs.arrived}); err != nil {
					return err
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
}
