package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// Heartbeat is what a worker heartbeats for a node: the node's cursor (its
// JSON fields flat, so a reader that wants the cursor alone decodes it into
// a runner.NodeCursor), the worker that sent it and when. A retried attempt
// starts from it; Temporal keeps it out of the history (a retry's started
// event names the failure, not the details), so the attempt that takes a
// node over returns it in its NodeOutcome (From): that is how the history
// names the worker that was lost and when it was last heard of.
type Heartbeat struct {
	runner.NodeCursor
	// Worker is the identity of the worker that sent it.
	Worker string `json:"worker,omitempty"`
	// At is when the worker recorded it (the SDK may send it up to
	// HeartbeatThrottle later; the server's heartbeat time is not kept).
	At time.Time `json:"at,omitzero"`
	// LostWorker and LostAt name the worker this attempt took the node
	// over from and its last heartbeat, while the node runs (diagnose names
	// a hand-over under way from them; the outcome's From once it ends).
	LostWorker string    `json:"lost_worker,omitempty"`
	LostAt     time.Time `json:"lost_at,omitzero"`
}

// Activity is one node activity as the history shows it.
type Activity struct {
	Node   string // activity id without its "#n" replay suffix
	Replay int    // n of "NODE#n" (an operator's n-th replay), 0 otherwise
	Run    string // the workflow execution (run id) that scheduled it
	// Scheduled, Started and Closed are zero when not (yet) in the history.
	// Started is the start of the last attempt: Temporal writes one
	// started event per activity, for the attempt that closed it.
	Scheduled, Started, Closed time.Time
	Attempt                    int32  // the activity attempt that closed it (above 1: a worker was lost or stopped)
	Worker                     string // identity of the worker that started the last attempt
	State                      string // "completed", "failed", "timed_out", "canceled", "running"
	// Outcome is the result, or the details of a NodeFailed failure; nil otherwise.
	Outcome *NodeOutcome
	Failure string // the failure message when it did not complete
	// LastFailure is the failure of the attempt before the last one (e.g.
	// "activity Heartbeat timeout"), from the started event.
	LastFailure string
	// LastHeartbeat is the lost attempt's last heartbeat: the details of a
	// final timeout failure, else what the attempt that took the node over
	// started from (NodeOutcome.From); nil if none.
	LastHeartbeat *runner.NodeCursor
	// LostWorker and LastBeat are who sent LastHeartbeat and when (empty
	// for heartbeats of workers before they were recorded).
	LostWorker string
	LastBeat   time.Time
	// HeartbeatTimeout is the activity's heartbeat timeout as scheduled.
	HeartbeatTimeout time.Duration
	// Pack is the activity id of the pack that ran the node ("FIRST+N",
	// PackActivityName), "" for a node that ran alone. A pack's nodes share
	// its times, attempt and worker, but a node whose outcome went by
	// SignalSettled closed when the signal came, on the attempt and worker
	// its outcome names.
	Pack string
}

// History is a run's history across continue-as-new.
type History struct {
	WorkflowID      string
	Runs            []string // execution run ids, first to last
	Status          string   // the last execution's status, lower case
	Started, Closed time.Time
	Activities      []Activity // in scheduled order
	Events          int        // history events, all executions
	Bytes           int64      // history size in bytes (proto size), all executions
	// Input is the first execution's input (a RunInput, as the default
	// data converter encoded it); nil if the history does not hold it.
	Input *commonpb.Payloads
}

// ReadHistory reads the workflow's history: from its first execution (the
// started event's FirstExecutionRunId) through every continue-as-new.
func ReadHistory(ctx context.Context, c client.Client, workflowID string) (*History, error) {
	first, err := firstRun(ctx, c, workflowID)
	if err != nil {
		return nil, err
	}
	h := &History{WorkflowID: workflowID, Status: "running"}
	for runID := first; runID != ""; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		evs, err := runEvents(ctx, c, workflowID, runID)
		if err != nil {
			return nil, err
		}
		next, err := h.add(runID, evs)
		if err != nil {
			return nil, err
		}
		runID = next
	}
	return h, nil
}

// decodeHistory reads recorded histories (one per execution, first to last)
// as ReadHistory reads them from the server.
func decodeHistory(workflowID string, runs ...*historypb.History) (*History, error) {
	h := &History{WorkflowID: workflowID, Status: "running"}
	for _, r := range runs {
		evs := r.GetEvents()
		runID := ""
		if len(evs) > 0 {
			runID = evs[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
		}
		if _, err := h.add(runID, evs); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// firstRun is the run id of the workflow's first execution: a run that
// continued as new is described by its last execution.
func firstRun(ctx context.Context, c client.Client, workflowID string) (string, error) {
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return "", fmt.Errorf("run %s: no such workflow on Temporal: %w", workflowID, journal.ErrNotFound)
		}
		return "", fmt.Errorf("run %s: %w", workflowID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if id := info.GetFirstRunId(); id != "" {
		return id, nil
	}
	// An older server: the last execution's started event names the first.
	it := c.GetWorkflowHistory(ctx, workflowID, info.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return "", fmt.Errorf("run %s: empty history", workflowID)
	}
	ev, err := it.Next()
	if err != nil {
		return "", fmt.Errorf("run %s: history: %w", workflowID, err)
	}
	if id := ev.GetWorkflowExecutionStartedEventAttributes().GetFirstExecutionRunId(); id != "" {
		return id, nil
	}
	return info.GetExecution().GetRunId(), nil
}

func runEvents(ctx context.Context, c client.Client, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var evs []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("run %s: history of execution %s: %w", workflowID, runID, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// add reads one execution's events and returns the run id it continued as
// ("" when it did not).
func (h *History) add(runID string, evs []*historypb.HistoryEvent) (next string, err error) {
	h.Runs = append(h.Runs, runID)
	dc := converter.GetDefaultDataConverter()
	// A scheduled activity's entries in h.Activities: one node's, or a
	// pack's nodes' (appended together, so contiguous).
	type span struct{ from, n int }
	scheduled := map[int64]span{} // scheduled event id → its entries
	acts := func(id int64) []Activity {
		if s, ok := scheduled[id]; ok {
			return h.Activities[s.from : s.from+s.n]
		}
		return nil
	}
	latest := map[string]int{} // node → its last entry in this execution, for SignalSettled
	h.Status = "running"
	for _, ev := range evs {
		h.Events++
		h.Bytes += int64(proto.Size(ev))
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if h.Started.IsZero() {
				h.Started = at
				h.Input = ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			base := Activity{Run: runID, Scheduled: at, State: "running", HeartbeatTimeout: a.GetHeartbeatTimeout().AsDuration()}
			if a.GetActivityType().GetName() != PackActivityName {
				base.Node, base.Replay = splitActivityID(a.GetActivityId())
				scheduled[ev.GetEventId()] = span{len(h.Activities), 1}
				latest[base.Node] = len(h.Activities)
				h.Activities = append(h.Activities, base)
				continue
			}
			nodes, err := packNodes(dc, a.GetInput())
			if err != nil {
				return "", fmt.Errorf("execution %s: pack %s's input: %w", runID, a.GetActivityId(), err)
			}
			scheduled[ev.GetEventId()] = span{len(h.Activities), len(nodes)}
			base.Pack = a.GetActivityId() // a replay runs alone: a packed node has no "#n"
			for _, node := range nodes {
				x := base
				x.Node = node
				latest[node] = len(h.Activities)
				h.Activities = append(h.Activities, x)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			xs := acts(a.GetScheduledEventId())
			for i := range xs {
				x := &xs[i]
				if !x.Closed.IsZero() && x.Attempt > 0 && x.Attempt < a.GetAttempt() {
					// Settled by SignalSettled on an earlier attempt: this
					// event is the attempt that ran the pack's other nodes.
					continue
				}
				x.Started, x.Attempt, x.Worker = at, a.GetAttempt(), a.GetIdentity()
				if f := a.GetLastFailure(); f != nil {
					x.LastFailure = f.GetMessage()
				}
			}
			if f := a.GetLastFailure(); f != nil {
				heartbeats(dc, xs, timeoutDetails(f))
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			xs := acts(a.GetScheduledEventId())
			if len(xs) == 0 {
				continue
			}
			p := a.GetResult().GetPayloads()
			if xs[0].Pack == "" {
				x := &xs[0]
				x.Closed, x.State = at, "completed"
				var out NodeOutcome
				if len(p) > 0 {
					if err := dc.FromPayload(p[0], &out); err != nil {
						return "", fmt.Errorf("execution %s: node %s's result: %w", runID, x.Node, err)
					}
					x.Outcome = &out
					x.fromOutcome()
				}
				continue
			}
			var res PackOutcome
			if len(p) > 0 {
				if err := dc.FromPayload(p[0], &res); err != nil {
					return "", fmt.Errorf("execution %s: pack %s's result: %w", runID, xs[0].Pack, err)
				}
			}
			outs := make(map[string]NodeOutcome, len(res.Nodes))
			for _, o := range res.Nodes {
				outs[o.Node] = o
			}
			for i := range xs {
				x := &xs[i]
				if !x.Closed.IsZero() {
					continue // settled by SignalSettled (its outcome is left out of the result)
				}
				x.Closed = at
				if o, ok := outs[x.Node]; ok {
					x.settle(o)
				} else {
					// As the workflow settles it (settleActivity).
					x.State, x.Failure = "failed", "its pack's result has no outcome of it"
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			xs := acts(a.GetScheduledEventId())
			for i := range xs {
				if x := &xs[i]; x.Closed.IsZero() {
					x.Closed, x.State = at, "failed"
					x.failed(dc, a.GetFailure())
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			xs := acts(a.GetScheduledEventId())
			for i := range xs {
				if x := &xs[i]; x.Closed.IsZero() { // not settled by SignalSettled
					x.Closed, x.State = at, "timed_out"
					x.failed(dc, a.GetFailure())
				}
			}
			heartbeats(dc, xs, timeoutDetails(a.GetFailure()))
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			a := ev.GetActivityTaskCanceledEventAttributes()
			xs := acts(a.GetScheduledEventId())
			for i := range xs {
				if x := &xs[i]; x.Closed.IsZero() {
					x.Closed, x.State, x.Failure = at, "canceled", "canceled"
				}
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a := ev.GetWorkflowExecutionSignaledEventAttributes()
			if a.GetSignalName() != SignalSettled {
				continue
			}
			var out NodeOutcome
			if p := a.GetInput().GetPayloads(); len(p) > 0 {
				if err := dc.FromPayload(p[0], &out); err != nil {
					return "", fmt.Errorf("execution %s: a %s signal: %w", runID, SignalSettled, err)
				}
			}
			i, ok := latest[out.Node]
			if !ok || !h.Activities[i].Closed.IsZero() {
				continue // as the workflow does: a node settles once
			}
			x := &h.Activities[i]
			x.Closed = at
			// The pack's started event is its last attempt's: the signal
			// names the attempt and worker that finished this node.
			if out.TemporalAttempt > 0 {
				x.Attempt, x.Worker = out.TemporalAttempt, out.Worker
			}
			x.settle(out)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			h.Status, h.Closed = "completed", at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			h.Status, h.Closed = "failed", at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			h.Status, h.Closed = "timed_out", at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			h.Status, h.Closed = "canceled", at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			h.Status, h.Closed = "terminated", at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			// The status of the next execution replaces it, if there is one.
			h.Status, h.Closed = "continued_as_new", at
			next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return next, nil
}

// splitActivityID splits "NODE#n" (an operator's n-th replay).
func splitActivityID(id string) (string, int) {
	node, n, ok := strings.Cut(id, "#")
	if !ok {
		return id, 0
	}
	var replay int
	if _, err := fmt.Sscanf(n, "%d", &replay); err != nil {
		return id, 0
	}
	return node, replay
}

// packNodes are the nodes of a pack's input (a PackInput), in order. Only
// the ids are decoded: the needs' outputs an input carries inline can be
// megabytes in a wide run, and the history reader has no use for them.
func packNodes(dc converter.DataConverter, p *commonpb.Payloads) ([]string, error) {
	var in struct {
		Nodes []struct {
			Node string `json:"node"`
		} `json:"nodes"`
	}
	if len(p.GetPayloads()) == 0 {
		return nil, errors.New("no input")
	}
	if err := dc.FromPayload(p.GetPayloads()[0], &in); err != nil {
		return nil, err
	}
	if len(in.Nodes) == 0 {
		return nil, errors.New("no nodes")
	}
	nodes := make([]string, len(in.Nodes))
	for i, n := range in.Nodes {
		nodes[i] = n.Node
	}
	return nodes, nil
}

// settle records a node's outcome from its pack (its result, or
// SignalSettled): a pack completes whatever its nodes' outcomes, so each
// node's activity state is what its own activity's would have been (a node
// failed by noderun's profile fails its activity, NodeFailed; a held node
// completes it).
func (x *Activity) settle(o NodeOutcome) {
	x.Outcome = &o
	switch journal.NodeState(o.State) {
	case journal.NodeCompleted, journal.NodeAttention:
		x.State = "completed"
	default:
		x.State, x.Failure = "failed", o.Reason
	}
	x.fromOutcome()
}

// failed records a failure: its message and, for NodeFailed, the outcome
// its details carry.
func (x *Activity) failed(dc converter.DataConverter, f *failurepb.Failure) {
	x.Failure = f.GetMessage()
	if c := f.GetCause(); c != nil && c.GetMessage() != "" {
		x.Failure += ": " + c.GetMessage()
	}
	if ai := f.GetApplicationFailureInfo(); ai != nil && ai.GetType() == errNodeFailed {
		if p := ai.GetDetails().GetPayloads(); len(p) > 0 {
			var out NodeOutcome
			// A pack's nodes fail by outcomes in its result, not by
			// NodeFailed: an outcome here is one node's.
			if dc.FromPayload(p[0], &out) == nil && (x.Pack == "" || out.Node == x.Node) {
				x.Outcome = &out
				x.fromOutcome()
			}
		}
	}
}

// timeoutDetails are the last heartbeat details of a timeout failure (or of
// its cause): the final timeout of an activity that is not retried carries
// them. nil if f is no timeout.
func timeoutDetails(f *failurepb.Failure) *commonpb.Payloads {
	for ; f != nil; f = f.GetCause() {
		if ti := f.GetTimeoutFailureInfo(); ti != nil {
			return ti.GetLastHeartbeatDetails()
		}
	}
	return nil
}

// heartbeats gives the entries of one activity their lost attempt's last
// heartbeat from its details: a node's Heartbeat, or a pack's PackBeat, of
// which each node gets its own (but a node that had ended: it was not lost).
// A heartbeat that does not decode names nobody: it is diagnostics, and the
// outcomes a dependent reads from the same history must not fail for it.
func heartbeats(dc converter.DataConverter, xs []Activity, details *commonpb.Payloads) {
	p := details.GetPayloads()
	if len(xs) == 0 || len(p) == 0 {
		return
	}
	if xs[0].Pack == "" {
		if hb, ok := decodeHeartbeat(dc, details); ok {
			xs[0].setHeartbeat(hb)
		}
		return
	}
	var beat PackBeat
	if dc.FromPayload(p[0], &beat) != nil {
		return
	}
	by := make(map[string]PackNode, len(beat.Nodes))
	for _, n := range beat.Nodes {
		by[n.Node] = n
	}
	for i := range xs {
		if n, ok := by[xs[i].Node]; ok && n.Done == nil {
			xs[i].setHeartbeat(n.Heartbeat)
		}
	}
}

// fromOutcome takes the lost attempt's last heartbeat from the outcome of the
// attempt that continued it.
func (x *Activity) fromOutcome() {
	if x.LastHeartbeat == nil && x.Outcome != nil && x.Outcome.From != nil {
		x.setHeartbeat(*x.Outcome.From)
	}
}

func (x *Activity) setHeartbeat(hb Heartbeat) {
	c := hb.NodeCursor
	x.LastHeartbeat, x.LostWorker, x.LastBeat = &c, hb.Worker, hb.At
}

func decodeHeartbeat(dc converter.DataConverter, p *commonpb.Payloads) (Heartbeat, bool) {
	var hb Heartbeat
	if len(p.GetPayloads()) == 0 {
		return hb, false
	}
	return hb, dc.FromPayload(p.GetPayloads()[0], &hb) == nil
}

// PendingActivity is a node whose activity runs (or waits to be retried), as
// DescribeWorkflowExecution shows it: a node alone, or one of a pack's
// running nodes.
type PendingActivity struct {
	Node   string
	Replay int // n of "NODE#n" (an operator's n-th replay), 0 otherwise
	// ActivityID is the activity's id: "NODE", "NODE#n", or a pack's
	// "FIRST+N" (Pack is then true).
	ActivityID string
	Pack       bool
	Attempt    int32     // above 1: an earlier worker was lost or stopped
	Started    time.Time // the running attempt's start; zero while it waits for a worker
	Worker     string    // the worker of the last attempt started
	// LastFailure is how the attempt before ended ("activity Heartbeat
	// timeout"); LastBeat when Temporal last got a heartbeat.
	LastFailure string
	LastBeat    time.Time
	// Beat is the node's last heartbeat (its own, from a pack's PackBeat):
	// until the running attempt sends one, the lost attempt's.
	Beat Heartbeat
}

// PendingActivities decodes a run's running activities into one entry a
// running node: a pack's heartbeat (PackBeat) lists its nodes, of which those
// that ended (Done) are left out. A pack that has sent no heartbeat yet names
// none of its nodes but its first (its activity id's), which stands for it.
// A heartbeat that does not decode names nobody.
func PendingActivities(d *workflowservice.DescribeWorkflowExecutionResponse) []PendingActivity {
	var out []PendingActivity
	dc := converter.GetDefaultDataConverter()
	for _, pa := range d.GetPendingActivities() {
		p := PendingActivity{ActivityID: pa.GetActivityId(), Attempt: pa.GetAttempt(), Worker: pa.GetLastWorkerIdentity(),
			LastFailure: pa.GetLastFailure().GetMessage()}
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && pa.GetLastStartedTime() != nil {
			p.Started = pa.GetLastStartedTime().AsTime()
		}
		if pa.GetLastHeartbeatTime() != nil {
			p.LastBeat = pa.GetLastHeartbeatTime().AsTime()
		}
		hd := pa.GetHeartbeatDetails().GetPayloads()
		if pa.GetActivityType().GetName() != PackActivityName {
			p.Node, p.Replay = splitActivityID(p.ActivityID)
			if len(hd) > 0 {
				_ = dc.FromPayload(hd[0], &p.Beat)
			}
			out = append(out, p)
			continue
		}
		p.Pack = true
		var beat PackBeat
		if len(hd) == 0 || dc.FromPayload(hd[0], &beat) != nil || len(beat.Nodes) == 0 {
			p.Node, _, _ = strings.Cut(p.ActivityID, "+")
			out = append(out, p)
			continue
		}
		for _, n := range beat.Nodes {
			if n.Done != nil {
				continue
			}
			q := p
			q.Node, q.Beat = n.Node, n.Heartbeat
			out = append(out, q)
		}
	}
	return out
}
