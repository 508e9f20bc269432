// Package temporal runs noderun graphs on Temporal: the run is a workflow
// (workflow id = run id), each node an activity executed by runner.RunNode
// with the same executor, profiles and diagnostics as a local run, and the
// node's recovery cursor travels in the activity's heartbeats. When a worker
// is lost, Temporal retries the activity on another worker, which reads the
// last heartbeat and re-attaches instead of regenerating (see docs/temporal.md).
//
// Temporal's retry policy covers lost workers only: a node that fails by
// noderun's profile fails the activity with a non-retryable error.
package temporal

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/nodestate"
)

// Names registered with Temporal. They are part of the wire contract between
// `noderun run --temporal` and `noderun worker`: never rename them.
const (
	WorkflowName = "noderun.Graph"
	ActivityName = "noderun.Node"
	// SignalRetry replays a node held for an operator (its payload: the node id).
	SignalRetry = "noderun.retry"
	// QueryState returns the run as it stands (a RunResult).
	QueryState = "noderun.state"
	// DefaultTaskQueue is the task queue when none is given.
	DefaultTaskQueue = "noderun"
	// errNodeFailed is the application error type of a node that failed by
	// noderun's profile; its details are the NodeOutcome.
	errNodeFailed = "NodeFailed"
)

// RunInput is a submitted run: the graph as text (workers need no copy of
// the file) and the resolved profile (nor of its profiles file).
type RunInput struct {
	RunID     string          `json:"run_id"`
	GraphPath string          `json:"graph_path"`
	GraphText string          `json:"graph_text"`
	Profile   profile.Profile `json:"profile"`
	Parallel  int             `json:"parallel"`
	// Inputs are the run's inputs as given (`--input`); every node resolves
	// them against the graph's defaults the same way.
	Inputs map[string]string `json:"inputs,omitempty"`
	// HeartbeatTimeout is how long a node's worker may stay silent before
	// the node goes to another worker; 0: DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
}

// NodeInput is one node's activity.
type NodeInput struct {
	RunID     string            `json:"run_id"`
	GraphPath string            `json:"graph_path"`
	GraphText string            `json:"graph_text"`
	Profile   profile.Profile   `json:"profile"`
	Node      string            `json:"node"`
	Needs     map[string]string `json:"needs,omitempty"`
	Force     bool              `json:"force,omitempty"`
	Inputs    map[string]string `json:"inputs,omitempty"`
	// Failed names the needs that failed under continue_on_failure.
	Failed []string `json:"failed,omitempty"`
}

// Diag is a diagnostic as an activity result carries it.
type Diag struct {
	Code    string `json:"code"`
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
	Message string `json:"message"`
}

// NodeOutcome is a node's activity result: its output and attempt summary.
type NodeOutcome struct {
	Node     string `json:"node"`
	State    string `json:"state"`
	Output   string `json:"output,omitempty"`
	Reason   string `json:"reason,omitempty"`
	ErrClass string `json:"err_class,omitempty"`
	// Worker is the identity of the worker that finished the node.
	Worker string `json:"worker,omitempty"`
	// TemporalAttempt is the activity attempt (above 1: a worker was lost).
	TemporalAttempt int32 `json:"temporal_attempt,omitempty"`
	// Cursor is where the node stood last (attempts, budgets used).
	Cursor      runner.NodeCursor `json:"cursor"`
	Diagnostics []Diag            `json:"diagnostics,omitempty"`
	// Verdict is the node's account as the worker that finished it saw it
	// in its journal (package ledger).
	Verdict string `json:"verdict,omitempty"`
	// Tokens are the node's token figures as that worker's ledger counts
	// them (its own attempts: generated, regenerated, preserved, ...).
	Tokens *ledger.Tokens `json:"tokens,omitempty"`
	// From is the lost worker's last heartbeat this attempt started from
	// (its Output left out), nil for a first attempt: Temporal does not
	// keep it in the history, so diagnose reads hand-overs from here.
	From *Heartbeat `json:"from,omitempty"`
}

// RunResult is the run as the workflow returns it, and as QueryState shows
// it while it runs (nodes in graph order).
type RunResult struct {
	RunID  string        `json:"run_id"`
	Status string        `json:"status"`
	Nodes  []NodeOutcome `json:"nodes"`
}

// DefaultHeartbeatTimeout is how long a node's worker may stay silent
// before Temporal counts it as lost and gives the node to another worker,
// unless the run sets its own (RunInput.HeartbeatTimeout, `run --temporal
// --heartbeat-timeout`). It does not follow the profile: a worker heartbeats
// every third of it from a goroutine of its own, whatever the node is doing
// (streaming, silent, backing off, waiting for quota), so only a worker that
// is gone (kill -9, a lost host) or a machine stalled that long stays
// silent. Shorter notices a lost worker sooner and costs Temporal more
// calls: the SDK sends at most one heartbeat per 0.8 × the timeout per
// running node, so 10 s and 1,000 nodes running are ~125 calls a second.
const DefaultHeartbeatTimeout = 10 * time.Second

// HeartbeatThrottle is the longest a worker holds a node's heartbeat back
// (worker.Options.MaxHeartbeatThrottleInterval; the SDK's default is 0.8 ×
// the heartbeat timeout). A chat node's heartbeat carries its answer so far
// (runner.NodeCursor.Output), so at most this much of its streaming is
// generated again when its worker dies; Temporal gets up to one heartbeat
// call a node this often.
const HeartbeatThrottle = 2 * time.Second

// MinHeartbeatTimeout bounds a run's heartbeat timeout from below: a busy
// machine (a 10,000-node worker, a garbage collection) must not look dead.
const MinHeartbeatTimeout = 3 * time.Second

// HeartbeatTimeout is the heartbeat timeout of in's nodes: its own, at
// least MinHeartbeatTimeout, else DefaultHeartbeatTimeout.
func HeartbeatTimeout(in RunInput) time.Duration {
	if in.HeartbeatTimeout > 0 {
		return max(in.HeartbeatTimeout, MinHeartbeatTimeout)
	}
	return DefaultHeartbeatTimeout
}

// activityOptions: Temporal retries a node only when its worker was lost
// (a heartbeat timeout, a crash); StartToClose is a backstop, the heartbeat
// detects dead workers.
func activityOptions(heartbeat time.Duration, node string, replay int) workflow.ActivityOptions {
	id := node
	if replay > 0 {
		id = fmt.Sprintf("%s#%d", node, replay)
	}
	return workflow.ActivityOptions{
		ActivityID:          id,
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        500 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			MaximumAttempts:        20,
			NonRetryableErrorTypes: []string{errNodeFailed},
		},
	}
}

// GraphWorkflow runs a graph: nodes in dependency order, at most Parallel at
// once, in graph order among the ready ones, by the same state machine as
// runner.Run (package nodestate). A failed node skips its dependents; a node
// held for an operator (its replay may be unsafe) waits for SignalRetry, and
// so do its dependents. It is deterministic: it reads nothing but its input
// and activity results, and the machine is pure.
func GraphWorkflow(ctx workflow.Context, in RunInput) (RunResult, error) {
	g, err := runner.ParseGraph(in.GraphPath, []byte(in.GraphText))
	if err != nil {
		return RunResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "BadGraph", nil)
	}
	parallel := in.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	res := RunResult{RunID: in.RunID, Status: string(journal.RunRunning)}
	at := map[string]int{}
	for i, n := range g.Nodes {
		at[n.ID] = i
		res.Nodes = append(res.Nodes, NodeOutcome{Node: n.ID, State: string(journal.NodePending)})
	}
	node := func(id string) *NodeOutcome { return &res.Nodes[at[id]] }
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (RunResult, error) { return res, nil }); err != nil {
		return res, err
	}
	m := nodestate.New(g, parallel)
	replays := map[string]int{}
	sel := workflow.NewSelector(ctx)
	settle := func(id string, out NodeOutcome, err error) {
		if err != nil {
			out = failedOutcome(id, err)
		}
		*node(id) = out
		// A held node (attention) keeps its dependents waiting for SignalRetry.
		for _, s := range m.Settle(id, journal.NodeState(out.State)) {
			o := node(s.ID)
			o.State, o.Reason = string(journal.NodeSkipped), s.Reason()
		}
	}
	start := func(id string, force bool) {
		n := g.Node(id)
		needs := map[string]string{}
		var failed []string
		for _, need := range n.Needs {
			needs[need] = node(need).Output
			if node(need).State == string(journal.NodeFailed) {
				failed = append(failed, need)
			}
		}
		o := node(id)
		o.State, o.Reason = string(journal.NodeRunning), ""
		actx := workflow.WithActivityOptions(ctx, activityOptions(HeartbeatTimeout(in), id, replays[id]))
		f := workflow.ExecuteActivity(actx, ActivityName, NodeInput{RunID: in.RunID, GraphPath: in.GraphPath,
			GraphText: in.GraphText, Profile: in.Profile, Node: id, Needs: needs, Force: force, Inputs: in.Inputs, Failed: failed})
		sel.AddFuture(f, func(f workflow.Future) {
			var out NodeOutcome
			err := f.Get(ctx, &out)
			settle(id, out, err)
		})
	}
	var forced []string
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalRetry), func(c workflow.ReceiveChannel, _ bool) {
		var id string
		c.Receive(ctx, &id)
		if m.Replay(id) {
			replays[id]++
			forced = append(forced, id)
		}
	})
	for {
		for len(forced) > 0 {
			id := forced[0]
			forced = forced[1:]
			start(id, true)
		}
		for {
			id, ok := m.Next()
			if !ok {
				break
			}
			start(id, false)
		}
		if m.Running() == 0 && m.Held() == 0 {
			break
		}
		if m.Running() == 0 {
			res.Status = string(journal.NodeAttention) // waiting for an operator only
		}
		sel.Select(ctx)
		res.Status = string(journal.RunRunning)
	}
	res.Status = string(journal.RunCompleted)
	for _, o := range res.Nodes {
		if o.State != string(journal.NodeCompleted) {
			res.Status = string(journal.RunFailed)
		}
	}
	return res, nil
}

// failedOutcome is the outcome of a node whose activity failed: by noderun's
// profile (the details carry the outcome), or because Temporal gave up on it.
func failedOutcome(id string, err error) NodeOutcome {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == errNodeFailed && ae.HasDetails() {
		var out NodeOutcome
		if ae.Details(&out) == nil {
			return out
		}
	}
	return NodeOutcome{Node: id, State: string(journal.NodeFailed), Reason: err.Error()}
}
