package temporal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/noderun/noderun/runner"
)

// packEvents builds synthetic histories event by event, as the server
// records them (ids in order, times from t0).
type packEvents struct {
	t   *testing.T
	t0  time.Time
	evs []*historypb.HistoryEvent
}

func (b *packEvents) payloads(v any) *commonpb.Payloads {
	b.t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		b.t.Fatal(err)
	}
	return p
}

// add appends an event at ms after t0 and returns its id.
func (b *packEvents) add(ms int, typ enumspb.EventType, attrs any) int64 {
	id := int64(len(b.evs) + 1)
	ev := &historypb.HistoryEvent{EventId: id, EventTime: timestamppb.New(b.t0.Add(time.Duration(ms) * time.Millisecond)), EventType: typ}
	switch a := attrs.(type) {
	case *historypb.WorkflowExecutionStartedEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: a}
	case *historypb.ActivityTaskScheduledEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: a}
	case *historypb.ActivityTaskStartedEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: a}
	case *historypb.ActivityTaskCompletedEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: a}
	case *historypb.ActivityTaskTimedOutEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes{ActivityTaskTimedOutEventAttributes: a}
	case *historypb.WorkflowExecutionSignaledEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: a}
	case nil:
	default:
		b.t.Fatalf("no event of %T", attrs)
	}
	b.evs = append(b.evs, ev)
	return id
}

func (b *packEvents) started(runID string) {
	b.add(0, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, &historypb.WorkflowExecutionStartedEventAttributes{OriginalExecutionRunId: runID})
}

func (b *packEvents) schedule(ms int, typ, id string, heartbeat time.Duration, input any) int64 {
	return b.add(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, &historypb.ActivityTaskScheduledEventAttributes{ActivityId: id,
		ActivityType: &commonpb.ActivityType{Name: typ}, Input: b.payloads(input), HeartbeatTimeout: durationpb.New(heartbeat)})
}

func (b *packEvents) signal(ms int, name string, v any) {
	b.add(ms, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name, Input: b.payloads(v)})
}

func (b *packEvents) history() *historypb.History { return &historypb.History{Events: b.evs} }

// heartbeatTimeout is a heartbeat timeout failure carrying the lost
// attempt's last heartbeat details.
func heartbeatTimeout(details *commonpb.Payloads) *failurepb.Failure {
	return &failurepb.Failure{Message: "activity Heartbeat timeout", FailureInfo: &failurepb.Failure_TimeoutFailureInfo{
		TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_HEARTBEAT, LastHeartbeatDetails: details}}}
}

// A history of packed nodes reads as one entry a node, each with its own
// outcome and heartbeat:
//   - pack a+2 (a, b, c): worker w1 settles c by SignalSettled (its output
//     too big for the result), then is lost; attempt 2 on w2 completes the
//     pack with a's and b's outcomes (b failed by the profile). Its started
//     event's last failure is the timeout, with w1's PackBeat.
//   - node d alone, completed.
//   - pack e+1 (e, f), not retried: f settled by SignalSettled on attempt
//     1, then the pack times out with e running.
//
// A second execution's stray SignalSettled for c touches nothing of the
// first's. The outcomes dependents and Outcomes read hold every node's.
func TestDecodePackHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	beat := func(ref, worker string, ms int) Heartbeat {
		return Heartbeat{NodeCursor: runner.NodeCursor{Ref: ref, Seq: 5, Bytes: 40}, Worker: worker, At: at(ms)}
	}
	big := strings.Repeat("c", 1000)
	cOut := NodeOutcome{Node: "c", State: "completed", Output: big, Worker: "w1", TemporalAttempt: 1}

	e1 := &packEvents{t: t, t0: t0}
	e1.started("e1")
	pa := e1.schedule(10, PackActivityName, "a+2", 10*time.Second, PackInput{RunID: "r", Bytes: 100,
		Nodes: []NodeInput{{RunID: "r", Node: "a"}, {RunID: "r", Node: "b", Needs: map[string]string{"x": "an output"}}, {RunID: "r", Node: "c"}}})
	d := e1.schedule(11, ActivityName, "d", 10*time.Second, NodeInput{RunID: "r", Node: "d"})
	pe := e1.schedule(12, PackActivityName, "e+1", 5*time.Second, PackInput{RunID: "r", Bytes: 100,
		Nodes: []NodeInput{{RunID: "r", Node: "e"}, {RunID: "r", Node: "f"}}})
	e1.signal(500, SignalSettled, cOut)
	e1.signal(600, SignalRetry, "zzz") // another signal: not an outcome
	e1.signal(700, SignalSettled, NodeOutcome{Node: "f", State: "completed", Output: "out f", Worker: "w3", TemporalAttempt: 1})
	e1.add(800, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: d, Attempt: 1, Identity: "w1"})
	e1.add(900, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: d,
		Result: e1.payloads(NodeOutcome{Node: "d", State: "completed", Output: "out d", Worker: "w1", TemporalAttempt: 1})})
	// Pack e+1 (one attempt) times out: e still ran, f had ended.
	e1.add(5000, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: pe, Attempt: 1, Identity: "w3"})
	e1.add(6000, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, &historypb.ActivityTaskTimedOutEventAttributes{ScheduledEventId: pe,
		Failure: heartbeatTimeout(e1.payloads(PackBeat{Nodes: []PackNode{
			{Node: "e", Heartbeat: beat("resp_e", "w3", 900)},
			{Node: "f", Heartbeat: beat("resp_f", "w3", 700), Done: &NodeOutcome{Node: "f", State: "completed"}, Signalled: true}}}))})
	// Pack a+2: w1 lost after c; w2's attempt 2 runs a and b.
	e1.add(11000, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: pa, Attempt: 2, Identity: "w2",
		LastFailure: heartbeatTimeout(e1.payloads(PackBeat{Nodes: []PackNode{
			{Node: "a", Heartbeat: beat("resp_a", "w1", 1000)},
			{Node: "b", Heartbeat: beat("resp_b", "w1", 1100)},
			{Node: "c", Heartbeat: beat("resp_c", "w1", 500), Done: &NodeOutcome{Node: "c", State: "completed"}, Signalled: true}}}))})
	e1.add(12000, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: pa,
		Result: e1.payloads(PackOutcome{Nodes: []NodeOutcome{
			{Node: "a", State: "completed", Output: "out a", Worker: "w2", TemporalAttempt: 2},
			{Node: "b", State: "failed", Reason: "boom", Worker: "w2", TemporalAttempt: 2}}})})

	e2 := &packEvents{t: t, t0: t0.Add(time.Minute)}
	e2.started("e2")
	e2.signal(10, SignalSettled, NodeOutcome{Node: "c", State: "failed", Reason: "stray"})

	h, err := decodeHistory("r", e1.history(), e2.history())
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	got := map[string]Activity{}
	for _, a := range h.Activities {
		order = append(order, a.Node)
		got[a.Node] = a
	}
	if strings.Join(order, ",") != "a,b,c,d,e,f" {
		t.Fatalf("entries %v", order)
	}
	type want struct {
		pack, state, worker, output, failure string
		attempt                              int32
		started, closed                      time.Time
		lost, ref                            string // the lost worker and its last heartbeat's Ref
		beat                                 time.Time
		lastFailure                          string
	}
	wants := map[string]want{
		"a": {pack: "a+2", state: "completed", worker: "w2", attempt: 2, output: "out a", started: at(11000), closed: at(12000),
			lost: "w1", ref: "resp_a", beat: at(1000), lastFailure: "activity Heartbeat timeout"},
		"b": {pack: "a+2", state: "failed", worker: "w2", attempt: 2, failure: "boom", started: at(11000), closed: at(12000),
			lost: "w1", ref: "resp_b", beat: at(1100), lastFailure: "activity Heartbeat timeout"},
		// Settled by w1's attempt 1: the pack's started event (attempt 2) is not its.
		"c": {pack: "a+2", state: "completed", worker: "w1", attempt: 1, output: big, closed: at(500)},
		"d": {state: "completed", worker: "w1", attempt: 1, output: "out d", started: at(800), closed: at(900)},
		"e": {pack: "e+1", state: "timed_out", worker: "w3", attempt: 1, failure: "activity Heartbeat timeout", started: at(5000), closed: at(6000),
			lost: "w3", ref: "resp_e", beat: at(900)},
		// Settled on the attempt that timed out: its start is the pack's.
		"f": {pack: "e+1", state: "completed", worker: "w3", attempt: 1, output: "out f", started: at(5000), closed: at(700)},
	}
	for node, w := range wants {
		a := got[node]
		output := ""
		if a.Outcome != nil {
			output = a.Outcome.Output
		}
		ref := ""
		if a.LastHeartbeat != nil {
			ref = a.LastHeartbeat.Ref
		}
		if a.Pack != w.pack || a.State != w.state || a.Worker != w.worker || a.Attempt != w.attempt || output != w.output || a.Failure != w.failure ||
			!a.Started.Equal(w.started) || !a.Closed.Equal(w.closed) || a.LostWorker != w.lost || ref != w.ref || !a.LastBeat.Equal(w.beat) ||
			a.LastFailure != w.lastFailure || a.Run != "e1" || a.Replay != 0 {
			t.Errorf("%s: %+v (outcome %+v, last heartbeat %+v), want %+v", node, a, a.Outcome, a.LastHeartbeat, w)
		}
	}
	if hb := got["a"].HeartbeatTimeout; hb != 10*time.Second || got["e"].HeartbeatTimeout != 5*time.Second || !got["c"].Scheduled.Equal(at(10)) {
		t.Errorf("a's heartbeat timeout %s, e's %s; c scheduled %s", hb, got["e"].HeartbeatTimeout, got["c"].Scheduled)
	}

	// What a dependent and Outcomes read: every node's outcome, the
	// signalled ones' whole outputs among them.
	outs := h.outcomes()
	for node, out := range map[string]string{"a": "out a", "c": big, "d": "out d", "f": "out f"} {
		if o, ok := outs[node]; !ok || o.Output != out || o.Node != node {
			t.Errorf("outcome of %s: %+v (%v)", node, o, ok)
		}
	}
	if o := outs["b"]; o.State != "failed" || o.Reason != "boom" {
		t.Errorf("outcome of b: %+v", o)
	}
	if _, ok := outs["e"]; ok || len(outs) != 5 {
		t.Errorf("outcomes %v", outs)
	}
}

// A pack whose result leaves out a node that no signal settled: the node
// failed, as the workflow settles it. An input that does not decode is an
// error, not a pack of no nodes.
func TestDecodePackHistoryMissingOutcome(t *testing.T) {
	b := &packEvents{t: t, t0: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	b.started("e1")
	p := b.schedule(10, PackActivityName, "a+1", time.Second, PackInput{Nodes: []NodeInput{{Node: "a"}, {Node: "b"}}})
	b.add(20, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: p, Attempt: 1, Identity: "w"})
	b.add(30, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: p,
		Result: b.payloads(PackOutcome{Nodes: []NodeOutcome{{Node: "a", State: "attention", Reason: "held"}}})})
	h, err := decodeHistory("r", b.history())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Activities) != 2 {
		t.Fatalf("activities %+v", h.Activities)
	}
	a, bb := h.Activities[0], h.Activities[1]
	if a.State != "completed" || a.Outcome == nil || a.Outcome.State != "attention" || bb.State != "failed" || bb.Outcome != nil ||
		!strings.Contains(bb.Failure, "no outcome") || bb.Worker != "w" {
		t.Fatalf("a %+v, b %+v", a, bb)
	}

	bad := &packEvents{t: t, t0: b.t0}
	bad.started("e1")
	bad.schedule(10, PackActivityName, "a+1", time.Second, "not a pack")
	if _, err := decodeHistory("r", bad.history()); err == nil || !strings.Contains(err.Error(), "pack a+1") {
		t.Fatalf("a pack input that does not decode: %v", err)
	}
}

// PendingActivities lists a running node alone as itself and a pack as its
// running nodes (those that ended left out), each with its own heartbeat; a
// pack that sent none names its first node.
func TestPendingActivities(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	dc := converter.GetDefaultDataConverter()
	payloads := func(v any) *commonpb.Payloads {
		p, err := dc.ToPayloads(v)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	beat := func(ref, worker, lost string) Heartbeat {
		return Heartbeat{NodeCursor: runner.NodeCursor{Ref: ref, Attempt: 1}, Worker: worker, At: t0, LostWorker: lost}
	}
	info := func(id, typ string, attempt int32, started bool, details any) *workflowpb.PendingActivityInfo {
		pa := &workflowpb.PendingActivityInfo{ActivityId: id, ActivityType: &commonpb.ActivityType{Name: typ}, Attempt: attempt,
			LastWorkerIdentity: "w2", State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED,
			LastFailure: &failurepb.Failure{Message: "activity Heartbeat timeout"}, LastHeartbeatTime: timestamppb.New(t0.Add(time.Second))}
		if started {
			pa.State, pa.LastStartedTime = enumspb.PENDING_ACTIVITY_STATE_STARTED, timestamppb.New(t0)
		}
		if details != nil {
			pa.HeartbeatDetails = payloads(details)
		}
		return pa
	}
	tests := []struct {
		name string
		pa   *workflowpb.PendingActivityInfo
		want []string // node replay activity-id pack attempt started worker ref lost
	}{
		{"alone", info("x", ActivityName, 1, true, beat("resp_x", "w2", "")),
			[]string{"x 0 x false 1 true w2 resp_x "}},
		{"replay waiting", info("y#2", ActivityName, 3, false, nil),
			[]string{"y 2 y#2 false 3 false w2  "}},
		{"pack", info("p1+2", PackActivityName, 2, true, PackBeat{Nodes: []PackNode{
			{Node: "p1", Heartbeat: beat("resp_1", "w2", "w1")},
			{Node: "p2", Heartbeat: beat("resp_2", "w1", ""), Done: &NodeOutcome{Node: "p2", State: "completed"}},
			{Node: "p3", Heartbeat: beat("resp_3", "w1", "")}}}),
			[]string{"p1 0 p1+2 true 2 true w2 resp_1 w1", "p3 0 p1+2 true 2 true w2 resp_3 "}},
		{"pack, no heartbeat yet", info("q1+3", PackActivityName, 1, true, nil),
			[]string{"q1 0 q1+3 true 1 true w2  "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: []*workflowpb.PendingActivityInfo{tc.pa}}
			var got []string
			for _, p := range PendingActivities(d) {
				got = append(got, fmt.Sprintf("%s %d %s %t %d %t %s %s %s", p.Node, p.Replay, p.ActivityID, p.Pack, p.Attempt,
					!p.Started.IsZero(), p.Worker, p.Beat.Ref, p.Beat.LostWorker))
				if p.LastFailure != "activity Heartbeat timeout" || !p.LastBeat.Equal(t0.Add(time.Second)) {
					t.Errorf("%s: last failure %q, last beat %s", p.Node, p.LastFailure, p.LastBeat)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
