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
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
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

// NewWorker registers the graph workflow and the node activities on queue.
// Its MaxConcurrentActivityExecutionSize counts nodes: a pack of them holds
// as many slots (nodeSlots).
func NewWorker(c client.Client, queue string, acts *Activities, opts worker.Options) (worker.Worker, error) {
	if n := opts.MaxConcurrentActivityExecutionSize; n > 0 && opts.Tuner == nil {
		acts.slots = newNodeSlots(n)
		t, err := nodeTuner(acts.slots, opts)
		if err != nil {
			return nil, fmt.Errorf("worker tuner: %w", err)
		}
		// The tuner takes the place of every MaxConcurrent…Size.
		opts.Tuner = t
		opts.MaxConcurrentActivityExecutionSize, opts.MaxConcurrentWorkflowTaskExecutionSize = 0, 0
		opts.MaxConcurrentLocalActivityExecutionSize, opts.MaxConcurrentNexusTaskExecutionSize = 0, 0
	}
	w := worker.New(c, queue, opts)
	Register(w, acts)
	return w, nil
}

// WorkerOptions are a `noderun worker`'s options: parallel nodes at once,
// a few pollers (a pack fills a task), and heartbeats at most
// HeartbeatThrottle apart.
func WorkerOptions(parallel int) worker.Options {
	// A poller takes a task a round trip. A wide run packs its nodes (a
	// task of up to 32), so a few pollers keep a worker of hundreds of slots
	// fed; many would each take a pack at once before the worker counts
	// their nodes (nodeSlots), and the first of three workers took 35 of a
	// 1,000-node run's 63 packs (560 nodes for 334 slots) and ended last.
	pollers := worker.NewPollerBehaviorSimpleMaximum(worker.PollerBehaviorSimpleMaximumOptions{
		MaximumNumberOfPollers: min(max(parallel/64, 2), 16)})
	return worker.Options{MaxConcurrentActivityExecutionSize: parallel, WorkerStopTimeout: 10 * time.Second,
		ActivityTaskPollerBehavior: pollers,
		// A workflow task of a wide run parses its graph (10,000 nodes: a
		// few hundred ms of CPU) and settles hundreds of nodes; on a busy
		// machine that takes more than the SDK's 1 s of wall time, and a
		// task failed for it is replayed from the start of the history.
		DeadlockDetectionTimeout:   10 * time.Second,
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
		// A chat node's heartbeat carries its answer so far: what streamed
		// after the last one Temporal holds is generated again by the worker
		// that takes the node over.
		MaxHeartbeatThrottleInterval: HeartbeatThrottle}
}

// Register adds the workflow and the node activity to a worker.
func Register(w worker.Worker, acts *Activities) {
	RegisterWorkflow(w)
	w.RegisterActivityWithOptions(acts.Node, activity.RegisterOptions{Name: ActivityName})
	w.RegisterActivityWithOptions(acts.Nodes, activity.RegisterOptions{Name: PackActivityName})
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
// worker answers it); each node's whole outcome (output, diagnostics,
// cursor, verdict) read from the history of the execution that ran it.
func State(ctx context.Context, c client.Client, runID string) (RunResult, error) {
	d, err := describe(ctx, c, runID)
	if err != nil {
		return RunResult{}, err
	}
	res, err := state(ctx, c, runID, d)
	if err != nil {
		return res, err
	}
	return res, Outcomes(ctx, c, &res)
}

func describe(ctx context.Context, c client.Client, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("run %s: no such workflow on Temporal: %w", runID, journal.ErrNotFound)
		}
		return nil, err
	}
	return d, nil
}

// state is the run's state as the workflow keeps it: each node's state,
// reason, worker and output size (RunResult).
func state(ctx context.Context, c client.Client, runID string, d *workflowservice.DescribeWorkflowExecutionResponse) (RunResult, error) {
	var res RunResult
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

// Outcomes fills in each node's whole outcome (output, diagnostics,
// cursor, verdict) from the history of the workflow execution that ran it
// (RunResult keeps only its state): one read of each execution's history.
func Outcomes(ctx context.Context, c client.Client, res *RunResult) error {
	byRun := map[int]map[string]NodeOutcome{}
	for i := range res.Nodes {
		n := &res.Nodes[i]
		if n.Run <= 0 || n.Run > len(res.Runs) {
			continue
		}
		outs, ok := byRun[n.Run]
		if !ok {
			var err error
			if outs, err = executionOutcomes(ctx, c, res.RunID, res.Runs[n.Run-1]); err != nil {
				return err
			}
			byRun[n.Run] = outs
		}
		if o, ok := outs[n.Node]; ok {
			// The workflow's state says how the node stands; the result, what it did.
			o.Node, o.State, o.Reason, o.Run, o.Bytes = n.Node, n.State, n.Reason, n.Run, n.Bytes
			if o.ErrClass == "" {
				o.ErrClass = n.ErrClass
			}
			*n = o
		}
	}
	return nil
}

// stuckTasks is how many times in a row a workflow task may fail before
// Follow reports the run as unable to go on (Temporal retries it forever).
const stuckTasks = 3

// stuck says why the run cannot go on when its workflow task keeps failing
// (a worker that cannot replay it, a message over the gRPC limit): the last
// failure the history shows.
func stuck(ctx context.Context, c client.Client, runID string, d *workflowservice.DescribeWorkflowExecutionResponse) error {
	wt := d.GetPendingWorkflowTask()
	if wt == nil || wt.GetAttempt() < stuckTasks {
		return nil
	}
	why := "no failure in the history"
	// Temporal records the first of consecutive failures (the retries are
	// transient): the last one recorded is the one that goes on.
	it := c.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			break
		}
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
			why = f.GetFailure().GetMessage()
		}
	}
	return fmt.Errorf("run %s cannot go on: its workflow task failed %d times in a row (%s); the workflow stays open on Temporal: "+
		"mend the workers and it goes on, or end it with `temporal workflow terminate --workflow-id %s`", runID, wt.GetAttempt(), why, runID)
}

// PendingNodes lists the run's running nodes (a pack's each) with their
// last heartbeat (PendingActivities).
func PendingNodes(ctx context.Context, c client.Client, runID string) ([]PendingActivity, error) {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return nil, err
	}
	return PendingActivities(d), nil
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the goroutine waiting for the result, when the run is held or stuck
	done := make(chan struct{})
	var final RunResult
	var ferr error
	go func() {
		defer close(done)
		ferr = c.GetWorkflow(ctx, runID, "").Get(ctx, &final)
	}()
	since := 0 // the last QueryChanges version seen
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			if ferr != nil {
				return RunResult{}, ferr
			}
			report(f.nodes(final, time.Now()))
			return final, Outcomes(ctx, c, &final)
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		case <-t.C:
		}
		polled := time.Now()
		held, err := f.poll(ctx, c, runID, &since, report)
		if err != nil {
			return RunResult{}, err
		}
		if held {
			return State(ctx, c, runID)
		}
		// Each poll costs Temporal and the workflow's worker (a wide run's
		// running activities, with their heartbeats, are megabytes): polls
		// take at most a fifth of the time.
		t.Reset(max(every, 4*time.Since(polled)))
	}
}

// poll reports what changed since the version *since (which it moves on):
// the nodes' states, and what their heartbeats show. held says the run
// waits for an operator only; an error, that it cannot go on.
func (f *follower) poll(ctx context.Context, c client.Client, runID string, since *int, report func([]runner.Progress)) (held bool, err error) {
	d, err := describe(ctx, c, runID)
	if err != nil {
		return false, nil // not started yet, or a transient error: the result will tell
	}
	if err := stuck(ctx, c, runID, d); err != nil {
		return false, err
	}
	v, err := c.QueryWorkflow(ctx, runID, "", QueryChanges, *since)
	var ch Changes
	if err != nil || v.Get(&ch) != nil {
		return false, nil
	}
	*since = ch.Version
	report(f.nodes(RunResult{Nodes: ch.Nodes}, time.Now()))
	report(f.pending(PendingActivities(d), time.Now()))
	return ch.Status == string(journal.NodeAttention), nil
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
			p.State, p.Bytes, p.Text = runner.ProgressDone, n.Bytes, fmt.Sprintf("done (%d bytes)", n.Bytes)
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
func (f *follower) pending(pend []PendingActivity, now time.Time) []runner.Progress {
	var out []runner.Progress
	for _, p := range pend {
		at := runner.Progress{Node: p.Node, State: runner.ProgressRecovering, Attempt: p.Beat.Attempt, Bytes: p.Beat.Bytes, Time: now}
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
		if p.Beat.Recovery != nil {
			step = *p.Beat.Recovery
		}
		if step != f.steps[p.Node] && step.Code.ID != "" && f.states[p.Node] == string(journal.NodeRunning) {
			at.Step, at.Text = step, p.Beat.Step+" on "+p.Worker
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
