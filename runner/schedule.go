package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/nodestate"
)

// schedule runs the graph's nodes as the node-state machine (package
// nodestate) says: in dependency order, at most r.parallel at once. A failed
// node skips everything downstream of it, unless it is marked
// continue_on_failure (its dependents then run, seeing it failed);
// independent branches go on. On cancellation it starts nothing new and
// waits for the running nodes to stop.
func (r *runState) schedule(ctx context.Context) {
	m := nodestate.New(r.g, r.parallel)
	// A resumed run starts with some nodes settled: completed ones feed their
	// dependents. One needing attention holds its dependents, but a local run
	// has no operator to wait for: they are skipped now, and `noderun resume
	// --retry` replays it in a later run.
	for _, n := range r.g.Nodes {
		st := r.results[n.ID].State
		if st == journal.NodePending {
			continue
		}
		r.skip(ctx, m.Settle(n.ID, st))
		if st == journal.NodeAttention {
			r.skip(ctx, m.Abandon(n.ID))
		}
	}
	done := make(chan *NodeResult)
	for {
		for ctx.Err() == nil {
			id, ok := m.Next()
			if !ok {
				break
			}
			n := r.g.Node(id)
			go func() { done <- r.runNode(ctx, n) }()
		}
		if m.Running() == 0 {
			return
		}
		res := <-done
		r.record(res)
		r.skip(ctx, m.Settle(res.ID, res.State))
	}
}

func (r *runState) record(res *NodeResult) {
	r.mu.Lock()
	r.results[res.ID] = res
	if res.State == journal.NodeCompleted {
		r.outputs[res.ID] = res.Output
	}
	r.mu.Unlock()
	switch {
	case res.State == journal.NodeCompleted && res.FromCache != "":
		run, node, _ := strings.Cut(res.FromCache, "/")
		if len(run) > 8 {
			run = run[:8] // a unique prefix, as the CLI shows run ids
		}
		if res.FromJournal != "" {
			run += " in " + res.FromJournal
		}
		r.progress(res.ID, ProgressDone, fmt.Sprintf("done from the cache (%d bytes: node %s of run %s)", len(res.Output), node, run))
	case res.State == journal.NodeCompleted:
		r.progress(res.ID, ProgressDone, fmt.Sprintf("done (%d bytes)", len(res.Output)))
	case res.State == journal.NodeCanceled:
		r.progress(res.ID, ProgressInterrupted, "interrupted")
	default:
		r.progress(res.ID, ProgressFailed, "failed: "+res.Reason)
	}
}

// skip journals the nodes the machine skipped.
func (r *runState) skip(ctx context.Context, skips []nodestate.Skip) {
	for _, s := range skips {
		id, cause, reason := s.ID, s.Cause, s.Reason()
		nr := r.results[id]
		nr.State, nr.Reason = journal.NodeSkipped, reason
		_ = r.j.SetNodeState(bg(ctx), r.id, id, journal.NodeSkipped, reason)
		r.diag(ctx, id, 0, diagnostics.New(diagnostics.NodeSkipped, reason, diagnostics.KeyCause.Attr(cause)))
		r.progress(id, ProgressSkipped, "skipped: "+reason)
	}
}
