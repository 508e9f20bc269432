package view

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// A run's result: the JSON document as run and resume print it, and the
// table's figures beside it: an unfinished node's bytes are what its
// journal holds, a note is the node's reason, else its verdict.
func TestResultOf(t *testing.T) {
	res := &runner.Result{RunID: "r", Status: journal.RunInterrupted, Nodes: []runner.NodeResult{
		{ID: "plan", State: journal.NodeCompleted, Output: "the plan", FromCache: "r0/plan"},
		{ID: "draft", State: journal.NodeCompleted, Output: "a draft", Provider: "backup"},
		{ID: "review", State: journal.NodeFailed, Reason: "rejected:  the request\nis too large"},
		{ID: "report", State: journal.NodeCanceled, Reason: "interrupted", Running: "resp_1"},
		{ID: "send", State: journal.NodeCanceled, Reason: "interrupted"},
	}}
	run := &ledger.Run{Nodes: []*ledger.Node{{Node: journal.Node{ID: "report"}, PartialBytes: 812}, {Node: journal.Node{ID: "plan"}, PartialBytes: 99}}}
	acct := &ledger.Account{Nodes: []ledger.NodeAccount{{ID: "plan", Verdict: ledger.Verdict{Kind: ledger.VerdictCached, Text: "from the cache"}},
		{ID: "report", Verdict: ledger.Verdict{Kind: ledger.VerdictInterrupted, Text: "interrupted mid-stream; resumable"}},
		{ID: "review", Verdict: ledger.Verdict{Kind: ledger.VerdictFailed, Text: "rejected"}}}, Summary: []string{"1 node interrupted"}}
	for _, c := range []struct {
		name     string
		run      *ledger.Run
		acct     *ledger.Account
		json     string
		table    [][3]string // state text, bytes, note
		wantNote string
	}{
		{"with the account", run, acct,
			`{"run_id":"r","status":"interrupted","nodes":[{"id":"plan","state":"completed","output":"the plan","cached_from":"r0/plan"},` +
				`{"id":"draft","state":"completed","output":"a draft","provider":"backup"},{"id":"review","state":"failed","reason":"rejected:  the request\nis too large"},` +
				`{"id":"report","state":"canceled","reason":"interrupted"},{"id":"send","state":"canceled","reason":"interrupted"}],"summary":["1 node interrupted"]}`,
			[][3]string{{"completed", "8", "from the cache"}, {"completed", "7", ""}, {"failed", "0", "rejected: the request is too large"},
				{"interrupted (detached)", "812", "interrupted mid-stream; resumable"}, {"interrupted", "0", ""}}, ""},
		{"without one (a run on Temporal)", nil, nil,
			`{"run_id":"r","status":"interrupted","nodes":[{"id":"plan","state":"completed","output":"the plan","cached_from":"r0/plan"},` +
				`{"id":"draft","state":"completed","output":"a draft","provider":"backup"},{"id":"review","state":"failed","reason":"rejected:  the request\nis too large"},` +
				`{"id":"report","state":"canceled","reason":"interrupted"},{"id":"send","state":"canceled","reason":"interrupted"}],"summary":[]}`,
			[][3]string{{"completed", "8", ""}, {"completed", "7", ""}, {"failed", "0", "rejected: the request is too large"},
				{"interrupted (detached)", "0", ""}, {"interrupted", "0", ""}}, ""},
	} {
		doc := ResultOf(res, c.run, c.acct)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.json {
			t.Errorf("%s: JSON\n got %s\nwant %s", c.name, b, c.json)
		}
		var table [][3]string
		for _, n := range doc.Nodes {
			table = append(table, [3]string{n.StateText, strconv.Itoa(n.Bytes), n.Note})
		}
		if !reflect.DeepEqual(table, c.table) {
			t.Errorf("%s: table\n got %q\nwant %q", c.name, table, c.table)
		}
	}
}

// ResultFrom reads the account from the journal, or takes the run the
// result holds (read at its end) without reading it again; without either,
// or when the run is not in the journal, the result has none.
func TestResultFrom(t *testing.T) {
	ctx := context.Background()
	j := testkit.OpenJournal(t, filepath.Join(t.TempDir(), "j.db"))
	if err := j.CreateRun(ctx, journal.Run{ID: "r", Graph: "g", GraphText: []byte("name: g\n"), Status: journal.RunRunning}); err != nil {
		t.Fatal(err)
	}
	if err := j.SetNodesPending(ctx, "r", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := j.SetRunStatus(ctx, "r", journal.RunFailed); err != nil {
		t.Fatal(err)
	}
	res := &runner.Result{RunID: "r", Status: journal.RunFailed, Nodes: []runner.NodeResult{{ID: "a", State: journal.NodeSkipped}}}
	if doc := ResultFrom(ctx, j, res); len(doc.Summary) == 0 || doc.Nodes[0].Note == "" {
		t.Errorf("with the journal: no account: %+v", doc)
	}
	held := *res
	var err error
	if held.Ledger, err = ledger.Load(ctx, j, "r", ledger.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if doc := ResultFrom(ctx, nil, &held); len(doc.Summary) == 0 || doc.Nodes[0].Note == "" {
		t.Errorf("with the run held, no journal: no account: %+v", doc)
	}
	for name, j := range map[string]*journal.Journal{"no journal": nil, "not in it": j} {
		res := *res
		if name == "not in it" {
			res.RunID = "nosuch"
		}
		if doc := ResultFrom(ctx, j, &res); len(doc.Summary) != 0 || doc.Nodes[0].Note != "" {
			t.Errorf("%s: an account: %+v", name, doc)
		}
	}
}

// A node of a run's status, as the table shows it.
func TestNodeStateTextAndNote(t *testing.T) {
	for _, c := range []struct {
		n           Node
		state, note string
	}{
		{Node{State: "completed"}, "completed", ""},
		{Node{State: "canceled"}, "interrupted", ""},
		{Node{State: "canceled", Detached: "resp_1", Reason: "interrupted"}, "interrupted (detached)", "interrupted"},
		{Node{State: "failed", Reason: "node failed", ErrorClass: "rejected", Error: "too\n large"}, "failed", "rejected: too large"},
		{Node{State: "failed", ErrorClass: "connect_failed", Error: `node "a" failed [NR903 budget_exhausted]: connect_failed: refused`}, "failed",
			`node "a" failed [NR903 budget_exhausted]: connect_failed: refused`}, // the class said once (issue 46)
		{Node{State: "completed", Error: "old", Cache: &journal.CacheOrigin{Run: "0123456789abcdef", Node: "plan"}}, "completed",
			"from the cache: node plan of run " + ledger.ShortRunID("0123456789abcdef")},
	} {
		if got := c.n.StateText(); got != c.state {
			t.Errorf("%+v: state %q, want %q", c.n, got, c.state)
		}
		if got := c.n.Note(); got != c.note {
			t.Errorf("%+v: note %q, want %q", c.n, got, c.note)
		}
	}
}
