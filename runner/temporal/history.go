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
	scheduled := map[int64]int{} // scheduled event id → index in h.Activities
	act := func(id int64) *Activity {
		if i, ok := scheduled[id]; ok {
			return &h.Activities[i]
		}
		return nil
	}
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
			node, replay := splitActivityID(a.GetActivityId())
			scheduled[ev.GetEventId()] = len(h.Activities)
			h.Activities = append(h.Activities, Activity{Node: node, Replay: replay, Run: runID, Scheduled: at,
				State: "running", HeartbeatTimeout: a.GetHeartbeatTimeout().AsDuration()})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if x := act(a.GetScheduledEventId()); x != nil {
				x.Started, x.Attempt, x.Worker = at, a.GetAttempt(), a.GetIdentity()
				if f := a.GetLastFailure(); f != nil {
					x.LastFailure = f.GetMessage()
					x.lastHeartbeat(dc, f)
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if x := act(a.GetScheduledEventId()); x != nil {
				x.Closed, x.State = at, "completed"
				var out NodeOutcome
				if p := a.GetResult().GetPayloads(); len(p) > 0 {
					if err := dc.FromPayload(p[0], &out); err != nil {
						return "", fmt.Errorf("execution %s: node %s's result: %w", runID, x.Node, err)
					}
					x.Outcome = &out
					x.fromOutcome()
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			if x := act(a.GetScheduledEventId()); x != nil {
				x.Closed, x.State = at, "failed"
				x.failed(dc, a.GetFailure())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			if x := act(a.GetScheduledEventId()); x != nil {
				x.Closed, x.State = at, "timed_out"
				x.failed(dc, a.GetFailure())
				x.lastHeartbeat(dc, a.GetFailure())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			a := ev.GetActivityTaskCanceledEventAttributes()
			if x := act(a.GetScheduledEventId()); x != nil {
				x.Closed, x.State, x.Failure = at, "canceled", "canceled"
			}
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
			if dc.FromPayload(p[0], &out) == nil {
				x.Outcome = &out
				x.fromOutcome()
			}
		}
	}
}

// lastHeartbeat reads a timeout failure's last heartbeat details (the final
// timeout of an activity that is not retried carries them).
func (x *Activity) lastHeartbeat(dc converter.DataConverter, f *failurepb.Failure) {
	for ; f != nil; f = f.GetCause() {
		if ti := f.GetTimeoutFailureInfo(); ti != nil {
			if hb, ok := decodeHeartbeat(dc, ti.GetLastHeartbeatDetails()); ok {
				x.setHeartbeat(hb)
			}
			return
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
