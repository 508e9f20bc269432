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
	// PackActivityName runs several nodes in one activity (a wide run:
	// see packSize).
	PackActivityName = "noderun.Nodes"
	// SignalRetry replays a node held for an operator (its payload: the node id).
	SignalRetry = "noderun.retry"
	// QueryState returns the run as it stands (a RunResult).
	QueryState = "noderun.state"
	// SignalSettled hands the workflow a node's outcome that did not fit in
	// its pack's result (PackBytes; its payload: the NodeOutcome).
	SignalSettled = "noderun.settled"
	// QueryChanges returns the nodes that changed since a version the
	// caller had (its argument; 0: every node that moved), as Changes.
	QueryChanges = "noderun.changes"
	// DefaultTaskQueue is the task queue when none is given.
	DefaultTaskQueue = "noderun"
	// errNodeFailed is the application error type of a node that failed by
	// noderun's profile; its details are the NodeOutcome.
	errNodeFailed = "NodeFailed"
)

// RunInput is a submitted run: the graph as text (workers need no copy of
// the file) and the resolved profile (nor of its profiles file). It travels
// once per workflow execution (its input), the graph compressed (see
// MarshalJSON); a node's activity names the run, and the worker reads the
// rest from the execution's first event once (specCache).
type RunInput struct {
	RunID     string          `json:"run_id"`
	GraphPath string          `json:"graph_path"`
	GraphText string          `json:"graph_text,omitempty"`
	Profile   profile.Profile `json:"profile"`
	Parallel  int             `json:"parallel"`
	// Inputs are the run's inputs as given (`--input`); every node resolves
	// them against the graph's defaults the same way.
	Inputs map[string]string `json:"inputs,omitempty"`
	// HeartbeatTimeout is how long a node's worker may stay silent before
	// the node goes to another worker; 0: DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// Carry is what the run's earlier executions did, when the workflow
	// continued as new (a wide run: see ContinueAsNewEvents); nil in the
	// first execution.
	Carry *Carry `json:"carry,omitempty"`
	// HistoryLimit is the number of history events past which an execution
	// continues as new; 0: ContinueAsNewEvents.
	HistoryLimit int `json:"history_limit,omitempty"`
	// Pack is how many nodes one activity runs: 0 lets the workflow choose
	// by the run's width (packSize); 1 runs every node in its own activity.
	Pack int `json:"pack,omitempty"`
	// PackBytes bounds the outputs a pack's result carries; 0: PackBytes.
	PackBytes int `json:"pack_bytes,omitempty"`
}

// Carry is a run's state handed from one workflow execution to the next.
// It holds no outputs: a node's output stays in the history of the
// execution that ran it (Runs[Settled.Run-1]), where dependents and the
// client read it.
type Carry struct {
	// Runs are the earlier executions' run ids, first to last.
	Runs []string `json:"runs"`
	// Nodes are the nodes' states, in graph order.
	Nodes []Settled `json:"nodes"`
	// Replays counts the operator's replays of each node (activity ids).
	Replays map[string]int `json:"replays,omitempty"`
	// Signalled are nodes an operator asked to replay (SignalRetry) that
	// the execution before did not start.
	Signalled []string `json:"signalled,omitempty"`
	// Version is the last QueryChanges version of the execution before.
	Version int `json:"version,omitempty"`
}

// Settled is a node's state as carried to the next execution.
type Settled struct {
	State  string `json:"s"`
	Reason string `json:"r,omitempty"`
	// Run is where its last activity ran: 1 + its index in Carry.Runs;
	// 0 when it has none.
	Run    int    `json:"e,omitempty"`
	Bytes  int    `json:"b,omitempty"`
	Worker string `json:"w,omitempty"`
}

// NodeInput is one node's activity: which node of which run, and what it
// needs. It does not grow with the graph: the worker has the graph and
// profile from the run's input (specCache).
type NodeInput struct {
	RunID string `json:"run_id"`
	Node  string `json:"node"`
	// Needs are its needs' outputs inline, up to InlineNeeds bytes in all;
	// NeedRuns the rest: need → the workflow execution (run id) whose
	// history holds its output.
	Needs    map[string]string `json:"needs,omitempty"`
	NeedRuns map[string]string `json:"need_runs,omitempty"`
	Force    bool              `json:"force,omitempty"`
	// Failed names the needs that failed under continue_on_failure.
	Failed []string `json:"failed,omitempty"`

	// Until 2026-12 an activity carried the run's graph and profile; a
	// worker still runs such an activity (a workflow started by an older
	// client) from them.
	GraphPath string            `json:"graph_path,omitempty"`
	GraphText string            `json:"graph_text,omitempty"`
	Profile   *profile.Profile  `json:"profile,omitempty"`
	Inputs    map[string]string `json:"inputs,omitempty"`
}

// PackInput is several nodes of one run in one activity: each runs as a
// NodeInput would alone, at once and side by side, and the activity ends
// when all have. A wide run packs its nodes (packSize) so that Temporal
// starts, heartbeats and completes one activity for many nodes.
type PackInput struct {
	RunID string      `json:"run_id"`
	Nodes []NodeInput `json:"nodes"`
	// Bytes bounds the outputs the result carries (under Temporal's 2 MB
	// payload): a node whose output would go past it sends its outcome to
	// the workflow as a signal (SignalSettled), which the history keeps.
	Bytes int `json:"bytes"`
	// Early are the nodes a dependent waits for alone (its other needs have
	// completed): each sends its outcome by SignalSettled as it ends, so
	// that the dependent starts then, not when the pack's slowest node ends.
	Early []string `json:"early,omitempty"`
}

// PackOutcome is a pack's result: its nodes' outcomes in input order, but
// for those sent by SignalSettled (over PackInput.Bytes, or Early), which
// are left out. A node failed by noderun's profile is an outcome here, not an
// activity failure: its pack's other nodes are done.
type PackOutcome struct {
	Nodes []NodeOutcome `json:"nodes"`
}

// PackBeat is a pack's heartbeat: each node's own Heartbeat, and the
// outcome of each that ended on this attempt, so that the attempt that
// takes the pack over (its worker lost) runs only the others, each from
// its cursor.
type PackBeat struct {
	Nodes []PackNode `json:"nodes"`
}

// PackNode is one node in a pack's heartbeat.
type PackNode struct {
	Heartbeat
	Node string `json:"node"`
	// Done is the node's outcome once it ended (nil while it runs); its
	// Output is left out when the node's outcome went by SignalSettled
	// (Signalled).
	Done      *NodeOutcome `json:"done,omitempty"`
	Signalled bool         `json:"signalled,omitempty"`
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
	// VerdictKind is that verdict's kind; empty from a worker of a noderun
	// older than the kinds.
	VerdictKind ledger.VerdictKind `json:"verdict_kind,omitempty"`
	// Bytes is the output's size (the workflow's state keeps the size, not
	// the output).
	Bytes int `json:"bytes,omitempty"`
	// Run is where the node's last activity ran: 1 + the index of its
	// workflow execution in RunResult.Runs; 0 when it has none.
	Run int `json:"run,omitempty"`
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
//
// The workflow keeps only what its scheduling needs (state, reason, worker,
// the output's size) in each NodeOutcome: the whole outcome (output,
// diagnostics, cursor, verdict) is the node's activity result in the history
// of execution Runs[NodeOutcome.Run-1], where State fills it in from.
type RunResult struct {
	RunID  string        `json:"run_id"`
	Status string        `json:"status"`
	Nodes  []NodeOutcome `json:"nodes"`
	// Runs are the run's workflow executions (run ids), first to last,
	// this one included (continue-as-new; see ContinueAsNewEvents).
	Runs []string `json:"runs,omitempty"`
}

// Changes is the answer to QueryChanges: the run's status and the nodes
// whose state changed after the version asked about, as of Version.
type Changes struct {
	Version int           `json:"version"`
	Status  string        `json:"status"`
	Nodes   []NodeOutcome `json:"nodes,omitempty"`
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
func activityOptions(heartbeat time.Duration, id string) workflow.ActivityOptions {
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

// What keeps a wide run within Temporal's limits (a gRPC message of 4 MB,
// a payload of 2 MB, a history of 51,200 events and 50 MB; docs/temporal.md
// "Wide graphs").
const (
	// InlineNeeds bounds the needs' outputs an activity's input carries;
	// the others go by reference (NodeInput.NeedRuns): the worker reads them
	// from the history that holds them.
	InlineNeeds = 64 << 10
	// batchNodes and batchBytes bound what one workflow task schedules:
	// the task's completion carries every activity's input (under half of
	// the 4 MB gRPC limit).
	batchNodes = 2000
	batchBytes = 2 << 20
	// ContinueAsNewEvents and ContinueAsNewBytes: past either, a workflow
	// execution starts no more nodes, waits for its running ones and
	// continues as new with the run's state (Carry), so the history of none
	// nears Temporal's limits: a fifth of them, leaving room for the nodes
	// still running when it is crossed (three events each, and their
	// results). The server's own suggestion (4,096 events by default) is
	// not followed: each new execution first waits for every running node
	// to finish, which a wide run of long nodes pays for in parallelism.
	ContinueAsNewEvents = 10_000
	ContinueAsNewBytes  = 10 << 20
	// carriedReason bounds a reason carried to the next execution (the
	// whole one stays in the history of the execution that ran the node).
	carriedReason = 512
)

// What packs a wide run's nodes (PackInput). Temporal's cost is per
// activity: a start, a completion, history events, and a heartbeat every
// few seconds while it runs; on a modest server a few hundred activity
// starts a second is what it does, where a local run starts thousands of
// nodes. A run with more than PackActivities nodes running packs them so
// that about PackActivities activities run: 1,000 nodes run as 63 packs of
// 16. A pack ends with its slowest node (its nodes' dependents wait for
// it, but for those that wait for one of them alone: PackInput.Early) and
// runs on one worker, so a run of a few dozen nodes keeps one activity each.
const (
	PackActivities = 64
	MaxPack        = 32
	// PackBytes bounds the outputs a pack's result carries (Temporal: 2 MB
	// a payload); the others go by SignalSettled.
	PackBytes = 1 << 20
	// MaxPackFlag bounds a run's own pack size (RunInput.Pack): a pack's
	// heartbeat and input grow with it.
	MaxPackFlag = 256
)

// packSize is how many nodes an activity starting now runs, with running
// nodes in the run counting it, unless the run says (RunInput.Pack).
func packSize(running, pack int) int {
	if pack > 0 {
		return pack
	}
	return max(1, min((running+PackActivities-1)/PackActivities, MaxPack))
}

// packID is the activity id of a pack: its first node and how many follow
// ("n00017+15"). Node ids have no "+".
func packID(nodes []NodeInput) string {
	return fmt.Sprintf("%s+%d", nodes[0].Node, len(nodes)-1)
}

// GraphWorkflow runs a graph: nodes in dependency order, at most Parallel at
// once, in graph order among the ready ones, by the same state machine as
// runner.Run (package nodestate). A failed node skips its dependents; a node
// held for an operator (its replay may be unsafe) waits for SignalRetry, and
// so do its dependents. It is deterministic: it reads nothing but its input
// and activity results, and the machine is pure.
//
// A wide run keeps every workflow task and history small: activity inputs
// name the run and node (workers read the graph once, from the execution's
// input), outputs of needs go by reference past InlineNeeds, a task
// schedules at most batchNodes activities, and past ContinueAsNewEvents an
// execution drains and continues as new.
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
	m := nodestate.New(g, parallel)
	replays := map[string]int{}
	var forced, signalled []string
	if c := in.Carry; c != nil {
		if len(c.Nodes) != len(g.Nodes) {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("carried state of %d nodes for a graph of %d", len(c.Nodes), len(g.Nodes)), "BadCarry", nil)
		}
		res.Runs = append(res.Runs, c.Runs...)
		for i, s := range c.Nodes {
			o := &res.Nodes[i]
			o.Reason, o.Run, o.Bytes, o.Worker = s.Reason, s.Run, s.Bytes, s.Worker
			if s.State == string(journal.NodePending) || s.State == string(journal.NodeRunning) {
				continue // an execution continues as new with nothing running
			}
			o.State = s.State
			m.Settle(o.Node, journal.NodeState(s.State)) // its skips are carried too
		}
		for id, n := range c.Replays {
			replays[id] = n
		}
		signalled = c.Signalled
	}
	res.Runs = append(res.Runs, workflow.GetInfo(ctx).WorkflowExecution.RunID)
	cur := len(res.Runs)
	// Each node's last change, for QueryChanges: a follower of a wide run
	// asks several times a second, and the whole state of 10,000 nodes is
	// megabytes that the workflow's worker would encode each time.
	// Versions go on from one execution to the next, which starts with every
	// node changed: a follower sees the carried state once.
	version, changed := 1, make([]int, len(res.Nodes))
	if in.Carry != nil {
		version = in.Carry.Version + 1
	}
	for i := range changed {
		changed[i] = version
	}
	touch := func(id string) {
		version++
		changed[at[id]] = version
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (RunResult, error) { return res, nil }); err != nil {
		return res, err
	}
	if err := workflow.SetQueryHandler(ctx, QueryChanges, func(since int) (Changes, error) {
		ch := Changes{Version: version, Status: res.Status}
		for i, v := range changed {
			if v > since {
				ch.Nodes = append(ch.Nodes, res.Nodes[i])
			}
		}
		return ch, nil
	}); err != nil {
		return res, err
	}
	// This execution's outputs, for its dependents' inputs; the result of a
	// node an earlier execution ran is read from that execution's history.
	outputs := map[string]string{}
	running := 0 // nodes whose activity runs
	settle := func(id string, out NodeOutcome, err error) {
		if node(id).State != string(journal.NodeRunning) {
			return // settled already (by SignalSettled, then in its pack's result)
		}
		running--
		if err != nil {
			out = failedOutcome(id, err)
		}
		if out.Output != "" {
			outputs[id] = out.Output
		}
		touch(id)
		*node(id) = NodeOutcome{Node: id, State: out.State, Reason: out.Reason, ErrClass: out.ErrClass, Worker: out.Worker,
			TemporalAttempt: out.TemporalAttempt, Bytes: len(out.Output), Run: cur}
		// A held node (attention) keeps its dependents waiting for SignalRetry.
		for _, s := range m.Settle(id, journal.NodeState(out.State)) {
			o := node(s.ID)
			o.State, o.Reason = string(journal.NodeSkipped), s.Reason()
			touch(s.ID)
		}
	}
	// The running activities, in the order they started. The loop waits for
	// any of them with Await and settles every one that is done: a Selector
	// would register a callback on each running future at every Select, and
	// keep each future it ever had, which is quadratic in a wide run.
	type activityRun struct {
		nodes []string
		pack  bool // a PackOutcome; else the one node's NodeOutcome
		f     workflow.Future
	}
	var inflight []activityRun
	var task struct{ events, nodes, bytes int } // what the current workflow task scheduled
	// input is the activity input of node id, which starts now.
	input := func(id string, force bool) NodeInput {
		n := g.Node(id)
		inp := NodeInput{RunID: in.RunID, Node: id, Force: force}
		inline := 0
		for _, need := range n.Needs {
			o := node(need)
			if o.State == string(journal.NodeFailed) {
				inp.Failed = append(inp.Failed, need)
			}
			out, here := outputs[need]
			switch {
			case (here && inline+len(out) <= InlineNeeds) || o.Bytes == 0: // nothing to refer to
				if inp.Needs == nil {
					inp.Needs = map[string]string{}
				}
				inp.Needs[need] = out
				inline += len(out)
			case o.Run > 0:
				if inp.NeedRuns == nil {
					inp.NeedRuns = map[string]string{}
				}
				inp.NeedRuns[need] = res.Runs[o.Run-1]
			}
		}
		o := node(id)
		o.State, o.Reason = string(journal.NodeRunning), ""
		touch(id)
		running++
		task.nodes++
		task.bytes += inline + len(id) + 256
		return inp
	}
	// A run started by workers before packs (its history has no marker)
	// runs every node alone when a newer worker replays it.
	packs := workflow.GetVersion(ctx, "packs", workflow.DefaultVersion, 1) >= 1
	// launch starts nodes, one activity each or in packs (packSize).
	launch := func(nodes []NodeInput) {
		size := 1
		if packs {
			size = packSize(running, in.Pack)
		}
		for len(nodes) > 0 {
			k := min(size, len(nodes))
			p := nodes[:k]
			nodes = nodes[k:]
			if k == 1 {
				id := p[0].Node
				aid := id
				if r := replays[id]; r > 0 {
					aid = fmt.Sprintf("%s#%d", id, r)
				}
				actx := workflow.WithActivityOptions(ctx, activityOptions(HeartbeatTimeout(in), aid))
				inflight = append(inflight, activityRun{nodes: []string{id}, f: workflow.ExecuteActivity(actx, ActivityName, p[0])})
				continue
			}
			ids := make([]string, k)
			var early []string
			for i, n := range p {
				ids[i] = n.Node
				if m.Unblocks(n.Node) {
					early = append(early, n.Node)
				}
			}
			bytes := in.PackBytes
			if bytes <= 0 {
				bytes = PackBytes
			}
			actx := workflow.WithActivityOptions(ctx, activityOptions(HeartbeatTimeout(in), packID(p)))
			inflight = append(inflight, activityRun{nodes: ids, pack: true,
				f: workflow.ExecuteActivity(actx, PackActivityName, PackInput{RunID: in.RunID, Nodes: p, Bytes: bytes, Early: early})})
		}
	}
	sig := workflow.GetSignalChannel(ctx, SignalRetry)
	settled := workflow.GetSignalChannel(ctx, SignalSettled)
	replay := func(id string) {
		if m.Replay(id) {
			replays[id]++
			forced = append(forced, id)
		}
	}
	for _, id := range signalled {
		replay(id)
	}
	signalled = nil
	draining := false
	var tick workflow.Future // ends a workflow task that scheduled a full batch
	limit := ContinueAsNewEvents
	if in.HistoryLimit > 0 {
		limit = in.HistoryLimit
	}
	for {
		info := workflow.GetInfo(ctx)
		if n := info.GetCurrentHistoryLength(); n != task.events {
			task.events, task.nodes, task.bytes = n, 0, 0 // a new workflow task
		}
		if !draining && (info.GetCurrentHistoryLength() >= limit || info.GetCurrentHistorySize() >= ContinueAsNewBytes) {
			draining = true
		}
		var id string
		for sig.ReceiveAsync(&id) {
			if draining {
				signalled = append(signalled, id) // for the next execution
			} else {
				replay(id)
			}
		}
		for len(forced) > 0 {
			id := forced[0]
			forced = forced[1:]
			launch([]NodeInput{input(id, true)}) // a replay runs alone
		}
		full := false
		var ready []NodeInput
		for !draining {
			if full = task.nodes >= batchNodes || task.bytes >= batchBytes; full {
				break
			}
			id, ok := m.Next()
			if !ok {
				break
			}
			ready = append(ready, input(id, false))
		}
		launch(ready)
		if full && tick == nil {
			// End this workflow task: the next one schedules the rest.
			tick = workflow.NewTimer(ctx, time.Millisecond)
		}
		if len(inflight) == 0 && !full {
			if draining && unsettled(res.Nodes) {
				return res, continueAsNew(ctx, in, res, replays, sig, signalled, version)
			}
			if m.Held() == 0 {
				break
			}
			res.Status = string(journal.NodeAttention) // waiting for an operator only
		}
		if err := workflow.Await(ctx, func() bool {
			if sig.Len() > 0 || settled.Len() > 0 || tick != nil && tick.IsReady() {
				return true
			}
			for _, r := range inflight {
				if r.f.IsReady() {
					return true
				}
			}
			return false
		}); err != nil {
			return res, err
		}
		if tick != nil && tick.IsReady() {
			tick = nil
		}
		// A pack sends what does not fit in its result before it ends: the
		// signal is in the history before the pack's completion.
		var out NodeOutcome
		for settled.ReceiveAsync(&out) {
			settle(out.Node, out, nil)
		}
		left := inflight[:0]
		for _, r := range inflight {
			if !r.f.IsReady() {
				left = append(left, r)
				continue
			}
			settleActivity(ctx, r.nodes, r.pack, r.f, settle)
		}
		clear(inflight[len(left):])
		inflight = left
		if res.Status == string(journal.NodeAttention) {
			res.Status = string(journal.RunRunning)
		}
	}
	res.Status = string(journal.RunCompleted)
	for _, o := range res.Nodes {
		if o.State != string(journal.NodeCompleted) {
			res.Status = string(journal.RunFailed)
		}
	}
	return res, nil
}

// settleActivity settles the nodes of an activity that ended: a node's
// outcome, or each of a pack's (a node left out of the pack's result was
// settled by SignalSettled; one that is in neither failed).
func settleActivity(ctx workflow.Context, nodes []string, pack bool, f workflow.Future, settle func(string, NodeOutcome, error)) {
	if !pack {
		var out NodeOutcome
		err := f.Get(ctx, &out)
		settle(nodes[0], out, err)
		return
	}
	var res PackOutcome
	err := f.Get(ctx, &res)
	got := map[string]bool{}
	for _, o := range res.Nodes {
		if err == nil {
			got[o.Node] = true
			settle(o.Node, o, nil)
		}
	}
	for _, id := range nodes {
		if got[id] {
			continue
		}
		e := err
		if e == nil {
			e = fmt.Errorf("node %s: its pack's result has no outcome of it", id)
		}
		settle(id, NodeOutcome{}, e) // a no-op for a node SignalSettled settled
	}
}

// unsettled reports whether a node still waits to run or for an operator.
func unsettled(nodes []NodeOutcome) bool {
	for _, o := range nodes {
		switch journal.NodeState(o.State) {
		case journal.NodePending, journal.NodeRunning, journal.NodeAttention:
			return true
		}
	}
	return false
}

// continueAsNew hands the run, with nothing running, to a new execution:
// the nodes' states and where their results are, the operator's replays,
// and the retry signals not yet acted on (read from the channel now, as a
// signal left in it would be lost with this execution).
func continueAsNew(ctx workflow.Context, in RunInput, res RunResult, replays map[string]int, sig workflow.ReceiveChannel, signalled []string, version int) error {
	var id string
	for sig.ReceiveAsync(&id) {
		signalled = append(signalled, id)
	}
	c := &Carry{Runs: res.Runs, Replays: replays, Signalled: signalled, Version: version, Nodes: make([]Settled, len(res.Nodes))}
	for i, o := range res.Nodes {
		reason := o.Reason
		if len(reason) > carriedReason {
			reason = reason[:carriedReason] + "…"
		}
		c.Nodes[i] = Settled{State: o.State, Reason: reason, Run: o.Run, Bytes: o.Bytes, Worker: o.Worker}
	}
	next := in
	next.Carry = c
	return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
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
