package temporal

import (
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/noderun/noderun/runner"
)

// diagnose --temporal of a run whose pack is being taken over: each of the
// pack's running nodes finds its own pending heartbeat (the pack's activity
// id names none but the first), a node of it that ended is not running, and
// a node alone is found by its activity id as before.
func TestAccountTemporalPackTakenOver(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	payloads := func(v any) *commonpb.Payloads {
		p, err := converter.GetDefaultDataConverter().ToPayloads(v)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	running := func(node, pack string) Activity {
		return Activity{Node: node, Pack: pack, Run: "e1", Scheduled: at(10), State: "running", HeartbeatTimeout: 10 * time.Second}
	}
	p2 := running("p2", "p1+2")
	p2.State, p2.Attempt, p2.Worker, p2.Closed = "completed", 1, "w1", at(500)
	p2.Outcome = &NodeOutcome{Node: "p2", State: "completed", Output: "out p2", Worker: "w1", TemporalAttempt: 1}
	h := &History{WorkflowID: "run-1", Runs: []string{"e1"}, Status: "running", Started: at(0),
		Activities: []Activity{running("p1", "p1+2"), p2, running("p3", "p1+2"), running("s", "")}}
	d := &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: []*workflowpb.PendingActivityInfo{
		{ActivityId: "p1+2", ActivityType: &commonpb.ActivityType{Name: PackActivityName}, Attempt: 2, LastWorkerIdentity: "w2",
			State: enumspb.PENDING_ACTIVITY_STATE_STARTED, LastStartedTime: timestamppb.New(at(12000)),
			LastFailure: &failurepb.Failure{Message: "activity Heartbeat timeout"},
			HeartbeatDetails: payloads(PackBeat{Nodes: []PackNode{
				// the attempt that took the pack over names the lost worker
				{Node: "p1", Heartbeat: Heartbeat{NodeCursor: runner.NodeCursor{Ref: "resp_1"}, Worker: "w2", At: at(12500), LostWorker: "w1", LostAt: at(1000)}},
				{Node: "p2", Heartbeat: Heartbeat{Worker: "w1", At: at(500)}, Done: &NodeOutcome{Node: "p2", State: "completed"}, Signalled: true},
				// still the lost worker's heartbeat
				{Node: "p3", Heartbeat: Heartbeat{NodeCursor: runner.NodeCursor{Ref: "resp_3", Bytes: 70}, Worker: "w1", At: at(1100)}}}})},
		{ActivityId: "s", ActivityType: &commonpb.ActivityType{Name: ActivityName}, Attempt: 1, LastWorkerIdentity: "w2",
			State: enumspb.PENDING_ACTIVITY_STATE_STARTED, LastStartedTime: timestamppb.New(at(20)),
			HeartbeatDetails: payloads(Heartbeat{NodeCursor: runner.NodeCursor{Ref: "resp_s"}, Worker: "w2", At: at(900)})},
	}}
	pend := pendingByNode(d)
	if len(pend) != 3 {
		t.Fatalf("pending %+v", pend)
	}
	acc := account(h, RunInput{}, pend, at(13000))
	if acc.Temporal.PendingNodes != 3 || len(acc.Temporal.Activities) != 4 || acc.Temporal.Activities[0].Pack != "p1+2" || acc.Temporal.Activities[3].Pack != "" {
		t.Fatalf("temporal: %+v", acc.Temporal)
	}
	var hos []string
	for _, ho := range acc.Handovers {
		hos = append(hos, ho.Node+" "+ho.LostWorker+"→"+ho.Worker)
	}
	if strings.Join(hos, ", ") != "p1 w1→w2, p3 w1→w2" {
		t.Fatalf("hand-overs: %v", hos)
	}
	if ho := acc.Handovers[1]; ho.HandoverMS == nil || *ho.HandoverMS != 10900 || ho.HeldBytes != 70 {
		t.Fatalf("p3's hand-over: %+v", ho)
	}
	verdicts := map[string]string{}
	for _, n := range acc.Nodes {
		verdicts[n.ID] = string(n.State) + ": " + n.Verdict.Text
	}
	for node, want := range map[string]string{"p1": "running: running on w2 (activity attempt 2)", "p2": "completed: completed",
		"p3": "running: running on w2 (activity attempt 2)", "s": "running: running on w2 (activity attempt 1)"} {
		if !strings.HasPrefix(verdicts[node], want) {
			t.Errorf("%s: %q, want %q…", node, verdicts[node], want)
		}
	}
}
