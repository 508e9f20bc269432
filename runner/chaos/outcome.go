package chaos

import (
	"slices"
	"strings"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// Outcome is how a target node ended, as its journal tells: completed, or
// failed how. Cases state what they expect in outcomes, not in diagnostic
// codes, so that a graph is judged by what happened to its node, whichever
// records said so on the way.
type Outcome string

// Outcomes.
const (
	OutcomeCompleted Outcome = "completed"
	// OutcomeUnsafeRefused: a side_effects: unsafe node was held rather than
	// sent again (unsafe_replay_refused). Any case accepts it of an unsafe node.
	OutcomeUnsafeRefused Outcome = "unsafe_refused"
	// OutcomeBudgetSpent: recovery gave up with its retry or reconnect budget spent.
	OutcomeBudgetSpent Outcome = "budget_spent"
	// OutcomeDeadline: recovery gave up at the profile's recovery deadline.
	OutcomeDeadline Outcome = "deadline_passed"
	// OutcomeTimedOut: the node's own timeout passed.
	OutcomeTimedOut Outcome = "timed_out"
	// OutcomeRejected: the provider rejected the request; it is not retried.
	OutcomeRejected    Outcome = "rejected"
	OutcomeLimit       Outcome = "limit_exceeded"
	OutcomeProtocol    Outcome = "protocol_violation"
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeSkipped     Outcome = "skipped"
	// OutcomeFailed: failed, and no record says more specifically why.
	OutcomeFailed Outcome = "failed"
	// OutcomeUnfinished: the journal shows the node neither done nor failed.
	OutcomeUnfinished Outcome = "unfinished"
)

// failureOutcomes are the outcomes a case that expects a failure may name.
func failureOutcomes() []Outcome {
	return []Outcome{OutcomeUnsafeRefused, OutcomeBudgetSpent, OutcomeDeadline, OutcomeTimedOut, OutcomeRejected,
		OutcomeLimit, OutcomeProtocol, OutcomeFailed}
}

// outcomeOf is how nd ended, and the record that says so (the zero Code
// when it completed, or when no outcome record says why it failed).
func outcomeOf(nd *ledger.Node) (Outcome, diagnostics.Code) {
	switch nd.State {
	case journal.NodeCompleted:
		return OutcomeCompleted, diagnostics.Code{}
	case journal.NodeSkipped:
		return OutcomeSkipped, diagnostics.Code{}
	case journal.NodeFailed, journal.NodeAttention, journal.NodeCanceled:
	default:
		return OutcomeUnfinished, diagnostics.Code{}
	}
	// The most specific outcome record, as the ledger's verdict reads it.
	rec, _ := nd.Outcome()
	out := rec.Code
	switch out {
	case diagnostics.UnsafeReplayRefused:
		return OutcomeUnsafeRefused, out
	case diagnostics.BudgetExhausted:
		return OutcomeBudgetSpent, out
	case diagnostics.DeadlineExceeded:
		return OutcomeDeadline, out
	case diagnostics.NodeTimeout:
		return OutcomeTimedOut, out
	case diagnostics.DeterministicError:
		return OutcomeRejected, out
	case diagnostics.LimitExceeded:
		return OutcomeLimit, out
	case diagnostics.ProtocolViolation:
		return OutcomeProtocol, out
	case diagnostics.NodeCanceled, diagnostics.JournalUnavailable:
		return OutcomeInterrupted, out
	}
	if nd.State == journal.NodeCanceled {
		return OutcomeInterrupted, out
	}
	return OutcomeFailed, out
}

// tally is what a node's records say recovery did, counted by what each
// code declares (Code.SpendsRetry, SpendsReconnect, Means, Role), so that
// chaos counts a step as the executor spent it: a rejected continuation
// (continue_rejected) is a retry like any other.
type tally struct {
	seen       []diagnostics.Code // in order, without repeats
	replays    int                // retries that may repeat what an earlier attempt did (the counts are the ledger's)
	ownRetries int                // the harness's own retries, each of which may generate the turn again
	reattached bool               // a re-attach step (for a harness: a resumed thread, a new turn)
	met        []diagnostics.Class
	last       diagnostics.Code // the last fault or step
}

func tallyOf(nd *ledger.Node) tally {
	var t tally
	for _, r := range nd.Records {
		c := r.Code
		if !slices.Contains(t.seen, c) {
			t.seen = append(t.seen, c)
		}
		switch {
		case c.SpendsRetry():
			// a retry that does not say whether it replays counts as one
			if replays, ok := diagnostics.KeyReplays.Of(r.Record); !ok || replays {
				t.replays++
			}
		case c == diagnostics.HarnessRetrying:
			t.ownRetries++
		}
		if c.Role == diagnostics.RoleStep && c.Means == diagnostics.ByReattach {
			t.reattached = true
		}
		if c.IsFault() {
			if class, ok := diagnostics.KeyClass.Of(r.Record); ok && !slices.Contains(t.met, class) {
				t.met = append(t.met, class)
			}
		}
		if c.IsFault() || c.Role == diagnostics.RoleStep {
			t.last = c
		}
	}
	return t
}

// ids are the codes' IDs, for the report.
func ids(codes []diagnostics.Code) []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = c.ID
	}
	return out
}

// shows reports whether the tally has a record of the code spec names: an ID
// or a name, or alternatives "NR903|NR904" of which any one will do. ok is
// false when spec names a code this version does not know.
func (t tally) shows(spec string) (shown, ok bool) {
	for _, alt := range strings.Split(spec, "|") {
		c, known := diagnostics.Lookup(strings.TrimSpace(alt))
		if !known {
			return false, false
		}
		shown = shown || slices.Contains(t.seen, c)
	}
	return shown, true
}
