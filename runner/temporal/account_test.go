package temporal

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// A history with one hand-over, as ReadHistory returns it: the account,
// the hand-over's figures and line, and the report page drawn from it.
func TestAccountTemporalHandover(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	in := RunInput{RunID: "run-1", GraphPath: "g.yaml", Profile: profile.Profile{Name: "ci"},
		GraphText: "name: g\nproviders:\n  resp: {kind: responses, base_url: 'http://127.0.0.1:1/v1', model: sim}\n" +
			"nodes:\n  - {id: plan, provider: resp, prompt: p}\n  - {id: reason, provider: resp, needs: [plan], prompt: r}\n  - {id: report, provider: resp, needs: [reason], prompt: r}\n"}
	tokens := &ledger.Tokens{Generated: 2000, Needed: 2000}
	h := &History{WorkflowID: "run-1", Runs: []string{"e1", "e2"}, Status: "completed", Started: at(0), Closed: at(20000), Events: 40, Bytes: 9000,
		Activities: []Activity{
			{Node: "plan", Run: "e1", Scheduled: at(10), Started: at(20), Closed: at(500), Attempt: 1, Worker: "a", State: "completed",
				Outcome: &NodeOutcome{Node: "plan", State: "completed", Output: "the plan", Worker: "a", TemporalAttempt: 1, Verdict: "clean", Tokens: &ledger.Tokens{Generated: 100, Needed: 100}}},
			{Node: "reason", Run: "e2", Scheduled: at(600), Started: at(12600), Closed: at(15000), Attempt: 2, Worker: "b", State: "completed",
				LastFailure: "activity Heartbeat timeout", HeartbeatTimeout: 10 * time.Second,
				LastHeartbeat: &runner.NodeCursor{Ref: "resp_1", Seq: 40, Bytes: 300}, LostWorker: "a", LastBeat: at(1100),
				Outcome: &NodeOutcome{Node: "reason", State: "completed", Output: "the reasons", Worker: "b", TemporalAttempt: 2, Tokens: tokens,
					Cursor:      runner.NodeCursor{Ref: "resp_1", Attempt: 1},
					Diagnostics: []Diag{{Code: "NR210", Name: "cross_worker_resume", Attempt: 1}, {Code: "NR201", Name: "reattached", Attempt: 1}}}},
			{Node: "report", Run: "e2", Scheduled: at(15100), Started: at(15200), Closed: at(15300), Attempt: 1, Worker: "b", State: "failed", Failure: "retries exhausted",
				Outcome: &NodeOutcome{Node: "report", State: "failed", Reason: "retries exhausted", Worker: "b", TemporalAttempt: 1}},
		}}
	d := account(h, in, nil, at(30000))
	if d.Status != "failed" || d.Temporal.Status != "completed" || d.Graph != "g" || d.Profile != "ci" || len(d.Nodes) != 3 || len(d.Temporal.Executions) != 2 {
		t.Fatalf("account: %+v", d)
	}
	if len(d.Handovers) != 1 {
		t.Fatalf("hand-overs: %+v", d.Handovers)
	}
	ho := d.Handovers[0]
	if ho.Node != "reason" || ho.LostWorker != "a" || ho.Worker != "b" || ho.Recovery != "re-attached" || ho.HandoverMS == nil || *ho.HandoverMS != 11500 ||
		ho.FailedAt == nil || *ho.FailedAt != "2026-12-01T10:00:11.1Z" || ho.HeldBytes != 300 || ho.Tokens.Generated != 2000 {
		t.Fatalf("hand-over: %+v", ho)
	}
	reason := d.Nodes[1]
	if reason.TimeLostMS != 11500 || reason.WallMS != 14400 || reason.UsefulMS != 2900 || reason.Faults["lost worker"] != 1 || reason.RecoverySteps["reattached"] != 1 {
		t.Fatalf("reason: %+v", reason)
	}
	if !strings.HasSuffix(reason.Verdict.Text, "; taken over from worker a after 11.5 s") {
		t.Fatalf("reason's verdict: %s", reason.Verdict)
	}
	if d.Totals.Tokens.Generated != 2100 {
		t.Fatalf("totals: %+v", d.Totals.Tokens)
	}
	want := "hand-over of reason (activity attempt 2): worker a lost (activity Heartbeat timeout), b re-attached it 11.5 s after a's last heartbeat; 2,000 tokens generated, 0 regenerated, 0 preserved"
	if !strings.Contains(strings.Join(d.Summary, "\n"), want) || !strings.Contains(d.Summary[0], "2 executions") {
		t.Fatalf("summary:\n%s\nwant %s", strings.Join(d.Summary, "\n"), want)
	}
	var page bytes.Buffer
	opts := ledger.ReportOptions{MaxOutput: -1, Temporal: "127.0.0.1:7233", Handovers: ReportHandovers(d.Handovers)}
	if err := ledger.WriteReport(&page, LedgerRun(h, in, d, at(30000)), d.Account, opts); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`<tr data-node="reason" data-lost="a" data-worker="b" data-ms="11500">`, `id="node-reason"`, "the reasons",
		`data-attempt="2"`, "--temporal 127.0.0.1:7233"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("the page lacks %s", s)
		}
	}
}
