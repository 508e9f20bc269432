package runner

import (
	"reflect"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// Issue 31, point 2: a finished run's result holds each node's attempts
// with their usage, and its diagnostics decoded, without the caller
// reading the journal.
func TestResultHoldsAttemptsUsageAndDiagnostics(t *testing.T) {
	g := parseTestGraph(t, "name: t\nprofile: ci\nproviders:\n  s:\n    kind: sim\n    sim:\n      faults: [{endpoint: chat, node: a, requests: [1], kind: reset, after_events: 5}]\n"+
		"nodes:\n  - id: a\n    prompt: x\n  - id: b\n    prompt: y\n")
	j := openJournal(t)
	res := runGraph(t, g, j)
	if res.Status != journal.RunCompleted {
		t.Fatalf("status %s", res.Status)
	}
	a, b := res.Nodes[0], res.Nodes[1]
	if len(a.Attempts) != 2 || len(b.Attempts) != 1 {
		t.Fatalf("attempts: a %d, b %d; want 2 and 1", len(a.Attempts), len(b.Attempts))
	}
	first, last := a.Attempts[0], a.Attempts[1]
	if first.NodeID != "a" || first.N != 1 || first.Outcome != journal.OutcomeError || first.ErrClass != diagnostics.ClassDisconnect ||
		first.Provider != "s" || first.Mode != journal.ModeStart {
		t.Errorf("a's first attempt: %+v", first.Attempt)
	}
	if last.Outcome != journal.OutcomeOK || last.Usage.OutputTokens == 0 || b.Attempts[0].Usage.OutputTokens == 0 {
		t.Errorf("a's last attempt %+v, usage %+v; b's usage %+v", last.Attempt, last.Usage, b.Attempts[0].Usage)
	}
	var detected, recovered bool
	for _, d := range a.Diagnostics {
		switch d.Record.Code {
		case diagnostics.DisconnectDetected:
			detected = d.Attempt == 1 && !d.Time.IsZero()
		case diagnostics.Recovered:
			recovered = true
			if n, ok := diagnostics.KeyAttempts.Of(d.Record); !ok || n != 2 {
				t.Errorf("recovered: attempts %d, %v; want 2", n, ok)
			}
		}
	}
	if !detected || !recovered {
		t.Errorf("a's diagnostics lack the disconnect on attempt 1 or the recovery: %+v", a.Diagnostics)
	}
	for _, d := range b.Diagnostics {
		if d.Record.Code.IsFault() {
			t.Errorf("b saw a fault: %+v", d)
		}
	}
	// The run as read at its end is the one a later read finds, account
	// and all, and the attempts and diagnostics above are its.
	if res.Ledger == nil {
		t.Fatal("no Ledger")
	}
	later, err := ledger.Load(t.Context(), j, res.RunID, ledger.LoadOptions{NoPartial: true, NoOutput: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ledger.AccountOf(res.Ledger, nil), ledger.AccountOf(later, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("the account of res.Ledger\n%+v\nis not the journal's\n%+v", got, want)
	}
	for i, nd := range res.Ledger.Nodes {
		n := res.Nodes[i]
		if nd.ID != n.ID || len(nd.Attempts) != len(n.Attempts) || len(nd.Records) != len(n.Diagnostics) {
			t.Fatalf("node %s: Ledger's %d attempts, %d records; the result's %s: %d, %d", nd.ID, len(nd.Attempts), len(nd.Records), n.ID, len(n.Attempts), len(n.Diagnostics))
		}
		for k, la := range nd.Attempts {
			want := journal.Usage{} // none recorded: zero, not the ledger's estimate
			if la.UsageRecorded {
				want = la.Usage
			}
			if ra := n.Attempts[k]; ra.Attempt != la.Attempt || ra.Usage != want {
				t.Errorf("node %s attempt %d: %+v, want %+v usage %+v", n.ID, k+1, ra, la.Attempt, want)
			}
		}
		for k, rec := range nd.Records {
			if d := n.Diagnostics[k]; d.Record.Code != rec.Code || d.Attempt != rec.Attempt || !d.Time.Equal(rec.Time) {
				t.Errorf("node %s diagnostic %d: %+v, want %+v", n.ID, k+1, d, rec)
			}
		}
	}
}
