package runner

import (
	"context"

	"github.com/noderun/noderun/journal"
)

// Observer watches runs for the tools operators already watch (package
// runner/telemetry: OpenTelemetry traces, Prometheus metrics). The runner
// calls it at a run's start and end, with each Progress, and when a node
// settles; it never calls it per chunk. With Options.Observer nil the
// runner gathers nothing for it and its hot path is the one without.
//
// The figures an observer reports are best read from the journal when a
// node settles (ledger.LoadNodeOf, ledger.AccountNode): the same account
// `noderun diagnose` prints, so a dashboard and diagnose cannot disagree,
// and a retried request stays one node call with its attempts.
type Observer interface {
	// RunStarted is told that this process starts (or resumes) running
	// run runID of graph g. The context it returns is the one the run's
	// nodes run under (it may carry a trace span, their parent); ended is
	// called once when this process stops running the run, with its
	// status. A worker's RunNode calls neither: its node runs under the
	// context its supervisor gave (a Temporal activity's, which carries
	// the workflow's trace).
	RunStarted(ctx context.Context, runID string, g *Graph) (_ context.Context, ended func(journal.RunStatus))
	// Progress is what Options.OnProgress is told, with the run it is of.
	// It is called on the nodes' goroutines, one call at a time: it must
	// return quickly.
	Progress(runID string, p Progress)
	// NodeSettled is told that this process is done with node of run
	// runID (an outcome, an interruption, a cache hit): its attempts, usage
	// and diagnostics are committed to j. ctx is the node's context (its
	// cancellation removed), so that a span made from it hangs under the
	// run's or the activity's.
	NodeSettled(ctx context.Context, j *journal.Journal, g *Graph, runID, node string)
}

// progressFunc is the callback the run's progress sink calls: the caller's
// OnProgress and the observer's, or nil when neither is set (the executor
// then gathers nothing).
func progressFunc(runID string, user func(Progress), obs Observer) func(Progress) {
	if obs == nil {
		return user
	}
	if user == nil {
		return func(p Progress) { obs.Progress(runID, p) }
	}
	return func(p Progress) {
		user(p)
		obs.Progress(runID, p)
	}
}

// settled tells the observer that node is done in this process, once what
// it journaled is committed (the writer batches events; a reader must see
// them all).
func (r *runState) settled(ctx context.Context, node string) {
	if r.obs == nil {
		return
	}
	ctx = bg(ctx)
	if err := r.j.Flush(ctx); err != nil {
		r.log.Warn("telemetry: the journal did not flush; the node is not reported", "node", node, "error", err)
		return
	}
	r.obs.NodeSettled(ctx, r.j, r.g, r.id, node)
}
