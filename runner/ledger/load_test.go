package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// LoadOptions.NoPartial: an unfinished node's partial answer is left out
// and its size is the same as a full load's, before and after a reset, and
// once the run is folded.
func TestNoPartialKeepsTheSize(t *testing.T) {
	ctx := context.Background()
	j := testkit.OpenJournal(t, filepath.Join(t.TempDir(), "j.db"))
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(j.CreateRun(ctx, journal.Run{ID: "r", Graph: "g", GraphText: []byte("name: g\n"), Status: journal.RunRunning}))
	check(j.SetNodesPending(ctx, "r", []string{"done", "cut"}))
	for _, n := range []string{"done", "cut"} {
		a, err := j.BeginAttempt(ctx, "r", n, journal.ModeStart, "p")
		check(err)
		for i := range 40 {
			if n == "cut" && i == 10 {
				check(j.Append(journal.Event{RunID: "r", NodeID: n, Attempt: a, Kind: journal.KindReset, ProviderSeq: -1}))
			}
			check(j.Append(journal.Event{RunID: "r", NodeID: n, Attempt: a, Kind: journal.KindDelta, ProviderSeq: -1, Payload: fmt.Appendf(nil, "%s-%d naïve €5 日本 🚀 ", n, i)}))
		}
		if n == "done" {
			out, err := j.RebuildOutput(ctx, "r", n, a)
			check(err)
			check(j.EndAttempt(ctx, "r", n, a, journal.AttemptEnd{Outcome: journal.OutcomeOK, Cursor: -1}))
			check(j.CompleteNode(ctx, "r", n, out))
		}
	}
	check(j.Flush(ctx))
	for _, when := range []string{"rows", "folded"} {
		if when == "folded" {
			check(j.EndAttempt(ctx, "r", "cut", 1, journal.AttemptEnd{Outcome: journal.OutcomeError, Cursor: -1}))
			_, err := j.Fold(ctx, "r")
			check(err)
		}
		full, err := ledger.Load(ctx, j, "r", ledger.LoadOptions{})
		check(err)
		bare, err := ledger.Load(ctx, j, "r", ledger.LoadOptions{NoPartial: true})
		check(err)
		for i, n := range full.Nodes {
			b := bare.Nodes[i]
			if b.Partial != "" || b.PartialBytes != len(n.Partial) || n.PartialBytes != len(n.Partial) {
				t.Errorf("%s: node %s: partial %d bytes (%d said); without it, %d said and %q kept", when, n.ID, len(n.Partial), n.PartialBytes, b.PartialBytes, b.Partial)
			}
		}
		if c := full.Nodes[1]; c.ID != "cut" || !strings.HasPrefix(c.Partial, "cut-10 ") {
			t.Fatalf("%s: the cut node's partial %q, want it from the reset on", when, c.Partial)
		}
	}
}
