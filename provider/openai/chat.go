// Package openai is the Chat Completions adapter, built on go-openai. It
// tracks terminal evidence itself: go-openai's Recv returns io.EOF both after
// `data: [DONE]` and when the server merely closes the body, so io.EOF counts
// as success only when a finish_reason and [DONE] were both seen.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/noderun/noderun/provider/sse"
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
// go-openai sends the request and turns an error status into its
// APIError (Retry-After and the status are noted by watchingDoer); the body
// is then read here, by the project's SSE reader and the lean chunk decoder
// (chunk.go), not by go-openai's Recv: its reflective decode of every field
// of every chunk was ~90% of a stream's CPU.
func (p *Provider) stream(ctx context.Context, obs *observation, creq goopenai.ChatCompletionRequest, emit provider.Emit) error {
	stream, err := p.client.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return obs.classify(err)
	}
	defer stream.Close()
	if obs.body == nil { // not a body watchingDoer let through: cannot happen
		return obs.classify(fmt.Errorf("chat stream: %w: no response body", diagnostics.ErrProtocol))
	}
	// 4 KiB, as go-openai's own reader: a chunk is a few hundred bytes, and
	// at 10,000 streams the buffer is a large part of each one's memory.
	r := sse.NewReaderSize(obs.body, 4<<10)
	r.MaxEventBytes = guard.MaxEventBytes

	var finish string
	var usage *provider.Usage
	var c chunk
	// ended: the body ended (or failed after the [DONE] line). It is
	// success only on both terminal signs.
	ended := func(how string) error {
		if finish != "" && obs.sawDone() {
			return emit(provider.Event{Kind: provider.KindDone, Seq: -1, Usage: usage, Time: time.Now()})
		}
		return diagnostics.Wrap(diagnostics.ClassDisconnect,
			fmt.Errorf("%w: %s (finish_reason %q, [DONE] %v)", diagnostics.ErrDisconnected, how, finish, obs.sawDone()))
	}
	for {
		_, data, err := r.NextRaw()
		if err != nil {
			switch {
			case finish != "" && obs.sawDone():
				// The [DONE] line was read whole; what failed came after it,
				// where go-openai's Recv would have stopped reading.
				return ended("after [DONE]")
			case errors.Is(err, io.EOF):
				return ended("body ended")
			case ctx.Err() != nil:
				// The executor's idle watchdog and Ctrl-C both cancel ctx; its cause says which.
				return fmt.Errorf("chat stream: %w", context.Cause(ctx))
			case errors.Is(err, io.ErrUnexpectedEOF):
				// A clean end inside an event (the SSE reader), or a chunked
				// body cut short (the transport): a disconnect either way.
				return ended("body ended inside an event: " + err.Error())
			case errors.Is(err, sse.ErrEventTooLarge):
				return guard.LineLimit("chat stream")
			}
			return obs.classify(fmt.Errorf("chat stream: %w", err))
		}
		if isDoneData(data) {
			// As go-openai: nothing after [DONE] is read. It counts only if
			// the watcher saw the line exactly (`data: [DONE]`).
			return ended("body ended at [DONE]")
		}
		if err := decodeChunk(data, &c); err != nil {
			return obs.classify(fmt.Errorf("chat stream: %w", err))
		}
		if c.errRaw != nil {
			return obs.classify(streamError(c.errRaw))
		}
		if c.hasUsage {
			usage = &provider.Usage{InputTokens: c.usage.prompt, OutputTokens: c.usage.completion, ReasoningTokens: c.usage.reasoning}
		}
		for i := range c.choices {
			ch := &c.choices[i]
			if ch.index != 0 {
				continue // one output per node; n > 1 is never requested
			}
			if ch.content != "" {
				if err := emit(provider.Event{Kind: provider.KindDelta, Text: ch.content, Seq: -1, Time: r.Received()}); err != nil {
					return err
				}
			}
			if ch.reasoning != "" {
				if err := emit(provider.Event{Kind: provider.KindReasoning, Text: ch.reasoning, Seq: -1, Time: r.Received()}); err != nil {
					return err
				}
			}
			if ch.finish != "" {
				finish = ch.finish
			}
		}
	}
}

// isDoneData: an event whose data is [DONE] (go-openai trims the line's
// spaces before it compares).
func isDoneData(data []byte) bool {
	return len(data) >= 6 && len(data) < 32 && string(bytes.TrimSpace(data)) == "[DONE]"
}

// streamError is the error an error object in the stream stands for: the
// same *goopenai.APIError (status 0) go-openai's Recv returned for a
// `data: {"error": …}` line, so it is classified as before.
func streamError(raw []byte) error {
	var apiErr goopenai.APIError
	if err := json.Unmarshal(raw, &apiErr); err != nil {
		return fmt.Errorf("chat stream: error object: %w", err)
	}
	return fmt.Errorf("chat stream: error, %w", &apiErr)
}
