package view

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// An event on one line: where and what, and its payload whole: a
// diagnostic by name with its attributes (a value with spaces quoted),
// chunks quoted, anything else with its white space folded.
func TestEventText(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.Local)
	diag, err := diagnostics.New(diagnostics.Reattached, "re-attached to the response",
		diagnostics.KeyRef.Attr("resp_1"), diagnostics.KeyError.Attr("stream cut: EOF")).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e    journal.Event
		want string
	}{
		{journal.Event{Seq: 7, Time: at, Kind: "mark", Payload: []byte("run\n started")}, "     7 03:04:05.678 -                mark       run started"},
		{journal.Event{Seq: 8, Time: at, NodeID: "plan", Kind: journal.KindDelta, Payload: []byte("a\tb ")},
			`     8 03:04:05.678 plan             delta      "a\tb "`},
		{journal.Event{Seq: 9, Time: at, NodeID: "plan", Attempt: 2, Kind: journal.KindDiagnostic, Code: diagnostics.Reattached.ID, Payload: diag},
			"     9 03:04:05.678 plan#2           " + diagnostics.Reattached.ID + "      reattached: re-attached to the response error=\"stream cut: EOF\" ref=resp_1"},
	} {
		if got := EventText(c.e); got != c.want {
			t.Errorf("EventText:\n got %q\nwant %q", got, c.want)
		}
	}
}

// Tail reads once, or follows a run until it has ended and its last
// events are read; a run whose runner is gone is an *AbandonedError; ctx
// ending while it waits stops it quietly; emit's error is returned as it is.
func TestTail(t *testing.T) {
	ctx := context.Background()
	j := testkit.OpenJournal(t, filepath.Join(t.TempDir(), "j.db"))
	check := testkit.Check(t)
	// chunk journals a chunk of node a of run id, and waits until it can be read.
	chunk := func(id, text string) {
		t.Helper()
		check(j.Append(journal.Event{RunID: id, NodeID: "a", Attempt: 1, Kind: journal.KindDelta, ProviderSeq: -1, Payload: []byte(text)}))
		check(j.Flush(ctx))
	}
	for _, id := range []string{"live", "gone", "quiet"} {
		r := journal.Run{ID: id, Graph: "g", GraphText: []byte("name: g\n"), Status: journal.RunRunning}
		if id != "gone" { // a run without an owner has no live runner
			r.Owner = journal.NewOwner()
		}
		check(j.CreateRun(ctx, r))
		check(j.SetNodesPending(ctx, id, []string{"a"}))
		_, err := j.BeginAttempt(ctx, id, "a", journal.ModeStart, "p")
		check(err)
	}
	chunk("live", "one")
	chunk("live", "two")
	chunk("gone", "left")
	deltas := journal.EventFilter{Kinds: []string{journal.KindDelta}, AfterSeq: -1}
	var got []string
	collect := func(e journal.Event) error {
		got = append(got, string(e.Payload))
		return nil
	}

	check(Tail(ctx, j, "live", deltas, 0, collect))
	if len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("read once: %q", got)
	}

	got = nil
	err := Tail(ctx, j, "live", deltas, 5*time.Millisecond, func(e journal.Event) error {
		check(collect(e))
		if len(got) == 2 { // the run goes on, then ends
			chunk("live", "three")
			check(j.SetRunStatus(ctx, "live", journal.RunCompleted))
		}
		return nil
	})
	if err != nil || len(got) != 3 || got[2] != "three" {
		t.Fatalf("followed to its end: %q, %v", got, err)
	}

	got = nil
	err = Tail(ctx, j, "gone", deltas, 5*time.Millisecond, collect)
	if ab, ok := errors.AsType[*AbandonedError](err); !ok || ab.RunID != "gone" || len(got) != 1 {
		t.Fatalf("a run whose runner is gone: %q, %v", got, err)
	}

	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := Tail(tctx, j, "quiet", deltas, time.Minute, collect); err != nil {
		t.Fatalf("ctx ended: %v", err)
	}

	stop := errors.New("stop")
	if err := Tail(ctx, j, "gone", deltas, 0, func(journal.Event) error { return stop }); err != stop {
		t.Fatalf("emit's error: %v", err)
	}
}
