package diagnostics

import "log/slog"

// Code is a stable diagnostic code. Codes are never renumbered or reused; the
// table below is the documentation (docs/diagnostics.md is checked against it).
type Code struct {
	ID      string     // stable, e.g. "NR102"
	Name    string     // stable, snake_case
	Level   slog.Level // how loud it is on stderr
	Summary string     // one line for docs and `noderun events`
}

func (c Code) String() string { return c.ID + " " + c.Name }

// The catalogue. Group by hundreds: 1xx transport recovery, 2xx Responses
// resume, 3xx harness, 4xx run-level, 5xx limits and hostile input, 9xx node outcome.
var (
	DisconnectDetected = Code{"NR101", "disconnect_detected", slog.LevelWarn, "the stream ended without terminal evidence; recovery begins"}
	ReconnectScheduled = Code{"NR102", "reconnect_scheduled", slog.LevelWarn, "a reconnect is scheduled: attempt k of n, delay and cause"}
	RetryStarted       = Code{"NR103", "retry_started", slog.LevelWarn, "the request is sent again from scratch, consuming the retry budget"}
	RateLimitWait      = Code{"NR104", "rate_limit_wait", slog.LevelWarn, "the provider said 429; waiting its Retry-After"}
	ProviderError      = Code{"NR105", "provider_error", slog.LevelWarn, "the provider answered with a transient error (5xx)"}
	ConnectFailed      = Code{"NR106", "connect_failed", slog.LevelWarn, "no connection could be made; the request never left"}
	IdleTimeout        = Code{"NR107", "idle_timeout", slog.LevelWarn, "no data arrived within the profile's idle window"}
	Recovered          = Code{"NR108", "recovered", slog.LevelInfo, "the node completed after one or more recovery steps"}
	IdleCutLearnt      = Code{"NR109", "idle_cut_learnt", slog.LevelWarn, "a stream was cut after N s of silence: an intermediary likely cuts idle streams; the node now polls sooner"}
	ContinueScheduled  = Code{"NR110", "continue_scheduled", slog.LevelWarn, "a dropped chat stream is continued from its journaled output (continued_from bytes) as the final assistant message; nothing delivered is generated again"}
	ContinueAccepted   = Code{"NR111", "continue_accepted", slog.LevelInfo, "the server continued the answer: it returned only the continuation, or repeated the prefix, which was stripped"}
	ContinueRejected   = Code{"NR112", "continue_rejected", slog.LevelWarn, "the server rejected the continuation form (HTTP 400/422): continuation is off for this provider for the rest of the run; retrying from scratch"}
	ContinueRealigned  = Code{"NR113", "continue_realigned", slog.LevelWarn, "the continuation did not start with the bytes of a character cut short; the output was rewritten from the whole-character prefix"}

	Reattached       = Code{"NR201", "reattached", slog.LevelInfo, "re-attached to the response from sequence N; nothing regenerated"}
	PollingStarted   = Code{"NR202", "polling_started", slog.LevelInfo, "the stream was silent; switched to polling the response status"}
	StatusChecked    = Code{"NR203", "status_checked", slog.LevelInfo, "checked the response status before deciding"}
	StuckCancelled   = Code{"NR204", "stuck_cancelled", slog.LevelWarn, "the response made no progress past the bound and was cancelled"}
	FellBackToRetry  = Code{"NR205", "fell_back_to_retry", slog.LevelWarn, "the response could not be resumed; retrying from scratch"}
	OutputFromStatus = Code{"NR206", "output_from_status", slog.LevelInfo, "the response had completed; output taken from its status"}
	ResponseCreated  = Code{"NR207", "response_created", slog.LevelInfo, "the provider assigned a response id"}
	WorkCancelled    = Code{"NR208", "work_cancelled", slog.LevelInfo, "the response was cancelled at the provider so it stops billing (the node failed, is retried from scratch, or a person asked)"}
	WorkDetached     = Code{"NR209", "work_detached", slog.LevelWarn, "interrupted: the response keeps running at the provider; resume re-attaches, cancel stops it"}
	// CrossWorkerResume: a distributed run (Temporal) moved the node to another worker.
	CrossWorkerResume = Code{"NR210", "cross_worker_resume", slog.LevelWarn, "the node's worker was lost; another worker picks it up from the heartbeated cursor: re-attached by response id (the generated part re-read from the provider), harness thread resumed, or retried within its budget"}

	ThreadStarted   = Code{"NR301", "thread_started", slog.LevelInfo, "the harness reported its thread id"}
	HarnessRetrying = Code{"NR302", "harness_retrying", slog.LevelInfo, "the harness is retrying on its own (informational)"}
	ThreadResumed   = Code{"NR303", "thread_resumed", slog.LevelWarn, "the harness thread is resumed by its recorded id"}
	ThreadMismatch  = Code{"NR304", "thread_mismatch", slog.LevelError, "a resume came back with a different thread id"}
	HarnessFailed   = Code{"NR305", "harness_failed", slog.LevelWarn, "the harness reported a failed turn or exited"}
	// ThreadDropped: the harness keeps no resumable record of a turn that
	// failed before its first model response (Gemini CLI rolls it back).
	ThreadDropped = Code{"NR306", "thread_dropped", slog.LevelWarn, "a resume found the thread's record but the harness had dropped its failed turn: nothing to resume; the prompt is started again under the same thread id, from the retry budget"}

	RunStarted     = Code{"NR401", "run_started", slog.LevelInfo, "a run started"}
	RunFinished    = Code{"NR402", "run_finished", slog.LevelInfo, "a run finished"}
	RunInterrupted = Code{"NR403", "run_interrupted", slog.LevelWarn, "the run was interrupted (signal) and can be resumed"}
	NodeSkipped    = Code{"NR404", "node_skipped", slog.LevelWarn, "a node was skipped because a node it needs failed"}
	BreakerOpen    = Code{"NR405", "breaker_open", slog.LevelError, "the provider's circuit breaker is open; failing fast"}

	LimitExceeded      = Code{"NR501", "limit_exceeded", slog.LevelError, "an input or an answer exceeded a documented bound (graph file, prompt, stream event); not retried"}
	ProtocolViolation  = Code{"NR502", "protocol_violation", slog.LevelError, "the server's answer is not the protocol (content type, undecodable event, redirect); not retried"}
	JournalUnavailable = Code{"NR503", "journal_unavailable", slog.LevelError, "the journal cannot record (disk full, read-only): the node stops, resumable work is left resumable"}

	NodeFailed          = Code{"NR901", "node_failed", slog.LevelError, "the node failed: class and what was tried"}
	DeterministicError  = Code{"NR902", "deterministic_error", slog.LevelError, "the provider rejected the request; it is not retried"}
	BudgetExhausted     = Code{"NR903", "budget_exhausted", slog.LevelError, "the retry or reconnect budget is spent"}
	DeadlineExceeded    = Code{"NR904", "deadline_exceeded", slog.LevelError, "the profile's recovery deadline passed"}
	UnsafeReplayRefused = Code{"NR905", "unsafe_replay_refused", slog.LevelError, "the request may have had side effects; not replayed"}
	NodeCanceled        = Code{"NR906", "node_canceled", slog.LevelWarn, "the node was canceled"}
	NodeTimeout         = Code{"NR907", "node_timeout", slog.LevelError, "the node's timeout (its wall time, recovery included) passed; it is not retried"}
)

// Codes lists every code, in order, for docs and lookups.
func Codes() []Code {
	return []Code{
		DisconnectDetected, ReconnectScheduled, RetryStarted, RateLimitWait, ProviderError, ConnectFailed, IdleTimeout, Recovered, IdleCutLearnt,
		ContinueScheduled, ContinueAccepted, ContinueRejected, ContinueRealigned,
		Reattached, PollingStarted, StatusChecked, StuckCancelled, FellBackToRetry, OutputFromStatus, ResponseCreated, WorkCancelled, WorkDetached, CrossWorkerResume,
		ThreadStarted, HarnessRetrying, ThreadResumed, ThreadMismatch, HarnessFailed, ThreadDropped,
		RunStarted, RunFinished, RunInterrupted, NodeSkipped, BreakerOpen,
		LimitExceeded, ProtocolViolation, JournalUnavailable,
		NodeFailed, DeterministicError, BudgetExhausted, DeadlineExceeded, UnsafeReplayRefused, NodeCanceled, NodeTimeout,
	}
}

// Lookup finds a code by ID or name.
func Lookup(idOrName string) (Code, bool) {
	for _, c := range Codes() {
		if c.ID == idOrName || c.Name == idOrName {
			return c, true
		}
	}
	return Code{}, false
}

// Diagnostic is one recovery step, as journaled and logged.
type Diagnostic struct {
	Code    Code
	Message string
	Attrs   []slog.Attr
}

// New builds a diagnostic.
func New(c Code, msg string, attrs ...slog.Attr) Diagnostic {
	return Diagnostic{Code: c, Message: msg, Attrs: attrs}
}

// DetectedCode is the code that first reports an error of class c.
func DetectedCode(c Class) Code {
	switch c {
	case ClassRateLimited:
		return RateLimitWait
	case ClassServer:
		return ProviderError
	case ClassConnect:
		return ConnectFailed
	case ClassDeterministic:
		return DeterministicError
	case ClassCanceled:
		return NodeCanceled
	case ClassProtocol:
		return ProtocolViolation
	case ClassLimit:
		return LimitExceeded
	case ClassJournal:
		return JournalUnavailable
	case ClassTimeout:
		return NodeTimeout
	}
	return DisconnectDetected
}
