package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/resume"
)

// NodeCursor is where a node's work stands, in the form a supervisor that
// may move the node to another machine keeps it (a Temporal activity
// heartbeat): enough to enter the recovery decision `noderun resume` makes
// after a crash, without the journal of the machine that was lost.
type NodeCursor struct {
	// Ref is the response id or harness thread id of the current attempt.
	Ref string `json:"ref,omitempty"`
	// Seq is the last provider sequence number received (-1: none).
	Seq int64 `json:"seq"`
	// Attempt counts the node's attempts so far, on every machine.
	Attempt int `json:"attempt"`
	// RetriesUsed is how much of the node's retry budget is spent.
	RetriesUsed int `json:"retries_used"`
	// Resumes counts consecutive re-attaches without progress.
	Resumes int `json:"resumes"`
	// Bytes is the output of the current attempt so far.
	Bytes int `json:"bytes"`
	// Step is the last recovery step ("reconnecting 1/8 in 5ms (...)"), or
	// the response just started, for people; empty while healthy.
	Step string `json:"step,omitempty"`
	// Recovery is the recovery step under way, as data; nil while healthy.
	Recovery *RecoveryStep `json:"recovery,omitempty"`
	// Output is the current attempt's output so far, for a node whose
	// provider can continue a partial answer (a chat server with a
	// continuation form): the machine that picks the node up continues the
	// answer from it, as a local resume does from the journal. Empty for
	// other nodes, and past MaxCursorOutput (the node is then retried from
	// scratch, within its budget).
	Output string `json:"output,omitempty"`
}

// MaxCursorOutput bounds NodeCursor.Output: a heartbeat is a Temporal
// payload (at most 2 MB), sent again and again while the node streams.
const MaxCursorOutput = 512 << 10

// NodeOptions configure RunNode. Options.RunID names the run the node
// belongs to; Options.Parallel is ignored.
type NodeOptions struct {
	Options
	// Needs are the outputs of the node's needs.
	Needs map[string]string
	// Failed names the needs that failed under continue_on_failure: their
	// output is "" and {{ failed "id" }} is true.
	Failed []string
	// From is where the node stood when the machine running it was lost
	// (its last heartbeat); nil for a fresh start.
	From *NodeCursor
	// Force replays the node even if its request may have had side effects
	// (the operator's --retry).
	Force bool
	// Heartbeat, if set, is told the node's cursor on healthy data (often:
	// throttle it) and on every recovery step (step is true).
	Heartbeat func(c NodeCursor, step bool)
}

// RunNode executes one node of g on its own, as a worker of a distributed
// run does: the journal gets the node's attempts, chunks and diagnostics
// (the run is created there if this machine has not seen it), and the
// recovery loop is the one local runs use. When From is set the node picks
// up where a lost machine left it, by the same decision as Resume: a
// response is checked and re-attached by id, re-reading its generated part
// from the provider since this machine has no journal of it; a harness
// thread is resumed; a chat node is retried within its budget; a node whose
// replay is unsafe needs attention (State NodeAttention) unless Force.
//
// Node failures are in the result; the error is for the run itself
// (unknown node, bad configuration, journal errors).
func RunNode(ctx context.Context, g *Graph, nodeID string, opts NodeOptions) (*NodeResult, error) {
	if err := checkGraph(g); err != nil {
		return nil, err
	}
	n := g.Node(nodeID)
	if n == nil {
		return nil, &UnknownNodeError{Op: "node", RunID: opts.RunID, Node: nodeID}
	}
	if opts.RunID == "" {
		return nil, errors.New("runner: RunNode needs a run id")
	}
	r, closeProvs, err := newRunState(ctx, g, &opts.Options)
	if err != nil {
		return nil, err
	}
	defer closeProvs()
	if r.inputs, err = g.ResolveInputsContext(ctx, opts.Inputs, opts.MaxInputBytes); err != nil {
		return nil, err
	}
	if err := r.ensureRun(ctx); err != nil {
		return nil, err
	}
	for id, out := range opts.Needs {
		r.outputs[id] = out
	}
	for _, id := range opts.Failed {
		r.results[id] = &NodeResult{ID: id, State: journal.NodeFailed}
	}
	r.beat = opts.Heartbeat
	e, d, err := r.entryFromCursor(ctx, n, opts.From, opts.Force)
	if err != nil {
		return nil, err
	}
	if d.Action == resume.ActFail {
		reason := d.Reason
		r.diag(ctx, n.ID, 0, diagnostics.New(d.Code, reason))
		_ = r.j.SetNodeState(bg(ctx), r.id, n.ID, journal.NodeAttention, reason)
		return &NodeResult{ID: n.ID, State: journal.NodeAttention, Reason: reason}, r.j.Flush(bg(ctx))
	}
	r.entries[n.ID] = e
	if opts.Force { // the operator asked for a call, not a cached answer
		r.cache.refresh[n.ID] = true
	}
	res := r.runNode(ctx, n)
	// Its end is reported as a local run's is (Options.OnProgress, an
	// Observer's gauges): a final state, once.
	r.record(res)
	if caps := r.provs[n.Provider].p.Capabilities(); res.State == journal.NodeFailed && opts.From != nil &&
		e.action == resume.ActResume && caps.Resume && !caps.Check {
		// A harness thread moved from a lost worker lives in that worker's
		// session store unless the store is shared: say so, not just "not found".
		hint := fmt.Sprintf("thread %s was started on a worker that was lost; resuming it needs that worker's session store "+
			"(CODEX_HOME for Codex, the provider's state_dir for Claude Code and Gemini CLI) shared with this one", opts.From.Ref)
		r.diag(ctx, n.ID, e.attempt, diagnostics.New(diagnostics.CrossWorkerResume, hint, diagnostics.KeyRef.Attr(opts.From.Ref)))
		res.Reason += "; " + hint
	}
	return res, r.j.Flush(bg(ctx))
}

// ensureRun records the run in this machine's journal unless it is there:
// the journal is this machine's share of a run that lives elsewhere, kept
// for inspection, so nobody holds its lock.
func (r *runState) ensureRun(ctx context.Context) error {
	if ok, err := r.j.HasRun(ctx, r.id); ok || err != nil {
		return err
	}
	err := r.j.CreateRun(bg(ctx), journal.Run{ID: r.id, Graph: r.g.Name, GraphPath: r.g.Path, GraphText: r.graphText,
		GraphHash: r.g.Hash, Profile: r.prof.Name, Status: journal.RunRunning, Started: time.Now()})
	if err != nil {
		if ok, _ := r.j.HasRun(ctx, r.id); ok {
			return nil // another node of the run created it meanwhile
		}
	}
	return err
}

// entryFromCursor works out where node n picks up from a lost machine's
// cursor, as entryFor does from the journal. A nil entry means a fresh start.
func (r *runState) entryFromCursor(ctx context.Context, n *Node, from *NodeCursor, force bool) (*entry, resume.Decision, error) {
	atts, err := r.j.Attempts(ctx, r.id, n.ID)
	if err != nil {
		return nil, resume.Decision{}, err
	}
	local := len(atts) // attempts of this node that this machine already journaled
	if from == nil || from.Attempt == 0 {
		return &entry{action: resume.ActRetry, fresh: true, attemptBase: -local}, resume.Decision{Action: resume.ActRetry}, nil
	}
	e := &entry{retriesUsed: from.RetriesUsed, cur: provider.Cursor{Ref: from.Ref, Seq: -1}, attemptBase: from.Attempt - local}
	if force {
		e.action, e.retriesUsed = resume.ActRetry, 0
		return e, resume.Decision{Action: resume.ActRetry}, nil
	}
	total := r.retryBudget(n)
	// The machine was lost mid-attempt: as after a crash, a dropped stream
	// whose request was sent; the budgets it had spent still count. A chat
	// answer is continued from the output its heartbeat carried.
	d := r.pickUp(n, "", from.Ref, from.Output, r.prof.Reconnects-from.Resumes, total-from.RetriesUsed)
	e.action = d.Action
	switch d.Action {
	case resume.ActFail:
		return e, d, nil
	case resume.ActContinue:
		// A new attempt here goes on from the heartbeated output, which
		// this machine's journal then holds.
		nAtt, err := r.j.BeginAttempt(bg(ctx), r.id, n.ID, journal.ModeRetry, n.Provider)
		if err != nil {
			return nil, resume.Decision{}, err
		}
		if err := r.journalPrefix(n.ID, nAtt, from.Output, 0); err != nil {
			return nil, resume.Decision{}, err
		}
		e.attempt, e.attemptBase, e.out = nAtt, from.Attempt-nAtt, from.Output
		r.diag(ctx, n.ID, nAtt, diagnostics.New(diagnostics.CrossWorkerResume,
			fmt.Sprintf("the worker running this node was lost after %d bytes of attempt %d; continuing the answer from the %d bytes its last heartbeat carried: what they hold is not generated again",
				from.Bytes, from.Attempt, len(from.Output)),
			diagnostics.KeyAction.Attr(string(d.Action)), diagnostics.KeyLostAttempt.Attr(from.Attempt), diagnostics.KeyOutputBytes.Attr(len(from.Output))))
		return e, d, nil
	case resume.ActRetry:
		r.diag(ctx, n.ID, 0, diagnostics.New(diagnostics.CrossWorkerResume,
			fmt.Sprintf("the worker running this node was lost after %d bytes of attempt %d; it cannot be re-attached, so it is retried here within its budget (%d of %s used)",
				from.Bytes, from.Attempt, from.RetriesUsed, textfit.Count(total, "retry")),
			diagnostics.KeyAction.Attr(string(d.Action)), diagnostics.KeyLostAttempt.Attr(from.Attempt)))
		return e, d, nil
	}
	// Re-attach (or check first) on this machine: the attempt continues, but
	// its journal is elsewhere, so the output is re-read from the provider
	// from the start (cursor -1) rather than from the lost cursor.
	mode := journal.ModeReattach
	if caps := r.provs[n.Provider].p.Capabilities(); caps.Resume && !caps.Check { // a harness thread
		mode = journal.ModeResume
	}
	nAtt, err := r.j.BeginAttempt(bg(ctx), r.id, n.ID, mode, n.Provider)
	if err != nil {
		return nil, resume.Decision{}, err
	}
	if err := r.j.SetAttemptRef(bg(ctx), r.id, n.ID, nAtt, from.Ref); err != nil {
		return nil, resume.Decision{}, err
	}
	e.attempt, e.attemptBase = nAtt, from.Attempt-nAtt
	msg := fmt.Sprintf("the worker running this node was lost (its last heartbeat: sequence %d, %d bytes); re-attaching to response %s from the heartbeated cursor and re-reading the generated part from the provider: nothing is regenerated",
		from.Seq, from.Bytes, from.Ref)
	if mode == journal.ModeResume {
		msg = fmt.Sprintf("the worker running this node was lost after %d bytes; resuming harness thread %s from its heartbeated cursor (its session store must be reachable from this worker, e.g. a shared CODEX_HOME)",
			from.Bytes, from.Ref)
	}
	r.diag(ctx, n.ID, nAtt, diagnostics.New(diagnostics.CrossWorkerResume, msg, diagnostics.KeyRef.Attr(from.Ref),
		diagnostics.KeyLostCursor.Attr(from.Seq), diagnostics.KeyLostAttempt.Attr(from.Attempt), diagnostics.KeyAction.Attr(string(d.Action))))
	return e, d, nil
}

// beat tells the supervisor, if any, where the node stands; step marks a
// recovery step (never throttled away by the caller).
func (x *nodeExec) beat(step string) { x.beatStep(step, nil) }

// beatStep is beat for a recovery step, which it carries as data too.
func (x *nodeExec) beatStep(step string, rs *RecoveryStep) {
	if x.run.beat == nil {
		return
	}
	c := NodeCursor{Ref: x.cur.Ref, Seq: x.cur.Seq, Attempt: x.attempt + x.attemptBase, RetriesUsed: x.total - x.retries,
		Resumes: x.resumes, Bytes: x.out.Len(), Step: step, Recovery: rs}
	if x.out.Len() <= MaxCursorOutput && x.prov.Capabilities().Continue && provider.CanContinue(x.prov, x.req) {
		c.Output = x.out.String() // no copy: a Builder's String shares its bytes, which later writes leave alone
	}
	x.run.beat(c, step != "")
}
