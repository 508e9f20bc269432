package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/graph"
	"github.com/noderun/noderun/runner/ledger"
)

// LoadOptions.NoPartial: an unfinished node's partial answer is left out
// and its size is the same as a full load's, before and after a reset, and
// once the run is folded.
func TestNoPartialKeepsTheSize(t *testing.T) {
	ctx := context.Background()
	j := testkit.OpenJournal(t, filepath.Join(t.TempDir(), "j.db"))
	check := testkit.Check(t)
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

// Load leaves the chunks unread where they cannot change a figure (every
// node settled, no fault, every session ended) and reads them where they
// can: its account, sessions and nodes' active time equal those of a load
// that reads every chunk, run by run: clean, resumed (two sessions), with a
// fault (whose lost time ends at the next chunk), and one whose runner died
// after its nodes settled (its session ends at the last chunk).
func TestLoadReadsChunksOnlyWhereTheyCount(t *testing.T) {
	ctx := context.Background()
	j := testkit.OpenJournal(t, filepath.Join(t.TempDir(), "j.db"))
	check := testkit.Check(t)
	diag := func(run, node string, attempt int, d diagnostics.Record) {
		t.Helper()
		b, err := json.Marshal(d)
		check(err)
		check(j.Append(journal.Event{RunID: run, NodeID: node, Attempt: attempt, Kind: journal.KindDiagnostic, Code: d.Code.ID, ProviderSeq: -1, Payload: b}))
	}
	for _, c := range []struct {
		run      string
		sessions int
		fault    bool // a disconnect mid-stream on node b
		ended    bool // the last session's runner recorded its end
	}{
		{"clean", 1, false, true},
		{"resumed", 2, false, true},
		{"faulted", 1, true, true},
		{"killed", 1, false, false},
	} {
		check(j.CreateRun(ctx, journal.Run{ID: c.run, Graph: "g", GraphText: []byte("name: g\n"), Status: journal.RunRunning}))
		check(j.SetNodesPending(ctx, c.run, []string{"a", "b"}))
		for s := range c.sessions {
			diag(c.run, "", 0, diagnostics.New(diagnostics.RunStarted, "run started"))
			for _, n := range []string{"a", "b"} {
				if s == 0 && n == "b" && c.sessions > 1 {
					continue // b runs in the second session
				}
				a, err := j.BeginAttempt(ctx, c.run, n, journal.ModeStart, "p")
				check(err)
				for i := range 30 {
					if c.fault && n == "b" && i == 10 {
						diag(c.run, n, a, diagnostics.New(diagnostics.DisconnectDetected, "stream disconnected"))
					}
					check(j.Append(journal.Event{RunID: c.run, NodeID: n, Attempt: a, Kind: journal.KindDelta, ProviderSeq: -1, Payload: fmt.Appendf(nil, "%s-%d ", n, i)}))
					if c.fault {
						// The account counts whole milliseconds: the fault's
						// lost time (to the next chunk) must differ from the
						// rest of the node's.
						time.Sleep(time.Millisecond)
					}
				}
				check(j.Flush(ctx))
				out, err := j.RebuildOutput(ctx, c.run, n, a)
				check(err)
				check(j.EndAttempt(ctx, c.run, n, a, journal.AttemptEnd{Outcome: journal.OutcomeOK, Cursor: -1}))
				check(j.CompleteNode(ctx, c.run, n, out))
			}
			if c.ended || s+1 < c.sessions {
				diag(c.run, "", 0, diagnostics.New(diagnostics.RunFinished, "run completed"))
			}
		}
		if c.ended {
			check(j.SetRunStatus(ctx, c.run, journal.RunCompleted))
		}
		check(j.Flush(ctx))
		got, err := ledger.Load(ctx, j, c.run, ledger.LoadOptions{})
		check(err)
		want, err := ledger.LoadEverything(ctx, j, c.run)
		check(err)
		if !reflect.DeepEqual(got.Sessions, want.Sessions) {
			t.Errorf("%s: sessions %v, read with every chunk %v", c.run, got.Sessions, want.Sessions)
		}
		for i, n := range got.Nodes {
			if !reflect.DeepEqual(n.Active, want.Nodes[i].Active) {
				t.Errorf("%s: node %s active %v, read with every chunk %v", c.run, n.ID, n.Active, want.Nodes[i].Active)
			}
		}
		if a, b := ledger.AccountOf(got, nil), ledger.AccountOf(want, nil); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: account\n%+v\nread with every chunk\n%+v", c.run, a, b)
		}
		// A run's result reads its account without the outputs it holds.
		brief, err := ledger.Load(ctx, j, c.run, ledger.LoadOptions{NoPartial: true, NoOutput: true})
		check(err)
		for i, n := range brief.Nodes {
			if n.Output != "" || want.Nodes[i].Output == "" {
				t.Errorf("%s: node %s: output %q without outputs, %q with", c.run, n.ID, n.Output, want.Nodes[i].Output)
			}
		}
		if a, b := ledger.AccountOf(brief, nil), ledger.AccountOf(want, nil); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: account\n%+v\nread without outputs\n%+v", c.run, b, a)
		}
		// A finished run's attempts and records are read beside its nodes:
		// the same run as read one after the other.
		for _, opts := range []ledger.LoadOptions{{}, {NoPartial: true, NoOutput: true}} {
			side, err := ledger.Load(ctx, j, c.run, opts)
			check(err)
			ordered, err := ledger.LoadOrdered(ctx, j, c.run, opts)
			check(err)
			if !reflect.DeepEqual(side, ordered) {
				t.Errorf("%s, %+v: read side by side\n%+v\nread in order\n%+v", c.run, opts, side, ordered)
			}
		}
		// The caller's graph (the runner's own) is the run's: not parsed again.
		g := &graph.Graph{Name: "the caller's"}
		held, err := ledger.Load(ctx, j, c.run, ledger.LoadOptions{Graph: g})
		check(err)
		if held.Graph != g {
			t.Errorf("%s: graph %p, want the caller's %p", c.run, held.Graph, g)
		}
	}
}
