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
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// Dial connects to a Temporal frontend. Temporal's own logs go to log at
// warning level and above (nil: discarded).
//
// interceptors are added to the client and to the workers made from it:
// the OpenTelemetry one carries a run's trace context from the client
// through the workflow to each node's activity (docs/observability.md).
func Dial(ctx context.Context, hostPort, namespace, identity string, log *slog.Logger, interceptors ...interceptor.ClientInterceptor) (client.Client, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Namespace: namespace, Identity: identity,
		Logger: tlog.NewStructuredLogger(slog.New(warnOnly{log.Handler()})), Interceptors: interceptors})
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

// Follow reports what happens to the run's nodes to progress, as a local
// run's Options.OnProgress is told it (their states, and the recovery steps
// and worker changes the nodes' heartbeats show), until the workflow ends,
// and returns its result. It returns early, with the run as it stands, when
// the run only waits for an operator (a node held, nothing running): the
// workflow stays open for `noderun resume --retry NODE --temporal`.
func Follow(ctx context.Context, c client.Client, runID string, every time.Duration, progress func(runner.Progress)) (RunResult, error) {
	if progress == nil {
		progress = func(runner.Progress) {}
	}
	report := func(ps []runner.Progress) {
		for _, p := range ps {
			progress(p)
		}
	}
	f := newFollower()
	done := make(chan struct{})
	var final RunResult
	var ferr error
	go func() {
		defer close(done)
		ferr = c.GetWorkflow(ctx, runID, "").Get(ctx, &final)
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			if ferr != nil {
				return RunResult{}, ferr
			}
			report(f.nodes(final, time.Now()))
			return final, nil
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		case <-t.C:
		}
		res, err := State(ctx, c, runID)
		if err != nil {
			continue // not started yet, or a transient error: the result will tell
		}
		report(f.nodes(res, time.Now()))
		if pend, err := PendingNodes(ctx, c, runID); err == nil {
			report(f.pending(pend, time.Now()))
		}
		if res.Status == string(journal.NodeAttention) {
			return res, nil
		}
	}
}

// follower turns what Follow polls (the workflow's state, its running
// activities' heartbeats) into progress: what changed since the last poll.
type follower struct {
	states  map[string]string              // node → its state as last seen
	workers map[string]string              // node → the worker last seen running it
	steps   map[string]runner.RecoveryStep // node → the recovery step last heartbeated (zero: none)
}

func newFollower() *follower {
	return &follower{states: map[string]string{}, workers: map[string]string{}, steps: map[string]runner.RecoveryStep{}}
}

// nodes reports the nodes whose state changed.
func (f *follower) nodes(res RunResult, now time.Time) []runner.Progress {
	var out []runner.Progress
	for _, n := range res.Nodes {
		if f.states[n.Node] == n.State {
			continue
		}
		f.states[n.Node] = n.State
		p := runner.Progress{Node: n.Node, Attempt: n.Cursor.Attempt, Bytes: n.Cursor.Bytes, Time: now}
		switch journal.NodeState(n.State) {
		case journal.NodePending:
			continue
		case journal.NodeRunning:
			p.State, p.Text = runner.ProgressStreaming, "streaming"
		case journal.NodeCompleted:
			p.State, p.Bytes, p.Text = runner.ProgressDone, len(n.Output), fmt.Sprintf("done (%d bytes)", len(n.Output))
		case journal.NodeAttention:
			p.State, p.Text = runner.ProgressAttention, "needs attention: "+n.Reason
		case journal.NodeSkipped:
			p.State, p.Text = runner.ProgressSkipped, "skipped: "+n.Reason
		case journal.NodeCanceled:
			p.State, p.Text = runner.ProgressInterrupted, "interrupted"
		default:
			p.State, p.Text = runner.ProgressFailed, "failed: "+n.Reason
		}
		out = append(out, p)
	}
	return out
}

// pending reports what the running nodes' heartbeats show: a node another
// worker picked up (its own was lost or stopped), and each recovery step.
func (f *follower) pending(pend []Pending, now time.Time) []runner.Progress {
	var out []runner.Progress
	for _, p := range pend {
		at := runner.Progress{Node: p.Node, State: runner.ProgressRecovering, Attempt: p.Cursor.Attempt, Bytes: p.Cursor.Bytes, Time: now}
		if w, ok := f.workers[p.Node]; ok && w != p.Worker && p.Worker != "" {
			moved := at
			moved.Step = runner.RecoveryStep{Code: diagnostics.CrossWorkerResume}
			moved.Text = fmt.Sprintf("worker %s gone; resumed on %s (activity attempt %d)", w, p.Worker, p.Attempt)
			out = append(out, moved)
		}
		if p.Worker != "" {
			f.workers[p.Node] = p.Worker
		}
		var step runner.RecoveryStep
		if p.Cursor.Recovery != nil {
			step = *p.Cursor.Recovery
		}
		if step != f.steps[p.Node] && step.Code.ID != "" && f.states[p.Node] == string(journal.NodeRunning) {
			at.Step, at.Text = step, p.Cursor.Step+" on "+p.Worker
			out = append(out, at)
		}
		f.steps[p.Node] = step
	}
	return out
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
