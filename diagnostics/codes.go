package diagnostics

import "log/slog"

// Code is a stable diagnostic code. Codes are never renumbered or reused; the
// table below is the documentation (docs/diagnostics.md is checked against it).
//
// Each code declares what it reports (Role), how a recovery step gets the
// node's output back (Means), the word for the fault it counts (Noun), and
// the attributes its records carry (Attrs). Readers ask these, never a list
// of codes of their own, so that the verdicts, `noderun diagnose`, the report
// and chaos cannot disagree about what a code means.
type Code struct {
	ID    string     // stable, e.g. "NR102"
	Name  string     // stable, snake_case
	Level slog.Level // how loud it is on stderr
	Role  Role
	// Means is set on steps: how the step gets the output back.
	Means Means
	// Noun is set on the codes that count as a fault of the node, in the
	// verdicts' words ("disconnect"): every fault, and the outcomes that are
	// one (a rejection, a protocol violation).
	Noun string
	// Ends is set on outcomes: how the node ended, in the verdicts' words
	// ("the retry budget is spent"); node_failed, the generic one, has none.
	Ends string
	// HidesOutput: a record of this code means an agent harness failed or
	// retried a turn by itself, whose output never reached noderun (a CLI
	// reports usage only for the turns it completes), so the node's token
	// figures are lower bounds.
	HidesOutput bool
	Attrs       KeySet
	Summary     string // one line for docs and `noderun events`
}

func (c Code) String() string { return c.ID + " " + c.Name }

// Role is what a code reports.
type Role uint8

const (
	// RoleFault: something went wrong that recovery must deal with: a
	// disconnect, a refused connect, a stuck response, a lost worker, an
	// interruption picked up by `noderun resume`.
	RoleFault Role = iota + 1
	// RoleStep: a recovery step taken (Means says which).
	RoleStep
	// RoleRecord: a fact kept for the operator: a response id, a learnt
	// gateway limit, the run's start and end.
	RoleRecord
	// RoleOutcome: how a node ended: completed after recovery, failed (and
	// why), interrupted, skipped.
	RoleOutcome
)

func (r Role) String() string {
	switch r {
	case RoleFault:
		return "fault"
	case RoleStep:
		return "step"
	case RoleRecord:
		return "record"
	case RoleOutcome:
		return "outcome"
	}
	return "unknown"
}

// Means is how a recovery step gets a node's output back.
type Means uint8

const (
	// ByCheck asks the provider for the work's status (a poll, a check).
	ByCheck Means = iota + 1
	// ByReconnect schedules a re-attach; it spends the reconnect budget.
	ByReconnect
	// ByReattach re-attached to the work (a response, a harness thread):
	// nothing is generated again.
	ByReattach
	// ByContinue re-sends the request with the delivered output, which the
	// server continues; it spends the reconnect budget.
	ByContinue
	// ByStatus took the output from the completed work's status.
	ByStatus
	// ByRetry sends the request again from scratch; it spends the retry budget.
	ByRetry
	// ByCancel stops work at the provider so it stops billing.
	ByCancel
	// ByWait waits for the provider's quota and sends the same request
	// again; it spends no budget.
	ByWait
	// ByFailover sends the request to another provider of the node's
	// fallback list.
	ByFailover
)

func (m Means) String() string {
	return [...]string{"", "check", "reconnect", "re-attach", "continue", "status", "retry", "cancel", "wait", "failover"}[m]
}

// SpendsRetry reports whether the step consumes the node's retry budget.
func (c Code) SpendsRetry() bool { return c.Role == RoleStep && c.Means == ByRetry }

// SpendsReconnect reports whether the step consumes the reconnect budget
// (consecutive re-attaches and continues without progress).
func (c Code) SpendsReconnect() bool {
	return c.Role == RoleStep && (c.Means == ByReconnect || c.Means == ByContinue)
}

// IsFault reports whether a record of this code counts as a fault of its
// node (a verdict names it).
func (c Code) IsFault() bool { return c.Noun != "" }

// The attributes the executor's fault, step and failure records carry.
var (
	faultAttrs = Keys(KeyClass, KeyError, KeySilent, KeyStatus, KeyRetryAfter, KeyRef, KeyCursor)
	stepAttrs  = Keys(KeyClass, KeyDelay, KeyBackoffStep, KeyRetriesLeft, KeyReconnectsLeft)
	retryAttrs = Keys(KeyClass, KeyDelay, KeyBackoffStep, KeyRetriesLeft, KeyReconnectsLeft, KeyReplays,
		KeyRegeneratedBytes, KeyRegeneratedDeltas)
	failAttrs = Keys(KeyClass, KeyStatus, KeyError, KeyTried, KeyOutputBytes)
)

// The catalogue. Group by hundreds: 1xx transport recovery, 2xx Responses
// resume, 3xx harness, 4xx run-level, 5xx limits and hostile input, 6xx quota
// and failover, 9xx node outcome.
var (
	DisconnectDetected = Code{ID: "NR101", Name: "disconnect_detected", Level: slog.LevelWarn, Role: RoleFault, Noun: "disconnect", Attrs: faultAttrs,
		Summary: "the stream ended without terminal evidence; recovery begins"}
	ReconnectScheduled = Code{ID: "NR102", Name: "reconnect_scheduled", Level: slog.LevelWarn, Role: RoleStep, Means: ByReconnect, Attrs: stepAttrs,
		Summary: "a reconnect is scheduled: attempt k of n, delay and cause"}
	RetryStarted = Code{ID: "NR103", Name: "retry_started", Level: slog.LevelWarn, Role: RoleStep, Means: ByRetry, Attrs: retryAttrs,
		Summary: "the request is sent again from scratch, consuming the retry budget"}
	RateLimitWait = Code{ID: "NR104", Name: "rate_limit_wait", Level: slog.LevelWarn, Role: RoleFault, Noun: "rate limit", Attrs: faultAttrs,
		Summary: "the provider said 429; waiting its Retry-After"}
	ProviderError = Code{ID: "NR105", Name: "provider_error", Level: slog.LevelWarn, Role: RoleFault, Noun: "server error", Attrs: faultAttrs,
		Summary: "the provider answered with a transient error (5xx)"}
	ConnectFailed = Code{ID: "NR106", Name: "connect_failed", Level: slog.LevelWarn, Role: RoleFault, Noun: "connect failure", Attrs: faultAttrs,
		Summary: "no connection could be made; the request never left"}
	IdleTimeout = Code{ID: "NR107", Name: "idle_timeout", Level: slog.LevelWarn, Role: RoleFault, Noun: "idle timeout", Attrs: faultAttrs,
		Summary: "no data arrived within the profile's idle window"}
	Recovered = Code{ID: "NR108", Name: "recovered", Level: slog.LevelInfo, Role: RoleOutcome, Ends: "completed after recovery",
		Attrs: Keys(KeyRecoverySteps, KeyAttempts, KeyContinues, KeyRetries, KeyResentPrefixBytes, KeyResentPrefixDeltas,
			KeyRegeneratedBytes, KeyRegeneratedDeltas),
		Summary: "the node completed after one or more recovery steps"}
	IdleCutLearnt = Code{ID: "NR109", Name: "idle_cut_learnt", Level: slog.LevelWarn, Role: RoleRecord, Attrs: Keys(KeyCutAfter, KeyPollFor),
		Summary: "a stream was cut after N s of silence: an intermediary likely cuts idle streams; the node now polls sooner"}
	ContinueScheduled = Code{ID: "NR110", Name: "continue_scheduled", Level: slog.LevelWarn, Role: RoleStep, Means: ByContinue,
		Attrs: Keys(KeyClass, KeyDelay, KeyBackoffStep, KeyRetriesLeft, KeyReconnectsLeft, KeyContinuedFrom, KeyContinuedFromDeltas,
			KeyResentPrefixBytes, KeyRegeneratedBytes),
		Summary: "a dropped chat stream is continued from its journaled output (continued_from bytes) as the final assistant message; nothing delivered is generated again"}
	ContinueAccepted = Code{ID: "NR111", Name: "continue_accepted", Level: slog.LevelInfo, Role: RoleRecord, Attrs: Keys(KeyPrefixRepeated, KeyContinuedFrom),
		Summary: "the server continued the answer: it returned only the continuation, or repeated the prefix, which was stripped"}
	ContinueRejected = Code{ID: "NR112", Name: "continue_rejected", Level: slog.LevelWarn, Role: RoleStep, Means: ByRetry, Attrs: retryAttrs,
		Summary: "the server rejected the continuation form (HTTP 400/422): continuation is off for this provider for the rest of the run; retrying from scratch"}
	ContinueRealigned = Code{ID: "NR113", Name: "continue_realigned", Level: slog.LevelWarn, Role: RoleRecord,
		Summary: "the continuation did not start with the bytes of a character cut short; the output was rewritten from the whole-character prefix"}

	Reattached = Code{ID: "NR201", Name: "reattached", Level: slog.LevelInfo, Role: RoleStep, Means: ByReattach, Attrs: Keys(KeyRef, KeySeq),
		Summary: "re-attached to the response from sequence N; nothing regenerated"}
	PollingStarted = Code{ID: "NR202", Name: "polling_started", Level: slog.LevelInfo, Role: RoleStep, Means: ByCheck,
		Attrs:   Keys(KeyRef, KeySeq, KeyState, KeyIdle, KeyInterval),
		Summary: "the stream was silent; switched to polling the response status"}
	StatusChecked = Code{ID: "NR203", Name: "status_checked", Level: slog.LevelInfo, Role: RoleStep, Means: ByCheck,
		Attrs:   Keys(KeyRef, KeySeq, KeyState, KeyPolls, KeyReason, KeySince, KeyError),
		Summary: "checked the response status before deciding"}
	StuckCancelled = Code{ID: "NR204", Name: "stuck_cancelled", Level: slog.LevelWarn, Role: RoleFault, Noun: "stuck response", Attrs: Keys(KeyRef),
		Summary: "the response made no progress past the bound and was cancelled"}
	FellBackToRetry = Code{ID: "NR205", Name: "fell_back_to_retry", Level: slog.LevelWarn, Role: RoleStep, Means: ByRetry, Attrs: retryAttrs,
		Summary: "the response could not be resumed; retrying from scratch"}
	OutputFromStatus = Code{ID: "NR206", Name: "output_from_status", Level: slog.LevelInfo, Role: RoleStep, Means: ByStatus, Attrs: Keys(KeyBytesFromStatus),
		Summary: "the response had completed; output taken from its status"}
	ResponseCreated = Code{ID: "NR207", Name: "response_created", Level: slog.LevelInfo, Role: RoleRecord, Attrs: Keys(KeyRef),
		Summary: "the provider assigned a response id"}
	WorkCancelled = Code{ID: "NR208", Name: "work_cancelled", Level: slog.LevelInfo, Role: RoleStep, Means: ByCancel, Attrs: Keys(KeyRef),
		Summary: "the response was cancelled at the provider so it stops billing (the node failed, is retried from scratch, or a person asked)"}
	WorkDetached = Code{ID: "NR209", Name: "work_detached", Level: slog.LevelWarn, Role: RoleRecord, Attrs: Keys(KeyRef, KeyCursor),
		Summary: "interrupted: the response keeps running at the provider; resume re-attaches, cancel stops it"}
	// CrossWorkerResume: a distributed run (Temporal) moved the node to another worker.
	CrossWorkerResume = Code{ID: "NR210", Name: "cross_worker_resume", Level: slog.LevelWarn, Role: RoleFault, Noun: "lost worker",
		Attrs:   Keys(KeyRef, KeyLostCursor, KeyLostAttempt, KeyAction, KeyOutputBytes),
		Summary: "the node's worker was lost; another worker picks it up from the heartbeated cursor: re-attached by response id (the generated part re-read from the provider), harness thread resumed, a chat answer continued from the output its last heartbeat carried (output_bytes), or retried within its budget"}

	ThreadStarted = Code{ID: "NR301", Name: "thread_started", Level: slog.LevelInfo, Role: RoleRecord, Attrs: Keys(KeyThreadID),
		Summary: "the harness reported its thread id"}
	HarnessRetrying = Code{ID: "NR302", Name: "harness_retrying", Level: slog.LevelInfo, Role: RoleRecord, HidesOutput: true, Attrs: Keys(KeyThreadID, KeyInARow),
		Summary: "the harness is retrying on its own (informational)"}
	ThreadResumed = Code{ID: "NR303", Name: "thread_resumed", Level: slog.LevelWarn, Role: RoleStep, Means: ByReattach, Attrs: Keys(KeyThreadID),
		Summary: "the harness thread is resumed by its recorded id"}
	ThreadMismatch = Code{ID: "NR304", Name: "thread_mismatch", Level: slog.LevelError, Role: RoleFault, Noun: "thread mismatch",
		Attrs:   Keys(KeyWant, KeyGot, KeyExitCode, KeyStderr),
		Summary: "a resume came back with a different thread id"}
	HarnessFailed = Code{ID: "NR305", Name: "harness_failed", Level: slog.LevelWarn, Role: RoleFault, HidesOutput: true, Noun: "harness failure",
		Attrs:   Keys(KeyThreadID, KeyClass, KeyStatus, KeyExitCode, KeySignal, KeyStderr),
		Summary: "the harness reported a failed turn or exited"}
	// ThreadDropped: the harness keeps no resumable record of a turn that
	// failed before its first model response (Gemini CLI rolls it back).
	ThreadDropped = Code{ID: "NR306", Name: "thread_dropped", Level: slog.LevelWarn, Role: RoleFault, HidesOutput: true, Noun: "dropped thread",
		Attrs:   Keys(KeyThreadID, KeyEffects, KeyExitCode, KeyStderr),
		Summary: "a resume found the thread's record but the harness had dropped its failed turn: nothing to resume; the prompt is started again under the same thread id, from the retry budget"}

	RunStarted = Code{ID: "NR401", Name: "run_started", Level: slog.LevelInfo, Role: RoleRecord, Attrs: Keys(KeyGraph, KeyProfile, KeyNodes, KeyResumed),
		Summary: "a run started (or was resumed: resumed true)"}
	RunFinished = Code{ID: "NR402", Name: "run_finished", Level: slog.LevelInfo, Role: RoleRecord, Attrs: Keys(KeyRunStatus),
		Summary: "a run finished"}
	RunInterrupted = Code{ID: "NR403", Name: "run_interrupted", Level: slog.LevelWarn, Role: RoleRecord,
		Summary: "the run was interrupted (signal) and can be resumed"}
	NodeSkipped = Code{ID: "NR404", Name: "node_skipped", Level: slog.LevelWarn, Role: RoleOutcome, Ends: "skipped: a node it needs did not complete", Attrs: Keys(KeyCause),
		Summary: "a node was skipped because a node it needs failed"}
	BreakerOpen = Code{ID: "NR405", Name: "breaker_open", Level: slog.LevelError, Role: RoleFault, Noun: "open-breaker refusal", Attrs: faultAttrs,
		Summary: "the provider's circuit breaker is open; failing fast"}
	// NodeResumed: `noderun resume` picked up a node that an earlier runner
	// left unfinished (interrupted, killed, or stopped by a full disk).
	NodeResumed = Code{ID: "NR406", Name: "node_resumed", Level: slog.LevelWarn, Role: RoleFault, Noun: "interruption",
		Attrs:   Keys(KeyAction, KeyRef, KeyCursor, KeyOutputBytes),
		Summary: "a resumed run picks up a node its earlier runner left unfinished (interrupted, killed, disk full): re-attached, checked, continued or retried as its journal allows"}
	// CacheHit is a record, not an outcome: the node completed as any
	// other (no fault, nothing to recover); what is kept is where its output
	// came from and what that call cost, for `diagnose` to count as saved.
	CacheHit = Code{ID: "NR407", Name: "cache_hit", Level: slog.LevelInfo, Role: RoleRecord,
		Attrs: Keys(KeyCacheKey, KeyFromRun, KeyFromNode, KeyFromJournal, KeyModel,
			KeySavedInput, KeySavedOutput, KeySavedReasoning, KeySavedCacheRead, KeySavedCacheWrite),
		Summary: "the node's request was unchanged since a completed run (same cache key): its output is that run's node's, taken from the journal (or --cache-from) without a provider call; the saved_* tokens are what that call cost"}

	LimitExceeded = Code{ID: "NR501", Name: "limit_exceeded", Level: slog.LevelError, Role: RoleOutcome, Ends: "an input or answer exceeded a limit", Noun: "exceeded limit", Attrs: failAttrs,
		Summary: "an input or an answer exceeded a documented bound (graph file, prompt, stream event, a node's answer, an attempt's events); not retried"}
	ProtocolViolation = Code{ID: "NR502", Name: "protocol_violation", Level: slog.LevelError, Role: RoleOutcome, Ends: "the server's answer is not the protocol", Noun: "protocol violation", Attrs: failAttrs,
		Summary: "the server's answer is not the protocol (content type, undecodable event, redirect); not retried"}
	JournalUnavailable = Code{ID: "NR503", Name: "journal_unavailable", Level: slog.LevelError, Role: RoleOutcome, Ends: "the journal could not record", Attrs: failAttrs,
		Summary: "the journal cannot record (disk full, read-only): the node stops, resumable work is left resumable"}

	// QuotaWait is a record: the node waited for its provider's quota
	// before sending, as the pace learnt from the provider's rate-limit
	// headers (or the graph's limits) required. Not a fault: the provider
	// was asked nothing it refused.
	QuotaWait = Code{ID: "NR601", Name: "quota_wait", Level: slog.LevelDebug, Role: RoleRecord, Attrs: Keys(KeyWaited, KeyProvider),
		Summary: "the node waited for its provider's quota before sending (pacing by the learnt or declared rate limits); time waited is counted apart from time lost to faults"}
	// QuotaParked is a step: a 429 parks the node until the quota resets,
	// then the same request goes again; no retry is spent.
	QuotaParked = Code{ID: "NR602", Name: "quota_parked", Level: slog.LevelWarn, Role: RoleStep, Means: ByWait, Attrs: Keys(KeyClass, KeyDelay, KeyRetryAfter, KeyProvider),
		Summary: "the provider answered 429: the node is parked until its Retry-After and then sends the same request again, spending no retry; every node of that provider waits with it"}
	// FailedOver is a step: the node's provider is unavailable, and the
	// node moves to the next provider of its fallback list.
	FailedOver = Code{ID: "NR603", Name: "failed_over", Level: slog.LevelWarn, Role: RoleStep, Means: ByFailover, Attrs: Keys(KeyClass, KeyFrom, KeyTo, KeyReason, KeyContinuedFrom, KeyContinuedAttempt, KeyRegeneratedBytes),
		Summary: "the node's provider is unavailable (breaker open, outage past the recovery deadline, 404 model not found, overloaded past the retry budget): the node moves to the next provider of its fallback list, from scratch or continuing its partial answer (fallback_continue)"}

	NodeFailed = Code{ID: "NR901", Name: "node_failed", Level: slog.LevelError, Role: RoleOutcome, Attrs: failAttrs,
		Summary: "the node failed: class and what was tried"}
	DeterministicError = Code{ID: "NR902", Name: "deterministic_error", Level: slog.LevelError, Role: RoleOutcome, Ends: "rejected by the provider", Noun: "rejection", Attrs: failAttrs,
		Summary: "the provider rejected the request; it is not retried"}
	BudgetExhausted = Code{ID: "NR903", Name: "budget_exhausted", Level: slog.LevelError, Role: RoleOutcome, Ends: "the retry budget is spent", Attrs: failAttrs,
		Summary: "the retry or reconnect budget is spent"}
	DeadlineExceeded = Code{ID: "NR904", Name: "deadline_exceeded", Level: slog.LevelError, Role: RoleOutcome, Ends: "the recovery deadline passed", Attrs: failAttrs,
		Summary: "the profile's recovery deadline passed"}
	UnsafeReplayRefused = Code{ID: "NR905", Name: "unsafe_replay_refused", Level: slog.LevelError, Role: RoleOutcome, Ends: "not replayed, its request may have had side effects (side_effects: unsafe)", Attrs: failAttrs,
		Summary: "the request may have had side effects; not replayed"}
	NodeCanceled = Code{ID: "NR906", Name: "node_canceled", Level: slog.LevelWarn, Role: RoleOutcome, Ends: "interrupted", Attrs: failAttrs,
		Summary: "the node was interrupted (Ctrl-C, SIGTERM, its worker stopping): resumable"}
	NodeTimeout = Code{ID: "NR907", Name: "node_timeout", Level: slog.LevelError, Role: RoleOutcome, Ends: "its timeout passed", Noun: "node timeout", Attrs: failAttrs,
		Summary: "the node's timeout (its wall time, recovery included) passed; it is not retried"}
)

// Codes lists every code, in order, for docs and lookups.
func Codes() []Code {
	return []Code{
		DisconnectDetected, ReconnectScheduled, RetryStarted, RateLimitWait, ProviderError, ConnectFailed, IdleTimeout, Recovered, IdleCutLearnt,
		ContinueScheduled, ContinueAccepted, ContinueRejected, ContinueRealigned,
		Reattached, PollingStarted, StatusChecked, StuckCancelled, FellBackToRetry, OutputFromStatus, ResponseCreated, WorkCancelled, WorkDetached, CrossWorkerResume,
		ThreadStarted, HarnessRetrying, ThreadResumed, ThreadMismatch, HarnessFailed, ThreadDropped,
		RunStarted, RunFinished, RunInterrupted, NodeSkipped, BreakerOpen, NodeResumed, CacheHit,
		LimitExceeded, ProtocolViolation, JournalUnavailable,
		QuotaWait, QuotaParked, FailedOver,
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
