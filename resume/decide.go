// Package resume holds the recovery decision: given what went wrong and what
// the provider and the node allow, what to do next. It is a pure function so
// that the executor, `noderun resume` and the table test all agree.
package resume

import (
	"fmt"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
)

// Action is the next recovery step.
type Action string

const (
	// ActResume re-attaches to the recorded work (response id + cursor, or
	// harness thread id). Nothing is generated twice.
	ActResume Action = "resume"
	// ActCheck asks the provider for the work's status before deciding.
	ActCheck Action = "check"
	// ActContinue re-sends a chat request with the output delivered so far as
	// the final assistant message, so the server continues the answer
	// instead of starting over: nothing delivered is generated again.
	ActContinue Action = "continue"
	// ActRetry sends the request again from scratch, consuming the retry budget.
	ActRetry Action = "retry"
	// ActPark waits for the provider's quota (a 429's Retry-After) and
	// takes the same step again; it spends no budget.
	ActPark Action = "park"
	// ActFailover moves the node to the next provider of its fallback list.
	ActFailover Action = "failover"
	// ActFail gives up, with an explanation.
	ActFail Action = "fail"
)

// SideEffects is what a node's request may do beyond generating text.
type SideEffects string

const (
	SideNone       SideEffects = "none"       // replaying it is harmless
	SideIdempotent SideEffects = "idempotent" // replaying it repeats nothing
	SideUnsafe     SideEffects = "unsafe"     // replaying it may repeat its effects
)

// Input is everything the decision depends on.
type Input struct {
	Class diagnostics.Class
	// CanResume: the provider can re-attach and a ref (response or thread id) is recorded.
	CanResume bool
	// CanCheck: the provider can report status and a ref is recorded.
	CanCheck bool
	// CanContinue: the provider can continue a partial answer (a chat server
	// with a continuation form that it has not rejected) and some output was
	// delivered.
	CanContinue bool
	// ContinueRejected: the failed step was a continuation that the server
	// rejected (HTTP 400/422): the form is not supported, the request is.
	ContinueRejected bool
	// Checked: the status was already checked since the last stream attempt.
	Checked bool
	// Dispatched: the request may have reached the provider in some attempt
	// (false only when every attempt provably never left, e.g. connection refused).
	Dispatched  bool
	SideEffects SideEffects
	ResumesLeft int
	RetriesLeft int
	// DeadlineExceeded: the profile's recovery deadline has passed.
	DeadlineExceeded bool
	// Status is the HTTP status of the failure, 0 if none.
	Status int
	// Paced: the node's provider is paced by its quota, so a 429 parks the
	// node instead of spending a retry.
	Paced bool
	// BreakerOpen: the provider's circuit breaker refused the step.
	BreakerOpen bool
	// CanFailover: the node has a fallback provider left to move to.
	CanFailover bool
}

// Decision is the action with the diagnostic code that announces it and a
// sentence an operator can act on.
type Decision struct {
	Action Action
	Code   diagnostics.Code
	Reason string
}

// Decide returns the next recovery step. Preference order: check the status
// (cheap, and it may show the work already finished), resume (regenerates
// nothing), continue (regenerates nothing, re-sends the request with the
// partial answer), retry (regenerates everything, and only when replay is
// safe), fail with an explanation.
//
// A node that has a fallback provider moves to it (ActFailover) instead of
// failing when its provider is unavailable: its breaker is open, the
// recovery deadline or the retry budget ran out on a transient failure, or
// the provider does not know the model (404). An unsafe node never moves.
func Decide(in Input) Decision {
	failover := in.CanFailover && in.SideEffects != SideUnsafe
	if failover && in.BreakerOpen {
		return Decision{ActFailover, diagnostics.FailedOver, "the provider's circuit breaker is open"}
	}
	d := decide(in)
	if failover && d.Action == ActFail && unavailable(in, d.Code) {
		return Decision{ActFailover, diagnostics.FailedOver, d.Reason}
	}
	return d
}

// unavailable reports whether a failure with code says the provider cannot
// do the work now, so that another one may: not a request it rejects, nor
// an interruption.
func unavailable(in Input, code diagnostics.Code) bool {
	switch code {
	case diagnostics.DeadlineExceeded, diagnostics.BudgetExhausted:
		return in.Class.Transient()
	case diagnostics.DeterministicError:
		return in.Status == 404 // the model is withdrawn, or this provider never had it
	}
	return false
}

func decide(in Input) Decision {
	// A rejected continuation is a client error about the form, not the
	// request: it falls back to a retry from scratch.
	rejected := in.ContinueRejected && in.Class == diagnostics.ClassDeterministic
	switch {
	case in.Class == diagnostics.ClassCanceled:
		return Decision{ActFail, diagnostics.NodeCanceled, "the node was canceled"}
	case in.Class == diagnostics.ClassTimeout:
		return Decision{ActFail, diagnostics.NodeTimeout, "the node's timeout passed; raise timeout in the graph if the work needs longer"}
	case in.Class == diagnostics.ClassDeterministic && !rejected:
		return Decision{ActFail, diagnostics.DeterministicError,
			"the provider rejected the request, so it is not retried: sending it again would fail the same way"}
	case in.Class == diagnostics.ClassJournal:
		return Decision{ActFail, diagnostics.JournalUnavailable,
			"the journal cannot record, so no more provider work is done: free space (or fix the journal file), then `noderun resume` continues"}
	case in.Class == diagnostics.ClassProtocol:
		return Decision{ActFail, diagnostics.ProtocolViolation,
			"the server's answer is not the protocol, so it is not retried: sending it again would get the same answer; check base_url"}
	case in.Class == diagnostics.ClassLimit:
		return Decision{ActFail, diagnostics.LimitExceeded,
			"the answer exceeded a bound that keeps memory bounded, so it is not retried (see docs/diagnostics.md for the limits)"}
	case !in.Class.Transient() && !rejected:
		return Decision{ActFail, diagnostics.NodeFailed, fmt.Sprintf("error class %q is not recoverable", in.Class)}
	case in.DeadlineExceeded:
		return Decision{ActFail, diagnostics.DeadlineExceeded,
			"the profile's recovery deadline passed without the provider recovering"}
	case in.Class == diagnostics.ClassRateLimited && in.Paced:
		// The provider refused the request before doing anything: sending
		// it again when the quota allows repeats nothing, even for an
		// unsafe node, and is no retry.
		return Decision{ActPark, diagnostics.QuotaParked, "parked until the provider's quota resets; no retry spent"}
	}
	// A stuck, gone or cancelled response can only be retried; status and
	// resume would find it so again.
	if in.Class.Transient() && !in.Class.Restarts() {
		if in.CanCheck && !in.Checked {
			return Decision{ActCheck, diagnostics.StatusChecked, "checking the provider's status before deciding"}
		}
		if in.CanResume && in.ResumesLeft > 0 {
			return Decision{ActResume, diagnostics.ReconnectScheduled,
				fmt.Sprintf("re-attaching to the recorded work (%s left)", textfit.Count(in.ResumesLeft, "reconnect"))}
		}
		// A continue re-sends the request, so an unsafe node is not
		// continued; the reconnect budget bounds it like re-attaching.
		if in.CanContinue && in.ResumesLeft > 0 && in.SideEffects != SideUnsafe {
			return Decision{ActContinue, diagnostics.ContinueScheduled,
				fmt.Sprintf("continuing the answer from its delivered output (%s left)", textfit.Count(in.ResumesLeft, "reconnect"))}
		}
	}
	if in.SideEffects == SideUnsafe && in.Dispatched {
		return Decision{ActFail, diagnostics.UnsafeReplayRefused, unsafeReason(in)}
	}
	if in.RetriesLeft > 0 {
		code := diagnostics.RetryStarted
		switch {
		case rejected:
			return Decision{ActRetry, diagnostics.ContinueRejected,
				fmt.Sprintf("the server rejected the continuation form, so continuation is off for this provider; sending the request again from scratch (%s left after this)", textfit.Count(in.RetriesLeft-1, "retry"))}
		case in.Class.Restarts() || in.CanResume || in.CanContinue:
			code = diagnostics.FellBackToRetry
		}
		return Decision{ActRetry, code, fmt.Sprintf("sending the request again (%s left after this)", textfit.Count(in.RetriesLeft-1, "retry"))}
	}
	return Decision{ActFail, diagnostics.BudgetExhausted, "the retry budget is spent (and nothing is left to re-attach to)"}
}

func unsafeReason(in Input) string {
	why := "the request may already have had side effects and the node is marked side_effects: unsafe, so it is not sent again"
	if in.CanResume {
		why = "the reconnect budget is spent; " + why
	}
	return why + "; inspect its journal (noderun show RUN NODE), then rerun it with --retry NODE, or mark it side_effects: idempotent if replay is harmless"
}
