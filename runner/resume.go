package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/resume"
	"github.com/noderun/noderun/runner/graph"
)

// Resume continues a run that did not finish (its runner crashed, was killed
// or interrupted, or some nodes failed). Completed nodes keep their journaled
// outputs and do not run again. A node that was in flight continues by the
// best means its last attempt records — re-attach to its response from the
// cursor, resume its harness thread, or retry when its side effects allow —
// as decided by resume.Decide. A node whose request may have had effects and
// that cannot be resumed or checked is marked as needing attention with an
// explanation; force is the list of nodes the operator says to retry anyway
// (--retry NODE).
//
// The graph is the one journaled with the run, not the file as it is now.
// Its result and errors are Run's: ErrInterrupted (with the Result) when it
// is interrupted again.
func Resume(ctx context.Context, runID string, force []string, opts Options) (*Result, error) {
	r, release, err := reopen(ctx, runID, "retry", force, &opts)
	if err != nil {
		return nil, err
	}
	defer release()
	for _, id := range force { // the operator asked for a call, not a cached answer
		r.cache.refresh[id] = true
	}
	j, g := r.j, r.g
	if err := j.SetRunStatus(bg(ctx), runID, journal.RunRunning); err != nil {
		return nil, err
	}
	nodes, err := j.Nodes(ctx, runID)
	if err != nil {
		return nil, err
	}
	state := make(map[string]journal.Node, len(nodes))
	for _, n := range nodes {
		state[n.ID] = n
	}
	r.diag(ctx, "", 0, diagnostics.New(diagnostics.RunStarted, fmt.Sprintf("run %s resumed: graph %s, profile %s", r.id, g.Name, r.prof.Name), diagnostics.KeyResumed.Attr(true), diagnostics.KeyGraph.Attr(g.Name),
		diagnostics.KeyProfile.Attr(r.prof.Name)))
	var attention []string
	for _, n := range g.Nodes {
		res := &NodeResult{ID: n.ID, State: journal.NodePending}
		r.results[n.ID] = res
		if st, ok := state[n.ID]; ok && st.State == journal.NodeCompleted {
			res.State, res.Output = journal.NodeCompleted, st.Output
			r.outputs[n.ID] = st.Output
			continue
		}
		e, d, err := r.entryFor(ctx, n, slices.Contains(force, n.ID))
		if err != nil {
			return nil, err
		}
		if d.Action == resume.ActFail {
			res.State, res.Reason = journal.NodeAttention, d.Reason+"; to run it anyway: "+r.command("resume", runID, "--retry", n.ID)
			r.diag(ctx, n.ID, e.attempt, diagnostics.New(d.Code, d.Reason))
			attention = append(attention, n.ID)
			continue
		}
		r.entries[n.ID] = e
		if st := state[n.ID].State; e != nil && (st == journal.NodeRunning || st == journal.NodeCanceled) {
			// The interruption the node recovers from, journaled once
			// (the accounting's fault); NR906 said how the node stopped.
			attrs := []slog.Attr{diagnostics.KeyAction.Attr(string(e.action)), diagnostics.KeyOutputBytes.Attr(len(e.out))}
			if e.cur.Ref != "" {
				attrs = append(attrs, diagnostics.KeyRef.Attr(e.cur.Ref), diagnostics.KeyCursor.Attr(e.cur.Seq))
			}
			r.diag(ctx, n.ID, e.attempt, diagnostics.New(diagnostics.NodeResumed,
				fmt.Sprintf("picked up after %d bytes of attempt %d: %s", len(e.out), e.attempt, pickUpWords(e.action, e.cur.Ref)), attrs...))
		}
		if err := j.SetNodeState(bg(ctx), runID, n.ID, journal.NodePending, ""); err != nil {
			return nil, err
		}
	}
	for _, id := range attention {
		if err := j.SetNodeState(bg(ctx), runID, id, journal.NodeAttention, r.results[id].Reason); err != nil {
			return nil, err
		}
		r.progress(id, ProgressAttention, "needs attention: "+r.results[id].Reason)
	}
	return r.run(ctx)
}

// reopen rebuilds a journaled run (its graph as journaled, its profile unless
// opts names another, its providers) and takes its lock. nodes must all be
// nodes of the graph; flag names them in the error. release closes the
// providers and releases the lock.
func reopen(ctx context.Context, runID, op string, nodes []string, opts *Options) (r *runState, release func(), err error) {
	if opts.Journal == nil {
		return nil, nil, ErrNoJournal
	}
	j := opts.Journal
	run, err := j.Run(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	g, err := ParseGraphWith(run.GraphPath, run.GraphText, *opts)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: its journaled graph no longer parses: %w", runID, err)
	}
	if err := fillEnv(ctx, g, run.GraphText, opts); err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", runID, err)
	}
	for _, id := range nodes {
		if g.Node(id) == nil {
			return nil, nil, &UnknownNodeError{Op: op, RunID: runID, Node: id}
		}
	}
	if opts.Profile == "" {
		opts.Profile = run.Profile
	}
	opts.RunID = runID
	// A run another runner holds is refused before anything starts (its
	// providers, simulators); AcquireRun below settles a race.
	if le := j.Live(run); le != nil {
		return nil, nil, le
	}
	r, closeProvs, err := newRunState(ctx, g, opts)
	if err != nil {
		return nil, nil, err
	}
	r.inputs = run.Inputs // as resolved when the run started: the same prompts
	if err := j.AcquireRun(ctx, runID, r.owner); err != nil {
		closeProvs()
		return nil, nil, err // a *journal.LockedError names the live owner
	}
	if now, err := os.ReadFile(run.GraphPath); err == nil && !bytes.Equal(now, run.GraphText) {
		r.log.Warn(fmt.Sprintf("graph file %s edited since the run started: resuming the graph journaled with the run, not the file", run.GraphPath))
	}
	return r, func() { _ = j.ReleaseRun(bg(ctx), runID, r.owner); closeProvs() }, nil
}

// UnknownNodeError: a caller named a node the run's graph does not have.
// Op is what named it (retry, cancel, node: Resume's force list, Cancel's
// nodes, RunNode's node; a CLI puts its own flag there).
type UnknownNodeError struct {
	Op, RunID, Node string
}

func (e *UnknownNodeError) Error() string {
	return fmt.Sprintf("%s %s: run %s has no node %q", e.Op, e.Node, e.RunID, e.Node)
}

// entryFor works out where node n picks up from what its journal holds.
// A nil entry (with a non-fail decision) means a fresh start.
func (r *runState) entryFor(ctx context.Context, n *Node, force bool) (*entry, resume.Decision, error) {
	atts, err := r.j.Attempts(ctx, r.id, n.ID)
	if err != nil || len(atts) == 0 {
		return nil, resume.Decision{Action: resume.ActRetry}, err
	}
	last := atts[len(atts)-1]
	e := &entry{attempt: last.N, retriesUsed: len(atts) - 1, cur: provider.Cursor{Ref: last.Ref, Seq: -1}}
	if force {
		e.action, e.retriesUsed = resume.ActRetry, 0
		return e, resume.Decision{Action: resume.ActRetry}, nil
	}
	seq, err := r.j.MaxProviderSeq(ctx, r.id, n.ID, last.N)
	if err != nil {
		return nil, resume.Decision{}, err
	}
	e.cur.Seq = max(seq, last.Cursor)
	if e.out, err = r.j.RebuildOutput(ctx, r.id, n.ID, last.N); err != nil {
		return nil, resume.Decision{}, err
	}
	// What it streamed, as counted when it came: what a continue goes on
	// from, and what its usage counts before the continuation's.
	st, err := r.j.Streamed(ctx, r.id, n.ID, last.N)
	if err != nil {
		return nil, resume.Decision{}, err
	}
	e.streamed = st.Chunks
	// The provider's own name for the newest point it journaled, if it
	// gave one: a re-attach goes on from there, not from the start. Past
	// the cursor too: a mark is journaled after the data before it, and
	// the cursor counts only what was journaled with its sequence, so
	// what lies between them is progress (issue 43).
	if b, err := r.j.LastMark(ctx, r.id, n.ID, last.N); err != nil {
		return nil, resume.Decision{}, err
	} else if m := new(provider.Mark); b != nil && json.Unmarshal(b, m) == nil {
		e.cur.Mark = m
	}
	// Whatever ended the attempt (a crash, Ctrl-C, an error the operator may
	// since have fixed), resuming treats it as a dropped stream: the budget
	// and the side effects still decide.
	if _, ok := r.provs[last.Provider]; ok && last.Provider != n.Provider {
		e.provider = last.Provider // it had moved to a fallback: it goes on there
	}
	d := r.pickUp(n, e.provider, last.Ref, e.out, r.prof.Reconnects, r.retryBudget(n)-e.retriesUsed)
	e.action = d.Action
	return e, d, nil
}

// retryBudget is n's retry budget: its own, else the profile's.
func (r *runState) retryBudget(n *Node) int {
	if n.Retries != nil {
		return *n.Retries
	}
	return r.prof.Retries
}

// pickUp decides the first step of a node picked up after its attempt on
// ref ended with the process (or machine) that ran it: as after a dropped
// stream whose request was sent. out is the output journaled so far, which
// a chat answer continues from.
//
// prov is the provider the attempt ran on, when not the node's own (a
// fallback it had moved to).
func (r *runState) pickUp(n *Node, prov, ref, out string, resumesLeft, retriesLeft int) resume.Decision {
	if prov == "" {
		prov = n.Provider
	}
	p := r.provs[prov].p
	caps := p.Capabilities()
	// what an adapter needs to tell whether it can continue this node's request
	req := provider.Request{Node: n.ID, Model: n.Model, ReasoningEffort: n.ReasoningEffort, MaxOutputTokens: n.MaxOutputTokens}
	return resume.Decide(resume.Input{
		Class:       diagnostics.ClassDisconnect,
		CanResume:   caps.Resume && ref != "",
		CanCheck:    caps.Check && ref != "",
		CanContinue: caps.Continue && out != "" && provider.CanContinue(p, req),
		Dispatched:  true,
		SideEffects: resume.SideEffects(n.SideEffects),
		ResumesLeft: resumesLeft,
		RetriesLeft: retriesLeft,
	})
}

// pickUpWords says what a picked-up node does first.
func pickUpWords(a resume.Action, ref string) string {
	switch a {
	case resume.ActCheck:
		return "checking " + ref + " at the provider before deciding"
	case resume.ActResume:
		return "re-attaching to " + ref
	case resume.ActContinue:
		return "continuing the answer from its journaled output"
	}
	return "sending the request again from scratch"
}

// fillEnv gives a journaled graph its harness env values back, which the
// journal never keeps (Graph.Journaled): from the graph file it was run
// from, if that still says the same graph, else from the environment.
func fillEnv(ctx context.Context, g *Graph, journaled []byte, opts *Options) error {
	if len(g.HiddenEnv(func(v string) bool { return v == graph.EnvHidden })) == 0 {
		return nil
	}
	orig, _ := graph.LoadContext(ctx, g.Path) // nil when it is gone or no longer parses
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return g.FillEnv(journaled, orig, graph.Options{Kinds: kindNames(opts.Kinds)}, func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	})
}
