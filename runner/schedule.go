package runner

import (
	"context"
	"fmt"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// schedule runs the graph's nodes in dependency order, at most r.parallel at
// once. A failed node skips everything downstream of it, unless it is marked
// continue_on_failure (its dependents then run, seeing it failed);
// independent branches go on. On cancellation it starts nothing new and waits for the
// running nodes to stop.
func (r *runState) schedule(ctx context.Context) {
	waiting := make(map[string]int, len(r.g.Nodes)) // needs not yet completed
	for _, n := range r.g.Nodes {
		for _, need := range n.Needs {
			if r.results[need].State != journal.NodeCompleted {
				waiting[n.ID]++
			}
		}
	}
	// A resumed run starts with some nodes settled: completed ones feed their
	// dependents, ones needing attention hold theirs back.
	var ready []*Node
	for _, n := range r.g.Nodes {
		switch st := r.results[n.ID].State; {
		case st == journal.NodeAttention:
			for _, d := range r.g.Dependents(n.ID) {
				r.skip(ctx, d, n.ID)
			}
		case st == journal.NodePending && waiting[n.ID] == 0:
			ready = append(ready, n)
		}
	}
	done := make(chan *NodeResult)
	running := 0
	for {
		for running < r.parallel && len(ready) > 0 && ctx.Err() == nil {
			n := ready[0]
			ready = ready[1:]
			running++
			go func() { done <- r.runNode(ctx, n) }()
		}
		if running == 0 {
			return
		}
		res := <-done
		running--
		r.record(res)
		for _, id := range r.g.Dependents(res.ID) {
			if res.State != journal.NodeCompleted && !passes(r.g.Node(res.ID), res) {
				r.skip(ctx, id, res.ID)
				continue
			}
			waiting[id]--
			if waiting[id] == 0 && r.results[id].State == journal.NodePending {
				ready = append(ready, r.g.Node(id))
			}
		}
		// Keep graph file order among ready nodes, so runs are reproducible.
		ready = inGraphOrder(r.g, ready)
	}
}

func (r *runState) record(res *NodeResult) {
	r.mu.Lock()
	r.results[res.ID] = res
	if res.State == journal.NodeCompleted {
		r.outputs[res.ID] = res.Output
	}
	r.mu.Unlock()
	switch res.State {
	case journal.NodeCompleted:
		r.progress(res.ID, ProgressDone, fmt.Sprintf("done (%d bytes)", len(res.Output)))
	case journal.NodeCanceled:
		r.progress(res.ID, ProgressInterrupted, "interrupted")
	default:
		r.progress(res.ID, ProgressFailed, "failed: "+res.Reason)
	}
}

// skip marks id and everything downstream of it as skipped because cause did not complete.
func (r *runState) skip(ctx context.Context, id, cause string) {
	nr := r.results[id]
	if nr.State != journal.NodePending {
		return
	}
	reason := fmt.Sprintf("needs %q, which did not complete", cause)
	if r.results[cause].State == journal.NodeCanceled {
		nr.State, nr.Reason = journal.NodePending, "" // interrupted upstream: left for `noderun resume`
		return
	}
	nr.State, nr.Reason = journal.NodeSkipped, reason
	_ = r.j.SetNodeState(bg(ctx), r.id, id, journal.NodeSkipped, reason)
	r.diag(ctx, id, 0, diagnostics.New(diagnostics.NodeSkipped, reason, diagnostics.KeyCause.Attr(cause)))
	r.progress(id, ProgressSkipped, "skipped: "+reason)
	for _, d := range r.g.Dependents(id) {
		r.skip(ctx, d, id)
	}
}

// passes reports whether a node that did not complete still lets its
// dependents run: it failed (not interrupted) and is marked continue_on_failure.
func passes(n *Node, res *NodeResult) bool {
	return n.ContinueOnFailure && res.State == journal.NodeFailed
}

func inGraphOrder(g *Graph, nodes []*Node) []*Node {
	if len(nodes) < 2 {
		return nodes
	}
	in := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		in[n.ID] = true
	}
	out := nodes[:0:0]
	for _, n := range g.Nodes {
		if in[n.ID] {
			out = append(out, n)
		}
	}
	return out
}
