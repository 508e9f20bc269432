package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// Dial connects to a Temporal frontend. Temporal's own logs go to log at
// warning level and above (nil: discarded).
func Dial(ctx context.Context, hostPort, namespace, identity string, log *slog.Logger) (client.Client, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Namespace: namespace, Identity: identity,
		Logger: tlog.NewStructuredLogger(slog.New(warnOnly{log.Handler()}))})
	if err != nil {
		return nil, fmt.Errorf("temporal %s: %w", hostPort, err)
	}
	return c, nil
}

// warnOnly keeps Temporal's info chatter (workers started, polls) off stderr.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

// NewWorker registers the graph workflow and the node activity on queue.
func NewWorker(c client.Client, queue string, acts *Activities, opts worker.Options) worker.Worker {
	w := worker.New(c, queue, opts)
	Register(w, acts)
	return w
}

// Register adds the workflow and the node activity to a worker.
func Register(w worker.Worker, acts *Activities) {
	RegisterWorkflow(w)
	w.RegisterActivityWithOptions(acts.Node, activity.RegisterOptions{Name: ActivityName})
}

// RegisterWorkflow adds the graph workflow to a worker or a replayer.
func RegisterWorkflow(w interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
}) {
	w.RegisterWorkflowWithOptions(GraphWorkflow, workflow.RegisterOptions{Name: WorkflowName})
}

// Submit starts the run as a workflow whose id is the run id.
func Submit(ctx context.Context, c client.Client, queue string, in RunInput) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.RunID, TaskQueue: queue,
		WorkflowExecutionTimeout: 0}, WorkflowName, in)
}

// State is how a run stands: the workflow's result once it completed (read
// from its history: no worker needed), else the answer to QueryState (a
// worker answers it).
func State(ctx context.Context, c client.Client, runID string) (RunResult, error) {
	var res RunResult
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return res, fmt.Errorf("run %s: no such workflow on Temporal: %w", runID, journal.ErrNotFound)
		}
		return res, err
	}
	if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return res, c.GetWorkflow(ctx, runID, "").Get(ctx, &res)
	}
	v, err := c.QueryWorkflow(ctx, runID, "", QueryState)
	if err != nil {
		return res, fmt.Errorf("run %s is %s on Temporal; asking its state: %w", runID,
			strings.ToLower(strings.TrimPrefix(d.GetWorkflowExecutionInfo().GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")), err)
	}
	return res, v.Get(&res)
}

// Pending is a node whose activity is running, as Temporal sees it.
type Pending struct {
	Node     string
	Attempt  int32 // above 1: an earlier worker was lost
	Worker   string
	Cursor   runner.NodeCursor
	LastBeat time.Time
}

// PendingNodes lists the run's running activities with their last heartbeat.
func PendingNodes(ctx context.Context, c client.Client, runID string) ([]Pending, error) {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return nil, err
	}
	var out []Pending
	dc := converter.GetDefaultDataConverter()
	for _, pa := range d.GetPendingActivities() {
		node, _, _ := strings.Cut(pa.GetActivityId(), "#") // "NODE#n": the operator's n-th replay
		p := Pending{Node: node, Attempt: pa.GetAttempt(), Worker: pa.GetLastWorkerIdentity()}
		if pa.GetLastHeartbeatTime() != nil {
			p.LastBeat = pa.GetLastHeartbeatTime().AsTime()
		}
		if hd := pa.GetHeartbeatDetails(); hd != nil && len(hd.GetPayloads()) > 0 {
			_ = dc.FromPayload(hd.GetPayloads()[0], &p.Cursor)
		}
		out = append(out, p)
	}
	return out, nil
}

// Retry replays a node held for an operator.
func Retry(ctx context.Context, c client.Client, runID, node string) error {
	return c.SignalWorkflow(ctx, runID, "", SignalRetry, node)
}

// Follow reports node state changes of a run to progress (as a local run's
// progress lines) until the workflow ends, and returns its result. It
// returns early, with the run as it stands, when the run only waits for an
// operator (a node held, nothing running): the workflow stays open for
// `noderun resume --retry NODE --temporal`.
func Follow(ctx context.Context, c client.Client, runID string, every time.Duration, progress func(node, state string)) (RunResult, error) {
	if progress == nil {
		progress = func(string, string) {}
	}
	seen := map[string]string{}
	workers := map[string]string{}
	steps := map[string]string{} // the last recovery step heartbeated, per node
	done := make(chan struct{})
	var final RunResult
	var ferr error
	go func() {
		defer close(done)
		ferr = c.GetWorkflow(ctx, runID, "").Get(ctx, &final)
	}()
	report := func(res RunResult) {
		for _, n := range res.Nodes {
			if seen[n.Node] == n.State {
				continue
			}
			seen[n.Node] = n.State
			switch journal.NodeState(n.State) {
			case journal.NodePending:
			case journal.NodeRunning:
				progress(n.Node, "streaming")
			case journal.NodeCompleted:
				progress(n.Node, fmt.Sprintf("done (%d bytes)", len(n.Output)))
			case journal.NodeAttention:
				progress(n.Node, "needs attention: "+n.Reason)
			case journal.NodeSkipped:
				progress(n.Node, "skipped: "+n.Reason)
			default:
				progress(n.Node, "failed: "+n.Reason)
			}
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			if ferr != nil {
				return RunResult{}, ferr
			}
			report(final)
			return final, nil
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		case <-t.C:
		}
		res, err := State(ctx, c, runID)
		if err != nil {
			continue // not started yet, or a transient error: the result will tell
		}
		report(res)
		if pend, err := PendingNodes(ctx, c, runID); err == nil {
			for _, p := range pend {
				if w, ok := workers[p.Node]; ok && w != p.Worker && p.Worker != "" {
					progress(p.Node, fmt.Sprintf("worker %s gone; resumed on %s (activity attempt %d)", w, p.Worker, p.Attempt))
				}
				if p.Worker != "" {
					workers[p.Node] = p.Worker
				}
				if p.Cursor.Step != "" && p.Cursor.Step != steps[p.Node] && seen[p.Node] == string(journal.NodeRunning) {
					progress(p.Node, p.Cursor.Step+" on "+p.Worker)
				}
				steps[p.Node] = p.Cursor.Step
			}
		}
		if res.Status == string(journal.NodeAttention) {
			return res, nil
		}
	}
}

// Result converts a workflow's result into a runner.Result for printing.
func Result(res RunResult) *runner.Result {
	out := &runner.Result{RunID: res.RunID, Status: journal.RunStatus(res.Status)}
	if res.Status == string(journal.NodeAttention) || res.Status == string(journal.RunRunning) {
		out.Status = journal.RunFailed // held or unfinished: not completed
	}
	for _, n := range res.Nodes {
		out.Nodes = append(out.Nodes, runner.NodeResult{ID: n.Node, State: journal.NodeState(n.State), Output: n.Output, Reason: n.Reason})
	}
	return out
}
