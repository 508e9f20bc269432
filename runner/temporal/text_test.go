package temporal

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// diagnose --temporal's text: the local diagnosis, then a row per
// hand-over; none without hand-overs.
func TestDiagnosisWriteText(t *testing.T) {
	ms := int64(11500)
	beat, resumed := "2026-12-01T10:00:01.1Z", "2026-12-01T10:00:12.6Z"
	acct := &ledger.Account{RunID: "run-1", Graph: "g", Status: "completed", Nodes: []ledger.NodeAccount{{ID: "reason", State: "completed", Verdict: ledger.Verdict{Kind: ledger.VerdictRecovered, Text: "re-attached"}}}}
	d := &Diagnosis{Account: acct,
		Handovers: []Handover{{Node: "reason", LostWorker: "a", Worker: "b", LastHeartbeat: &beat, Resumed: &resumed, HandoverMS: &ms,
			Recovery: "re-attached", Tokens: HandoverTokens{Generated: 2000}},
			{Node: "reason", Recovery: "retried"}},
	}
	var local, text bytes.Buffer
	if err := ledger.WriteText(&local, acct, ledger.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteText(&text, ledger.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	want := local.String() + "\n" +
		"HAND-OVER  LOST WORKER  LAST HEARTBEAT  TAKEN OVER BY  RESUMED       TOOK    RECOVERY     GENERATED  REGENERATED  PRESERVED\n" +
		"reason     a            10:00:01.100    b              10:00:12.600  11.5 s  re-attached  2,000      0            0\n" +
		"reason     -            -               -              -             -       retried      0          0            0\n"
	if text.String() != want {
		t.Errorf("diagnose --temporal:\n%s\nwant:\n%s", text.String(), want)
	}
	text.Reset()
	d.Handovers = nil
	if err := d.WriteText(&text, ledger.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if text.String() != local.String() || strings.Contains(text.String(), "HAND-OVER") {
		t.Errorf("without hand-overs:\n%s", text.String())
	}
}

// A running node stands where its last heartbeat says; a finished one as
// the workflow holds it, noted by its verdict, else its reason.
func TestStanding(t *testing.T) {
	st := RunResult{RunID: "r", Nodes: []NodeOutcome{
		{Node: "done", State: "completed", Output: "hello", Worker: "w1", TemporalAttempt: 1, Verdict: "completed on its first attempt",
			Cursor: runner.NodeCursor{Ref: "resp_1", Seq: 9}},
		{Node: "moved", State: "running", Worker: "w1", TemporalAttempt: 1, Reason: "running"},
		{Node: "waiting", State: "pending", Reason: "needs moved"},
	}}
	pending := []PendingActivity{{Node: "moved", Attempt: 2, Worker: "w2",
		Beat: Heartbeat{NodeCursor: runner.NodeCursor{Ref: "resp_2", Seq: 40, Bytes: 812}}}}
	want := []NodeStanding{
		{Node: "done", State: "completed", Bytes: 5, Worker: "w1", Attempt: 1, Cursor: runner.NodeCursor{Ref: "resp_1", Seq: 9},
			Note: "completed on its first attempt"},
		{Node: "moved", State: "running", Bytes: 812, Worker: "w2", Attempt: 2, Cursor: runner.NodeCursor{Ref: "resp_2", Seq: 40, Bytes: 812},
			Note: "running"},
		{Node: "waiting", State: "pending", Note: "needs moved"},
	}
	if got := Standing(st, pending); !reflect.DeepEqual(got, want) {
		t.Errorf("Standing:\n got %+v\nwant %+v", got, want)
	}
	for node, has := range map[string]bool{"done": true, "waiting": true, "nosuch": false} {
		if st.Has(node) != has {
			t.Errorf("Has(%q) = %v", node, !has)
		}
	}
}

// report --temporal's page is the ledger's page of the run drawn from its
// workflow, with the diagnosis's account and hand-overs.
func TestDiagnosisWriteReport(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	in := RunInput{RunID: "run-1", GraphPath: "g.yaml", Profile: profile.Profile{Name: "ci"},
		GraphText: "name: g\nproviders:\n  resp: {kind: responses, base_url: 'http://127.0.0.1:1/v1', model: sim}\n" +
			"nodes:\n  - {id: reason, provider: resp, prompt: r}\n"}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(in)
	if err != nil {
		t.Fatal(err)
	}
	h := &History{WorkflowID: "run-1", Runs: []string{"e1"}, Status: "completed", Started: at(0), Closed: at(20000), Input: payloads,
		Activities: []Activity{{Node: "reason", Run: "e1", Scheduled: at(600), Started: at(12600), Closed: at(15000), Attempt: 2, Worker: "b",
			State: "completed", LastFailure: "activity Heartbeat timeout", HeartbeatTimeout: 10 * time.Second,
			LastHeartbeat: &runner.NodeCursor{Ref: "resp_1", Seq: 40, Bytes: 300}, LostWorker: "a", LastBeat: at(1100),
			Outcome: &NodeOutcome{Node: "reason", State: "completed", Output: "the reasons", Worker: "b", TemporalAttempt: 2,
				Tokens: &ledger.Tokens{Generated: 2000, Needed: 2000}}}}}
	d := account(h, in, nil, at(30000))
	opts := ledger.ReportOptions{MaxOutput: -1, Temporal: "127.0.0.1:7233"}
	var page, want bytes.Buffer
	if err := d.WriteReport(&page, h, opts, at(30000)); err != nil {
		t.Fatal(err)
	}
	opts.Handovers = ReportHandovers(d.Handovers)
	if err := ledger.WriteReport(&want, LedgerRun(h, in, d, at(30000)), d.Account, opts); err != nil {
		t.Fatal(err)
	}
	// Each page says when it was drawn (the clock's second): the two were
	// drawn one after the other, and may straddle a second.
	stamp := regexp.MustCompile(`report generated [0-9TZ:-]+`)
	if !stamp.MatchString(page.String()) {
		t.Errorf("the page says not when it was drawn")
	}
	if stamp.ReplaceAllString(page.String(), "") != stamp.ReplaceAllString(want.String(), "") {
		t.Error("the page differs from the ledger's page of the run drawn from its workflow")
	}
	for _, s := range []string{`<tr data-node="reason" data-lost="a" data-worker="b" data-ms="11500">`, "the reasons", `id="node-reason"`} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("the page lacks %s", s)
		}
	}
}
