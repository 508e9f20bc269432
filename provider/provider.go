// Package provider defines what a model provider adapter is: something that
// translates a wire protocol into Events and declares what it can do to
// recover (resume, check status, cancel, continue). Adapters live in
// subpackages; the recovery loop that uses them lives in runner.
//
// Every adapter is a Provider. What else it implements, its Capabilities
// promise (CheckCapabilities): Resumer (Resume: re-attach by Ref from a
// Cursor), Checker (Check: the work's status), Canceler (Cancel: stop the
// work), Continuer (Continue: re-send a chat request with the answer so far
// and emit what follows), and RequestContinuer to continue some requests
// only. An adapter that speaks HTTP sends with Send, which marks the request
// with its node (NodeHeader) and shows the response to the context's
// ResponseObserver (the runner's pacer). A program plugs in its own adapter
// as a provider kind: runner.Options.Kinds, runner.ProviderFunc.
//
// # The contract
//
// The runner's recovery loop owns every decision (reconnect, resume,
// continue, retry, fail); an adapter only translates its protocol and says
// what happened. Every adapter, built-in or custom, keeps these rules, and
// package providertest checks them against the adapter's own server, cut
// for real:
//
//  1. Stream, Resume and Continue return nil only after emitting KindDone
//     on the protocol's terminal evidence; KindDone is their last event. A
//     stream that ended without it, however cleanly, is an error wrapping
//     diagnostics.ErrDisconnected (a disconnect, never a completion).
//  2. Errors are classified (diagnostics.Classify, or a *diagnostics.Error
//     with its Class): an HTTP status by diagnostics.FromStatus, a
//     protocol violation diagnostics.ErrProtocol. An adapter does not retry
//     by itself, and turns off its SDK's retries: one layer owns retrying.
//  3. Work that can be resumed, checked or cancelled is named by KindRef
//     before the first delta, so that the journal holds its id before
//     anything else can go wrong. Seq is the provider's cursor and never
//     goes back (-1 where the protocol has none).
//  4. Resume emits only what follows the cursor (after cur.Seq, or after
//     cur.Mark's token), regenerating nothing and never emitting KindReset;
//     it may be called by an adapter that never saw the work (another
//     process resuming a journaled run). It may emit a
//     diagnostics.Reattached diagnostic once the re-attached stream is
//     open; the runner journals its own recovery step either way.
//  5. Continue emits only what follows have, byte for byte (SplitWhole).
//  6. An error returned by Emit ends the call at once and is returned
//     unchanged: it is the journal refusing to record, and nothing may be
//     received that cannot be journaled.
//  7. When ctx ends, the call returns promptly, without waiting on the
//     server. The runner reads ctx itself (an interruption is never the
//     node's failure, whatever the error says); returning an error that
//     wraps context.Cause(ctx) keeps the caller's cause in the journal.
//  8. Check reports completed work with its whole output; Cancel is
//     idempotent (cancelling twice, or cancelling finished work, succeeds).
//
// A custom kind proves it in its own test:
//
//	func TestMyKindConforms(t *testing.T) {
//		srv := startMyServer(t) // can cut its next stream mid-body
//		providertest.Test(t, providertest.Config{
//			New:     func() provider.Provider { return mykind.New(srv.URL) },
//			Request: provider.Request{Prompt: "p"},
//			Want:    srv.Answer("p"),
//			CutNext: srv.CutNextAfter,
//		})
//	}
//
// examples/embed in the repository is a complete custom kind that does.
package provider

import (
	"context"
	"errors"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
)

// Request is one node's call, independent of the wire protocol.
type Request struct {
	Node  string
	Model string
	// Agent names a provider-side agent run instead of a model (the Gemini
	// Interactions API's agent, e.g. Deep Research); "" for a model.
	Agent           string
	System          string
	Prompt          string
	ReasoningEffort string // "", "low", "medium", "high"
	MaxOutputTokens int
	// WorkDir is where a harness runs; empty means the current directory.
	WorkDir string
	// Env is added to a harness process's environment, over the provider's
	// (a node's env); other adapters ignore it.
	Env map[string]string
	// Policy carries the profile values an adapter needs for its own
	// waiting (idle window, poll interval, stuck bound).
	Policy profile.Profile
}

// Kind says what an Event carries.
type Kind string

const (
	// KindRef: the provider named the work: a response id or thread id (in Ref).
	// Adapters emit it as early as possible so it is journaled before anything
	// else can go wrong.
	KindRef Kind = "ref"
	// KindDelta: a piece of the node's output (in Text).
	KindDelta Kind = "delta"
	// KindReasoning: a piece of reasoning summary (in Text); never output.
	KindReasoning Kind = "reasoning"
	// KindProgress: the provider advanced (Seq) without output; counts as
	// healthy progress for the idle window.
	KindProgress Kind = "progress"
	// KindAlive: a status check or poll found the work queued or in progress at
	// the provider, though no event arrived. It is healthy progress: the
	// provider is up and working on it (the adapter bounds how long work may
	// stay queued).
	KindAlive Kind = "alive"
	// KindRaw: a wire event kept for the journal (in Raw), e.g. a harness JSONL line.
	KindRaw Kind = "raw"
	// KindDiagnostic: a recovery step the adapter took by itself (in Diag).
	KindDiagnostic Kind = "diagnostic"
	// KindReset: output emitted so far is void (the adapter restarted the
	// work from scratch, or took the whole output from a status check).
	KindReset Kind = "reset"
	// KindDone: terminal evidence; Usage may be set. Nothing follows it.
	KindDone Kind = "done"
	// KindMark: the provider's own name for a point of the stream (in Mark:
	// Gemini's event_id of the event at Mark.Seq), journaled so that a
	// runner resuming from the journal in another process re-attaches after
	// it rather than from the stream's start (Cursor.Mark). Its own Seq is
	// -1: it is not a stream position.
	KindMark Kind = "mark"
)

// Mark is a point of a stream named by the provider's own token: a resume
// after Token continues after the event at Seq.
type Mark struct {
	Seq   int64  `json:"seq"`
	Token string `json:"token"`
}

// Event is one thing an adapter observed.
type Event struct {
	Kind Kind
	Text string
	// Ref is the response or thread id, on KindRef (and echoed on later events).
	Ref string
	// Seq is the provider's cursor after this event (Responses sequence_number),
	// -1 when the protocol has none.
	Seq   int64
	Raw   []byte
	Diag  *diagnostics.Record
	Usage *Usage
	Mark  *Mark // on KindMark
	// Time is when the adapter received the event (a time.Now() reading,
	// which keeps the monotonic clock), or zero for now: the read of the
	// stream that brought it (sse.Reader.Received) rather than the moment
	// the adapter handled it, which may be later on a loaded machine. The
	// executor takes it as the moment of the last data, for the idle
	// watchdog and for the silence a gateway cut (NR101, NR109), so nothing
	// older than the event's arrival may go here.
	Time time.Time
}

// Usage is token accounting, when the provider reports it.
type Usage struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// CacheReadTokens and CacheWriteTokens are input tokens read from and
	// written to the provider's prompt cache, where the provider counts
	// them apart from InputTokens (Anthropic's cache_read_input_tokens and
	// cache_creation_input_tokens); 0 where InputTokens includes them.
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// Emit receives events in order. An error from Emit aborts the stream and is
// returned by the adapter unchanged.
type Emit func(Event) error

// Capabilities is what an adapter can do beyond starting a stream. Every
// flag but IdleHandled promises an interface the recovery loop calls
// (CheckCapabilities).
type Capabilities struct {
	// Resume: the work can be re-attached by Ref and cursor, regenerating nothing.
	Resume bool
	// Check: the work's status can be asked for by Ref.
	Check bool
	// Cancel: the work can be stopped by Ref, so the provider stops billing.
	Cancel bool
	// IdleHandled: the adapter handles silence itself (polls instead of
	// holding an idle stream), so the executor must not cut it for idleness.
	IdleHandled bool
	// Continue: a dropped stream can be continued from the output delivered
	// so far (Continuer), regenerating nothing; the request is re-sent.
	Continue bool
}

// Provider is a model provider adapter.
//
// Stream returns nil only after emitting KindDone on terminal evidence. Every
// other ending returns an error that diagnostics.Classify can classify; a
// stream that merely ended is diagnostics.ErrDisconnected.
type Provider interface {
	Capabilities() Capabilities
	Stream(ctx context.Context, req Request, emit Emit) error
}

// Cursor is where a resumable stream stands: the work's Ref and the last
// sequence number received (-1 before any).
type Cursor struct {
	Ref string
	Seq int64
	// Mark, when a journal holds one, is the provider's token for a point
	// at or before Seq (KindMark): an adapter that names events by token
	// re-attaches after it and drops what follows up to Seq.
	Mark *Mark
}

// Resumer is implemented by adapters with Capabilities.Resume. Resume
// continues the work at cur, emitting only events after cur.Seq.
type Resumer interface {
	Resume(ctx context.Context, req Request, cur Cursor, emit Emit) error
}

// State is a provider-side status of a piece of work.
type State string

// States, as the Responses API names them.
const (
	StateQueued     State = "queued"
	StateInProgress State = "in_progress"
	StateCompleted  State = "completed"
	StateFailed     State = "failed"
	StateCancelled  State = "cancelled"
	StateIncomplete State = "incomplete"
)

// Status is the answer to a status check.
type Status struct {
	State State
	// Output is the complete output text, set when State is completed.
	Output string
	Usage  *Usage
	// Error describes a failed or incomplete response.
	Error string
}

// Checker is implemented by adapters with Capabilities.Check.
type Checker interface {
	Check(ctx context.Context, ref string) (Status, error)
}

// Canceler is implemented by adapters with Capabilities.Cancel.
type Canceler interface {
	Cancel(ctx context.Context, ref string) error
}

// ErrNoEffects marks a failure after which sending the request again
// repeats nothing: the provider shows that none of the work took effect (an
// agent harness that dropped a turn in which no tool was called). A node
// whose side_effects are unsafe may then be retried; nothing else changes.
var ErrNoEffects = errors.New("none of the work took effect")
