package temporal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/noderun/noderun/runner"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// historyWorkflow schedules node activities in two executions, the first
// continuing as new into the second, as a wide run does: in the first, a
// node that completes and one whose first attempt fails (a worker stopped)
// and whose second completes; in the second, an operator's replay that
// fails by the profile (NodeFailed, its outcome in the details) and a node
// whose worker goes silent past its heartbeat timeout, not retried.
func historyWorkflow(ctx workflow.Context, step int) (string, error) {
	opts := workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 3, NonRetryableErrorTypes: []string{"NodeFailed"}}}
	run := func(id string, attempts int32) error {
		o := opts
		o.ActivityID = id
		if attempts > 0 {
			o.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: attempts}
		}
		var out ntemporal.NodeOutcome
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), ntemporal.ActivityName, ntemporal.NodeInput{Node: id}).Get(ctx, &out)
	}
	if step == 0 {
		if err := run("a", 0); err != nil {
			return "", err
		}
		if err := run("b", 0); err != nil {
			return "", err
		}
		return "", workflow.NewContinueAsNewError(ctx, "test.history", 1)
	}
	_ = run("c#1", 0)
	_ = run("d", 1)
	return "done", nil
}

// historyActivity plays the nodes of historyWorkflow.
func historyActivity(ctx context.Context, in ntemporal.NodeInput) (ntemporal.NodeOutcome, error) {
	info := activity.GetInfo(ctx)
	out := ntemporal.NodeOutcome{Node: in.Node, State: "completed", Output: "out of " + info.ActivityID, Worker: "t", TemporalAttempt: info.Attempt}
	switch info.ActivityID {
	case "b":
		if info.Attempt == 1 {
			activity.RecordHeartbeat(ctx, ntemporal.Heartbeat{NodeCursor: runner.NodeCursor{Ref: "resp_b", Seq: 7, Bytes: 42}, Worker: "lost-b", At: time.Now()})
			return out, errors.New("worker stopping")
		}
		var h ntemporal.Heartbeat
		if err := activity.GetHeartbeatDetails(ctx, &h); err == nil {
			out.From = &h
		}
	case "c#1":
		out.State, out.Reason = "failed", "retries exhausted"
		return out, temporal.NewNonRetryableApplicationError("retries exhausted", "NodeFailed", nil, out)
	case "d":
		activity.RecordHeartbeat(ctx, ntemporal.Heartbeat{NodeCursor: runner.NodeCursor{Ref: "resp_d", Seq: 3}, Worker: "silent", At: time.Now()})
		select { // silent until Temporal times it out (and cancels it, at a heartbeat it never sends)
		case <-ctx.Done():
		case <-time.After(4 * time.Second):
		}
		return out, nil
	}
	return out, nil
}

// ReadHistory follows a run through continue-as-new and reads every kind of
// node activity the history holds.
func TestReadHistoryAcrossContinueAsNew(t *testing.T) {
	c := dialDev(t)
	queue := "history-" + time.Now().Format("150405.000")
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(historyWorkflow, workflow.RegisterOptions{Name: "test.history"})
	w.RegisterActivityWithOptions(historyActivity, activity.RegisterOptions{Name: ntemporal.ActivityName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "history-" + time.Now().Format("150405.000000")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "test.history", 0)
	if err != nil {
		t.Fatal(err)
	}
	first := run.GetRunID() // Get follows the chain: the run id it holds then is the last
	var res string
	if err := run.Get(ctx, &res); err != nil || res != "done" {
		t.Fatalf("workflow: %q %v", res, err)
	}

	h, err := ntemporal.ReadHistory(ctx, c, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 2 || h.Runs[0] != first || h.Runs[1] != run.GetRunID() || h.Status != "completed" ||
		h.Started.IsZero() || h.Closed.Before(h.Started) || h.WorkflowID != id {
		t.Fatalf("history: runs %v (first %s), status %s, %s–%s", h.Runs, first, h.Status, h.Started, h.Closed)
	}
	// Every event of both executions is counted.
	events := 0
	for _, r := range h.Runs {
		it := c.GetWorkflowHistory(ctx, id, r, false, 0)
		for it.HasNext() {
			if _, err := it.Next(); err != nil {
				t.Fatal(err)
			}
			events++
		}
	}
	if h.Events != events || h.Bytes < int64(events)*10 {
		t.Fatalf("%d events (%d bytes), want %d", h.Events, h.Bytes, events)
	}
	got := map[string]ntemporal.Activity{}
	var order []string
	for _, a := range h.Activities {
		got[a.Node] = a
		order = append(order, a.Node)
	}
	if strings.Join(order, ",") != "a,b,c,d" {
		t.Fatalf("activities in order %v", order)
	}
	a, b, cc, d := got["a"], got["b"], got["c"], got["d"]
	if a.State != "completed" || a.Attempt != 1 || a.Run != h.Runs[0] || a.Outcome == nil || a.Outcome.Output != "out of a" ||
		a.Worker == "" || a.Scheduled.IsZero() || a.Started.Before(a.Scheduled) || a.Closed.Before(a.Started) || a.LastFailure != "" {
		t.Fatalf("a: %+v", a)
	}
	if b.State != "completed" || b.Attempt != 2 || b.LastFailure != "worker stopping" || b.LastHeartbeat == nil ||
		b.LastHeartbeat.Ref != "resp_b" || b.LastHeartbeat.Seq != 7 || b.LostWorker != "lost-b" || b.LastBeat.IsZero() ||
		b.HeartbeatTimeout != 2*time.Second {
		t.Fatalf("b: %+v (last heartbeat %+v)", b, b.LastHeartbeat)
	}
	if cc.State != "failed" || cc.Replay != 1 || cc.Run != h.Runs[1] || cc.Outcome == nil || cc.Outcome.State != "failed" ||
		cc.Outcome.Reason != "retries exhausted" || !strings.Contains(cc.Failure, "retries exhausted") {
		t.Fatalf("c#1: %+v (outcome %+v)", cc, cc.Outcome)
	}
	if d.State != "timed_out" || d.Outcome != nil || d.LastHeartbeat == nil || d.LastHeartbeat.Ref != "resp_d" || d.LostWorker != "silent" ||
		!strings.Contains(strings.ToLower(d.Failure), "heartbeat") {
		t.Fatalf("d: %+v (last heartbeat %+v)", d, d.LastHeartbeat)
	}

	if _, err := ntemporal.ReadHistory(ctx, c, "no-such-run"); err == nil {
		t.Fatal("no error for a workflow that does not exist")
	}
}

// A recorded kill -9 hand-over (testdata/kill9-history.json, recorded before
// heartbeats named their worker): the node that was taken over shows the
// attempt, the survivor and the heartbeat timeout of the lost attempt.
// Temporal keeps the lost attempt's heartbeat details out of the retry's
// started event, so none is in this recording (LastHeartbeat comes from
// NodeOutcome.From, which later recordings carry).
func TestDecodeRecordedKill9History(t *testing.T) {
	h := recordedHistory(t, "kill9-history.json")
	if len(h.Runs) != 1 || h.Status != "completed" || h.Events != 29 || h.Bytes == 0 {
		t.Fatalf("history: runs %v, status %s, %d events, %d bytes", h.Runs, h.Status, h.Events, h.Bytes)
	}
	var nodes []string
	for _, a := range h.Activities {
		nodes = append(nodes, a.Node)
		if a.State != "completed" || a.Outcome == nil || a.Outcome.Node != a.Node {
			t.Errorf("%s: %+v", a.Node, a)
		}
		if a.Node != "reason" {
			if a.Attempt != 1 || a.LastFailure != "" {
				t.Errorf("%s: attempt %d, last failure %q", a.Node, a.Attempt, a.LastFailure)
			}
			continue
		}
		if a.Attempt != 2 || a.Worker != "w2" || a.LastFailure != "activity Heartbeat timeout" || a.HeartbeatTimeout != 5*time.Second ||
			a.Outcome.Worker != "w2" || a.Outcome.TemporalAttempt != 2 || a.LastHeartbeat != nil {
			t.Errorf("reason: %+v", a)
		}
		// The survivor's attempt started 5.8 s after the node was first
		// scheduled: a 5 s heartbeat timeout, then Temporal's first retry.
		if d := a.Started.Sub(a.Scheduled); d < 5*time.Second || d > 7*time.Second {
			t.Errorf("reason started %s after it was scheduled", d)
		}
	}
	if strings.Join(nodes, ",") != "plan,reason,critique,report" {
		t.Fatalf("activities %v", nodes)
	}
}

func recordedHistory(t *testing.T, name string) *ntemporal.History {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var hist historypb.History
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &hist); err != nil {
		t.Fatal(err)
	}
	h, err := ntemporal.DecodeHistory("recorded", &hist)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
