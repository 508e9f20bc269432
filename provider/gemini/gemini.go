// Package gemini is the Gemini Interactions API adapter (kind: gemini). It
// creates every interaction in background mode with streaming (POST
// /v1beta/interactions with background and stream true), so that a dropped
// stream costs nothing: the interaction id is emitted as soon as
// interaction.created arrives, and Resume re-attaches with GET
// /v1beta/interactions/{id}?stream=true&last_event_id=…, regenerating no
// token. Through silence longer than the profile's idle window it stops
// holding the stream and polls the interaction's status instead, exactly as
// the Responses adapter does; thoughts (thought summaries) are
// provider.KindReasoning, never output; only interaction.completed with
// status completed is terminal evidence.
//
// # The cursor
//
// The journal, the executor and Temporal heartbeats carry a numeric cursor
// (provider.Cursor.Seq, Event.Seq), while Gemini resumes after an opaque
// string event_id. The adapter numbers the events of an interaction's stream
// itself: Seq is the event's ordinal in the stream as it is sent from the
// start (0 for interaction.created). That number is what is journaled. To
// re-attach after event Seq the adapter needs that event's event_id: it keeps
// the last event_id it saw for each interaction it streams (in memory, per
// Provider), and re-attaches with last_event_id when its entry is at the
// cursor. For another process it hands the journal a mark (KindMark: an
// event_id and its ordinal) at most every markEvery, after the event it
// names; `noderun resume` passes the last one back (provider.Cursor.Mark)
// and the re-attach goes on after it, dropping the events up to the
// cursor. A process with neither (another Temporal worker, which must
// rebuild the output anyway) re-attaches without last_event_id, which the
// API documents as streaming from the start, and drops the first Seq+1
// events. Every way nothing is generated twice and the output is
// byte-identical; the last re-reads (re-downloads) the part already
// generated.
//
// The adapter never retries by itself (and uses no SDK whose retries would
// hide failures): every failure is returned, classified, to the executor,
// which owns the recovery loop.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/conns"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/idle"
)

// DefaultBaseURL is the Gemini API root; paths below it start with
// DefaultAPIVersion.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// DefaultAPIVersion is the version path a base URL without one gets: the
// one the Interactions API reference addresses
// (https://ai.google.dev/api/interactions-api). The @google/genai SDK
// (3.3.0) addresses v1 by default; a base URL ending in /v1 follows it.
const DefaultAPIVersion = "v1beta"

// apiVersion matches a Google API version path segment: v1, v1beta,
// v1alpha, v1beta1, v2…
var apiVersion = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]*)?$`)

// Errors of interactions that ended without completing, returned inside a
// *diagnostics.Error that carries their class.
var (
	// ErrFailed: the interaction ended with status failed.
	ErrFailed = errors.New("interaction failed")
	// ErrIncomplete: the interaction ended with status incomplete.
	ErrIncomplete = errors.New("interaction incomplete")
	// ErrCancelled: the interaction was cancelled.
	ErrCancelled = errors.New("interaction cancelled")
	// ErrRequiresAction: the interaction waits for a tool result, which a
	// noderun node never sends.
	ErrRequiresAction = errors.New("interaction requires action")
	// ErrBudgetExceeded: the interaction was halted at its token budget;
	// the same request would be halted again.
	ErrBudgetExceeded = errors.New("interaction budget exceeded")
	// ErrUnknownStatus: the interaction has a status the API does not
	// document (a protocol error: waiting on it could be forever).
	ErrUnknownStatus = fmt.Errorf("interaction status unknown to noderun: %w", diagnostics.ErrProtocol)
	// ErrErrorEvent: the stream carried an error event.
	ErrErrorEvent = errors.New("interaction stream error event")
	// ErrProtocol: the server sent something that is not the Interactions
	// streaming protocol. It is a diagnostics.ErrProtocol.
	ErrProtocol = fmt.Errorf("gemini %w", diagnostics.ErrProtocol)
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root (DefaultBaseURL when empty). If its last path
	// segment is an API version (/v1, /v1beta, /v1alpha) requests go below
	// it; otherwise below its /DefaultAPIVersion.
	BaseURL string
	// APIKey is sent as x-goog-api-key; empty sends none.
	APIKey string
	// Agent, when set, names the agent (e.g. a Deep Research agent) every
	// interaction is created with instead of a model.
	Agent string
	// HTTPClient carries every request; it must not set Timeout. Nil uses a
	// client with its own transport, connects bounded by MaxDials.
	HTTPClient *http.Client
	MaxDials   int
	Logger     *slog.Logger
}

// Provider is the Interactions API adapter. It implements provider.Provider,
// provider.Resumer, provider.Checker and provider.Canceler, and is safe for
// concurrent use by several nodes.
type Provider struct {
	base  string
	key   string
	agent string
	hc    *http.Client
	log   *slog.Logger
	own   conns.Owned

	mu sync.Mutex
	// marks holds, per interaction being streamed, the last event's ordinal
	// and event_id: what a re-attach in this process resumes after.
	marks map[string]mark
}

// mark is where an interaction's stream stood when last read.
type mark struct {
	seq int64
	id  string
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Resumer  = (*Provider)(nil)
	_ provider.Checker  = (*Provider)(nil)
	_ provider.Canceler = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: base URL %q is not an http(s) URL", base)
	}
	hc, own := conns.Own(cfg.HTTPClient, func() *http.Client {
		return &http.Client{Transport: conns.Transport(cfg.MaxDials, 30*time.Second, 0)}
	})
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base = strings.TrimRight(base, "/")
	if !apiVersion.MatchString(path.Base(u.Path)) {
		base += "/" + DefaultAPIVersion
	}
	return &Provider{base: base, key: cfg.APIKey, agent: cfg.Agent,
		hc: guard.Client(hc), log: log, own: own, marks: map[string]mark{}}, nil
}

// Close closes the idle connections of the client New made.
func (p *Provider) Close() error { return p.own.Close() }

// Capabilities: interactions can be re-attached, checked and cancelled by
// id, and the adapter polls through silence itself.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Resume: true, Check: true, Cancel: true, IdleHandled: true}
}

// Stream creates a background interaction and streams it to its end: KindRef
// with the interaction id first, then KindDelta (answer text),
// KindReasoning (thoughts) and KindProgress events whose Seq is the event's
// ordinal, and KindDone on interaction.completed. Every other end is a
// classified error (diagnostics.ErrDisconnected for a stream that ended).
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

// Resume re-attaches to interaction cur.Ref and streams the events after
// ordinal cur.Seq to the end (see the package comment for how the cursor
// maps to last_event_id). Events at or below the cursor are dropped.
func (p *Provider) Resume(ctx context.Context, req provider.Request, cur provider.Cursor, emit provider.Emit) error {
	if cur.Ref == "" {
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: errors.New("gemini: resume without an interaction id")}
	}
	s := p.newSession(req, emit, cur)
	c, err := s.Attach(ctx)
	if err != nil && !errors.Is(err, idle.ErrSilent) {
		return err
	}
	return s.run(ctx, c)
}

// Check reads interaction ref (GET without stream). For a completed
// interaction Output is its answer text, thoughts excluded.
func (p *Provider) Check(ctx context.Context, ref string) (provider.Status, error) {
	it, err := p.get(ctx, ref)
	if err != nil {
		return provider.Status{}, err
	}
	if unknownStatus(it.Status) {
		return provider.Status{}, terminalError(ref, it.Status, "from its status")
	}
	st := provider.Status{State: mapState(it.Status), Usage: it.Usage.provider()}
	switch st.State {
	case provider.StateCompleted:
		st.Output = it.outputText()
	case provider.StateFailed, provider.StateIncomplete, provider.StateCancelled:
		st.Error = it.failureText()
	}
	return st, nil
}

// Cancel stops background interaction ref (POST {version}/interactions/{id}/cancel).
func (p *Provider) Cancel(ctx context.Context, ref string) error {
	resp, err := p.do(ctx, http.MethodPost, "/interactions/"+url.PathEscape(ref)+"/cancel", nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError("cancel "+ref, resp)
	}
	p.forget(ref)
	return nil
}

// createRequest is the body of POST {version}/interactions.
type createRequest struct {
	Model             string            `json:"model,omitempty"`
	Agent             string            `json:"agent,omitempty"`
	Input             string            `json:"input"`
	SystemInstruction string            `json:"system_instruction,omitempty"`
	Background        bool              `json:"background"`
	Stream            bool              `json:"stream"`
	Store             bool              `json:"store"`
	GenerationConfig  *generationConfig `json:"generation_config,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens   int    `json:"max_output_tokens,omitempty"`
	ThinkingLevel     string `json:"thinking_level,omitempty"`
	ThinkingSummaries string `json:"thinking_summaries,omitempty"`
}

// body is the create request for req. A node's model wins over the
// provider's agent only when the provider names no agent: agent and model are
// exclusive in the API, and an agent provider is chosen for its agent.
func (p *Provider) body(req provider.Request) createRequest {
	cr := createRequest{Input: req.Prompt, SystemInstruction: req.System, Background: true, Stream: true, Store: true}
	agent := p.agent
	if a := req.Agent; a != "" {
		agent = a
	}
	if agent != "" {
		cr.Agent = agent
	} else {
		cr.Model = req.Model
	}
	var gc generationConfig
	gc.MaxOutputTokens = req.MaxOutputTokens
	if req.ReasoningEffort != "" {
		// Thinking levels are minimal, low, medium and high
		// (https://ai.google.dev/gemini-api/docs/interactions/thinking);
		// summaries make thoughts visible (journaled as reasoning, never
		// output).
		gc.ThinkingLevel = req.ReasoningEffort
		if gc.ThinkingLevel == "none" {
			gc.ThinkingLevel = "minimal"
		}
		gc.ThinkingSummaries = "auto"
	}
	if gc != (generationConfig{}) {
		cr.GenerationConfig = &gc
	}
	return cr
}

// create sends the background streaming create.
func (p *Provider) create(ctx context.Context, req provider.Request) (*conn, error) {
	b, err := json.Marshal(p.body(req))
	if err != nil {
		return nil, &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("gemini create: %w", err)}
	}
	cctx, cancel := context.WithCancel(ctx)
	dog := idle.NewWatchdog(req.Policy.PollAfter.D(), cancel)
	resp, err := p.do(cctx, http.MethodPost, "/interactions", b, http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		dog.Stop()
		cancel()
		if ctx.Err() == nil && dog.Idle() {
			return nil, idle.ErrSilent
		}
		return nil, err
	}
	c := &conn{body: resp.Body, cancel: cancel, dog: dog}
	if resp.StatusCode != http.StatusOK {
		err := statusError("create", resp)
		c.close()
		return nil, err
	}
	if err := checkEventStream("create", resp); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// get reads an interaction without streaming.
func (p *Provider) get(ctx context.Context, ref string) (*interaction, error) {
	resp, err := p.do(ctx, http.MethodGet, "/interactions/"+url.PathEscape(ref), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("get "+ref, resp)
	}
	it := new(interaction)
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxObjectBytes))
	if err := dec.Decode(it); err != nil {
		return nil, &diagnostics.Error{Class: diagnostics.ClassProtocol, Err: fmt.Errorf("gemini get %s: %w: %w", ref, ErrProtocol, err)}
	}
	return it, nil
}

// do sends one request with the key and node headers. It fails only for
// transport errors (and the caller's context).
func (p *Provider) do(ctx context.Context, method, path string, body []byte, h http.Header) (*http.Response, error) {
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var hreq *http.Request
	var err error
	if rd != nil {
		hreq, err = http.NewRequestWithContext(ctx, method, p.base+path, rd)
	} else {
		hreq, err = http.NewRequestWithContext(ctx, method, p.base+path, nil)
	}
	if err != nil {
		return nil, &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("gemini %s %s: %w", method, path, err)}
	}
	for k, v := range h {
		hreq.Header[k] = v
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if p.key != "" {
		hreq.Header.Set("x-goog-api-key", p.key)
	}
	resp, err := provider.Send(p.hc, hreq)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			return nil, fmt.Errorf("gemini %s %s: %w: %w", method, path, cerr, err)
		}
		return nil, fmt.Errorf("gemini %s %s: %w", method, path, err) // diagnostics.Classify knows transport errors
	}
	return resp, nil
}

// note records the last event of ref's stream, for a re-attach in this process.
func (p *Provider) note(ref string, seq int64, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks[ref] = mark{seq: seq, id: id}
}

// markOf is what this process knows of ref's stream.
func (p *Provider) markOf(ref string) (mark, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.marks[ref]
	return m, ok
}

// forget drops ref's mark once its interaction ended.
func (p *Provider) forget(ref string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.marks, ref)
}

func mapState(s string) provider.State {
	switch s {
	case statusCompleted:
		return provider.StateCompleted
	case statusFailed, statusRequiresAction:
		return provider.StateFailed
	case statusCancelled:
		return provider.StateCancelled
	case statusIncomplete, statusBudgetExceeded: // ended, its output cut short
		return provider.StateIncomplete
	case statusInProgress:
		return provider.StateInProgress
	}
	return provider.StateQueued // queued, or no status yet: created, not running (unknownStatus is checked first)
}

// unknownStatus says whether s is a status the API does not document.
func unknownStatus(s string) bool {
	switch s {
	case "", statusInProgress, statusRequiresAction, statusCompleted, statusFailed, statusCancelled,
		statusIncomplete, statusBudgetExceeded, statusQueued:
		return false
	}
	return true
}

func (u *usage) provider() *provider.Usage {
	if u == nil {
		return nil
	}
	// The Interactions API counts them apart, field by field
	// (https://ai.google.dev/gemini-api/docs/tokens, "usage on the
	// interaction response"; reference: https://ai.google.dev/api/interactions-api):
	// total_output_tokens is the answer's, without the thoughts, which are
	// total_thought_tokens; total_input_tokens is the whole prompt, the
	// cached part (total_cached_tokens) included. provider.Usage counts as
	// OpenAI does: OutputTokens includes the reasoning, and InputTokens
	// leaves out what CacheReadTokens counts, so that each is priced once.
	return &provider.Usage{
		InputTokens:     max(u.TotalInputTokens-u.TotalCachedTokens, 0),
		OutputTokens:    u.TotalOutputTokens + u.TotalThoughtTokens,
		ReasoningTokens: u.TotalThoughtTokens,
		CacheReadTokens: u.TotalCachedTokens,
	}
}

// terminalError is the classified error of an interaction that ended
// without completing. All are deterministic: the work is gone, and the same
// request would end the same way or has been stopped on purpose.
func terminalError(ref, status, msg string) error {
	var sentinel error
	switch status {
	case statusCancelled:
		sentinel = ErrCancelled
	case statusIncomplete:
		sentinel = ErrIncomplete
	case statusRequiresAction:
		sentinel = ErrRequiresAction
	case statusBudgetExceeded:
		sentinel = ErrBudgetExceeded
	case statusFailed:
		sentinel = ErrFailed
	default:
		return &diagnostics.Error{Class: diagnostics.ClassProtocol, Err: fmt.Errorf("interaction %s: %w: %q (%s)", ref, ErrUnknownStatus, status, msg)}
	}
	return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("interaction %s: %w: %s", ref, sentinel, msg)}
}

// terminalStatus says whether an interaction in status s is over without
// its answer: ended, or in a status nobody can say will ever end.
func terminalStatus(s string) bool {
	switch s {
	case statusFailed, statusCancelled, statusIncomplete, statusRequiresAction, statusBudgetExceeded:
		return true
	}
	return unknownStatus(s)
}
