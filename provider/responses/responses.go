// Package responses is the OpenAI Responses API adapter. It creates every
// response in background mode (background, stream and store all true) so that
// a dropped stream costs nothing: the response id is emitted as soon as
// response.created arrives, every event's sequence_number is the cursor, and
// Resume re-attaches with GET /responses/{id}?stream=true&starting_after=N,
// regenerating no token. Through silence longer than the profile's idle window
// it stops holding the stream and polls the response status instead, so no
// gateway can cut an idle connection; a response that stays queued without
// progress past the stuck bound is reported as diagnostics.ErrStuck.
//
// The adapter never retries by itself: every failure is returned, classified,
// to the executor, which owns the recovery loop.
package responses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/conns"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/idle"
)

// Errors of responses that ended without completing. They are returned
// inside a *diagnostics.Error that carries their class.
var (
	// ErrFailed: the response ended with status failed (response.failed).
	ErrFailed = errors.New("response failed")
	// ErrIncomplete: the response ended with status incomplete (response.incomplete).
	ErrIncomplete = errors.New("response incomplete")
	// ErrErrorEvent: the stream carried an "error" event.
	ErrErrorEvent = errors.New("response stream error event")
	// ErrCancelled: the response was cancelled (by a Cancel call or on the
	// provider's side) while this call was streaming or polling it.
	ErrCancelled = errors.New("response cancelled")
	// ErrProtocol: the server sent something that is not the Responses
	// streaming protocol (malformed event, wrong content type).
	// It is a diagnostics.ErrProtocol, of class protocol.
	ErrProtocol = fmt.Errorf("responses %w", diagnostics.ErrProtocol)
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or http://127.0.0.1:PORT/v1.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends no Authorization header.
	APIKey string
	// HTTPClient carries every request. It must not set Timeout (streams are
	// long; the adapter bounds waiting with the context and the idle window).
	// Nil uses a client with its own clone of the default transport, its
	// connects bounded per host by MaxDials (see package conns).
	HTTPClient *http.Client
	// MaxDials bounds concurrent connects per host of the default client
	// (0: conns.DefaultMaxDials).
	MaxDials int
	// Logger receives debug and warning logs; nil discards them.
	Logger *slog.Logger
}

// Provider is the Responses API adapter. It implements provider.Provider,
// provider.Resumer, provider.Checker and provider.Canceler, and is safe for
// concurrent use by several nodes.
type Provider struct {
	base   string
	key    string
	hc     *http.Client
	client *openai.Client
	log    *slog.Logger
	own    conns.Owned
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Resumer  = (*Provider)(nil)
	_ provider.Checker  = (*Provider)(nil)
	_ provider.Canceler = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("responses: base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	hc, own := conns.Own(cfg.HTTPClient, func() *http.Client {
		return &http.Client{Transport: conns.Transport(cfg.MaxDials, 30*time.Second, 0)}
	})
	hc = guard.Client(hc)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = base
	// go-openai has no retries of its own; its HTTPDoer is ours, a plain
	// pass-through that only records the HTTP response (see capture).
	oc.HTTPClient = doer{hc}
	return &Provider{base: base, key: cfg.APIKey, hc: hc, client: openai.NewClientWithConfig(oc), log: log, own: own}, nil
}

// Close closes the idle connections of the client New made (conns.Owned).
func (p *Provider) Close() error { return p.own.Close() }

// Capabilities: responses can be re-attached, checked and cancelled by id,
// and the adapter polls through silence itself.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Resume: true, Check: true, Cancel: true, IdleHandled: true}
}

// Stream creates a background response and streams it to its end. It emits
// KindRef with the response id before anything else, then KindDelta,
// KindReasoning and KindProgress events whose Seq is the response's
// sequence_number, and KindDone on response.completed. Through silence it
// polls (see the package comment). Any other end is an error:
// diagnostics.ErrDisconnected for a stream that ended, a *diagnostics.Error
// for HTTP errors and failed responses, diagnostics.ErrStuck for a response
// left queued.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	s := p.newSession(req, emit, provider.Cursor{Seq: -1})
	s.fromStart = true
	c, err := p.create(ctx, req)
	if errors.Is(err, idle.ErrSilent) {
		return s.IdleBeforeRef()
	}
	if err != nil {
		return err
	}
	return s.run(ctx, c)
}

// Resume re-attaches to the response cur.Ref and streams the events after
// cur.Seq to the response's end, exactly as Stream does from there. Once the
// stream is open it emits a diagnostics.Reattached diagnostic; a re-attach
// that gets no answer within the idle window polls instead. Events at or
// below the cursor are dropped even if the server sends them.
func (p *Provider) Resume(ctx context.Context, req provider.Request, cur provider.Cursor, emit provider.Emit) error {
	if cur.Ref == "" {
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: errors.New("responses: resume without a response id")}
	}
	s := p.newSession(req, emit, cur)
	c, err := s.Attach(ctx)
	if err != nil && !errors.Is(err, idle.ErrSilent) {
		return err
	}
	return s.run(ctx, c) // c is nil after silence: run polls first
}

// Check asks for the status of response ref. For a completed response Output
// is the concatenated output_text of its message items, byte for byte what
// the stream delivered. It emits nothing.
func (p *Provider) Check(ctx context.Context, ref string) (provider.Status, error) {
	r, err := p.get(ctx, ref)
	if err != nil {
		return provider.Status{}, err
	}
	st := provider.Status{State: mapState(r.Status), Usage: usage(r.Usage)}
	switch st.State {
	case provider.StateCompleted:
		st.Output = outputText(r.Output)
	case provider.StateFailed, provider.StateIncomplete, provider.StateCancelled:
		st.Error = failureText(r)
	}
	return st, nil
}

// Cancel asks the provider to stop response ref (POST /responses/{id}/cancel),
// so it stops billing. The API makes it idempotent.
func (p *Provider) Cancel(ctx context.Context, ref string) error {
	cp := new(capture)
	if _, err := p.client.CancelResponse(withCapture(ctx, cp), ref); err != nil {
		return p.apiError(ctx, "cancel "+ref, cp, err)
	}
	return nil
}

// create sends the background response request through go-openai.
//
// go-openai builds and sends the request (JSON body, auth and org headers)
// and decodes HTTP errors, but its stream reader is not used: it cannot tell
// a clean end from a cut event, delivers a data line before its event is
// complete, counts keepalive comments toward ErrTooManyEmptyStreamMessages,
// accumulates every non-data line in memory, and joins no multi-line data.
// The body go-openai received is taken from the capturing HTTPDoer and read
// with provider/sse, the same spec-following reader Resume uses, so both
// paths share one event loop. (go-openai v1.43.0 does not read the body
// before the first Recv, which is never called.)
func (p *Provider) create(ctx context.Context, req provider.Request) (*conn, error) {
	store := true
	oreq := openai.CreateResponseRequest{
		Model:           req.Model,
		Instructions:    req.System,
		Input:           req.Prompt,
		Background:      true,
		Stream:          true,
		Store:           &store,
		MaxOutputTokens: req.MaxOutputTokens,
	}
	if req.ReasoningEffort != "" {
		oreq.Reasoning = &openai.ResponseReasoning{Effort: req.ReasoningEffort}
	}
	cctx, cancel := context.WithCancel(ctx)
	dog := idle.NewWatchdog(req.Policy.PollAfter.D(), cancel)
	cp := new(capture)
	stream, err := p.client.CreateResponseStream(withCapture(cctx, cp), oreq)
	if err != nil {
		dog.Stop()
		if cp.resp != nil {
			_ = cp.resp.Body.Close() // go-openai reads an error body but does not close it
		}
		cancel()
		if ctx.Err() == nil && dog.Idle() {
			return nil, idle.ErrSilent
		}
		return nil, p.apiError(ctx, "create", cp, err)
	}
	c := &conn{body: cp.resp.Body, cancel: cancel, closer: stream.Close, dog: dog}
	if err := checkEventStream("create", cp.resp); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// get retrieves a response (no stream) through go-openai.
func (p *Provider) get(ctx context.Context, ref string) (openai.CreateResponseResponse, error) {
	cp := new(capture)
	r, err := p.client.GetResponse(withCapture(ctx, cp), ref)
	if err != nil {
		return r, p.apiError(ctx, "get "+ref, cp, err)
	}
	return r, nil
}

func mapState(s openai.ResponseStatus) provider.State {
	switch s {
	case openai.ResponseStatusCancelling:
		return provider.StateCancelled
	}
	return provider.State(s)
}

func usage(u *openai.ResponseUsage) *provider.Usage {
	if u == nil {
		return nil
	}
	out := &provider.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
	if u.OutputTokensDetails != nil {
		out.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
	}
	return out
}

// outputText concatenates the output_text parts of the message items, in
// order: exactly the text of the response's output_text.delta events.
func outputText(items []any) string {
	var b strings.Builder
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m == nil || m["type"] != "message" {
			continue
		}
		parts, _ := m["content"].([]any)
		for _, part := range parts {
			pm, _ := part.(map[string]any)
			if pm != nil && pm["type"] == "output_text" {
				s, _ := pm["text"].(string)
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

// failureText describes why a response did not complete.
func failureText(r openai.CreateResponseResponse) string {
	switch {
	case r.Error != nil && r.Error.Code != "":
		return r.Error.Code + ": " + r.Error.Message
	case r.Error != nil:
		return r.Error.Message
	case r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "":
		return r.IncompleteDetails.Reason
	}
	return string(r.Status)
}

// terminalError is the classified error of a response that ended without
// completing.
func terminalError(ref string, status openai.ResponseStatus, msg string) error {
	switch status {
	case openai.ResponseStatusCancelled, openai.ResponseStatusCancelling:
		// Deterministic, not ClassCanceled: the work is gone and the caller
		// did not give up (a caller's own abort surfaces as context.Canceled).
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("response %s: %w: %s", ref, ErrCancelled, msg)}
	case openai.ResponseStatusIncomplete:
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("response %s: %w: %s", ref, ErrIncomplete, msg)}
	}
	return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("response %s: %w: %s", ref, ErrFailed, msg)}
}

func since(t time.Time) slog.Attr {
	return diagnostics.KeySince.Attr(time.Since(t).Round(time.Millisecond))
}
