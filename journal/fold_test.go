package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// foldFixture journals a run of two nodes. "done" completes after two
// attempts: the first streams half its output (and a reset voids it), the
// second all of it, each with reasoning, diagnostics and provider seqs
// among the deltas. "live" is still streaming. Their rows interleave.
func foldFixture(t *testing.T, j *Journal) (output string) {
	t.Helper()
	ctx := context.Background()
	createRun(t, j, "run")
	check(t, j.SetNodesPending(ctx, "run", []string{"done", "live"}))
	for _, id := range []string{"done", "live"} {
		check(t, j.SetNodeState(ctx, "run", id, NodeRunning, ""))
	}
	var want strings.Builder
	a1, err := j.BeginAttempt(ctx, "run", "done", ModeStart, "p")
	check(t, err)
	l1, err := j.BeginAttempt(ctx, "run", "live", ModeStart, "p")
	check(t, err)
	for i := range 40 {
		check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a1, Kind: KindDelta, ProviderSeq: int64(i), Payload: []byte(fmt.Sprintf("old %d ", i)), Chunks: i%3 + 1}))
		check(t, j.Append(Event{RunID: "run", NodeID: "live", Attempt: l1, Kind: KindDelta, ProviderSeq: -1, Payload: []byte(fmt.Sprintf("live %d ", i))}))
		if i == 20 {
			check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a1, Kind: KindDiagnostic, Code: "NR101", ProviderSeq: -1, Payload: []byte(`{"code":"NR101"}`)}))
			check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a1, Kind: KindReset, ProviderSeq: -1}))
			check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a1, Kind: KindDelta, Code: "odd", ProviderSeq: -1, Payload: []byte("a coded delta row stays a row")}))
		}
	}
	check(t, j.EndAttempt(ctx, "run", "done", a1, AttemptEnd{Outcome: OutcomeError, ErrClass: "transport_disconnect", Cursor: -1}))
	a2, err := j.BeginAttempt(ctx, "run", "done", ModeRetry, "p")
	check(t, err)
	for i := range 100 {
		s := fmt.Sprintf("token %d\n", i)
		if i%7 == 0 {
			s = "" // an empty delta row
		}
		want.WriteString(s)
		// Rows of the runner's coalescing join several chunks (a token each).
		check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a2, Kind: KindDelta, ProviderSeq: -1, Payload: []byte(s), Chunks: 1 + i%16}))
		if i%10 == 0 {
			check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a2, Kind: KindReasoning, ProviderSeq: -1, Payload: []byte(fmt.Sprintf("thought %d. ", i))}))
		}
	}
	check(t, j.Append(Event{RunID: "run", NodeID: "done", Attempt: a2, Kind: "done", ProviderSeq: -1}))
	check(t, j.EndAttempt(ctx, "run", "done", a2, AttemptEnd{Outcome: OutcomeOK, Cursor: -1}))
	check(t, j.CompleteNode(ctx, "run", "done", want.String()))
	check(t, j.Append(Event{RunID: "run", NodeID: "live", Attempt: l1, Kind: KindDelta, ProviderSeq: -1, Payload: []byte("last")}))
	check(t, j.Flush(ctx))
	return want.String()
}

// readFolded is everything a reader of a run can ask of its events.
func readFolded(t *testing.T, j *Journal) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	filters := []EventFilter{
		{}, {Node: "done"}, {Node: "live"}, {AfterSeq: 57}, {AfterSeq: 57, Limit: 9}, {Limit: 1},
		{Kinds: []string{KindDelta}}, {Kinds: []string{KindReasoning, KindDiagnostic}}, {Node: "done", Kinds: []string{KindDelta, KindReset}, AfterSeq: 3, Limit: 50},
	}
	for _, f := range filters {
		evs, err := j.Events(ctx, "run", f)
		check(t, err)
		fmt.Fprintf(&b, "%+v: %d events\n", f, len(evs))
		for _, e := range evs {
			fmt.Fprintf(&b, "  %d %s#%d %d %s %q %d %q %d\n", e.Seq, e.NodeID, e.Attempt, e.Time.UnixNano(), e.Kind, e.Code, e.ProviderSeq, e.Payload, e.Chunks)
		}
	}
	for _, node := range []string{"done", "live"} {
		for a := 1; a <= 2; a++ {
			out, err := j.RebuildOutput(ctx, "run", node, a)
			check(t, err)
			th, err := j.RebuildReasoning(ctx, "run", node, a)
			check(t, err)
			st, err := j.Streamed(ctx, "run", node, a) // a killed attempt's tokens, in an account
			check(t, err)
			fmt.Fprintf(&b, "%s#%d output %q reasoning %q streamed %+v\n", node, a, out, th, st)
		}
	}
	return b.String()
}

// A folded run reads as it did: every event, in every filter, with its
// seq, time, kind, code, provider seq, payload and chunks; every rebuilt
// output, and what each attempt streamed (chunks and bytes).
// Only the completed node's ended attempts are folded, its coded rows and
// the running node's rows stay rows; a second fold does nothing; seqs go on
// from the last one, folded or not, in this process and after a reopen.
func TestFoldGivesEveryRowBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	output := foldFixture(t, j)
	before := readFolded(t, j)

	st, err := j.Fold(ctx, "run")
	check(t, err)
	// 40 delta rows of the first attempt, 100 + 10 of the second.
	if st.Nodes != 1 || st.Rows != 150 || st.Shared != int64(len(output)) {
		t.Errorf("fold stats %+v, output %d bytes", st, len(output))
	}
	var rows, folds int
	check(t, j.rdb.QueryRow(`SELECT count(*) FROM events WHERE node = 'done' AND kind IN ('delta', 'reasoning')`).Scan(&rows))
	check(t, j.rdb.QueryRow(`SELECT count(*) FROM folds`).Scan(&folds))
	if rows != 1 || folds != 3 { // the coded row; attempt 1's deltas, attempt 2's deltas and reasoning
		t.Errorf("%d delta and reasoning rows of the completed node left, %d folds", rows, folds)
	}
	if after := readFolded(t, j); after != before {
		t.Fatalf("a folded run reads differently:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if st, err := j.Fold(ctx, "run"); err != nil || st.Rows != 0 {
		t.Errorf("second fold: %+v %v", st, err)
	}

	// The run's last event is folded when the last one left is not.
	check(t, j.CompleteNode(ctx, "run", "live", "whatever"))
	check(t, j.EndAttempt(ctx, "run", "live", 1, AttemptEnd{Outcome: OutcomeOK, Cursor: -1}))
	_, err = j.Fold(ctx, "run")
	check(t, err)
	var last int64
	check(t, j.rdb.QueryRow(`SELECT max(seq) FROM events`).Scan(&last))
	path := j.Path()
	check(t, j.Close())
	j = openTest(t, path)
	check(t, j.Append(Event{RunID: "run", Kind: "k", ProviderSeq: -1}))
	check(t, j.Flush(ctx))
	evs, err := j.Events(ctx, "run", EventFilter{})
	check(t, err)
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d after a fold and a reopen (last row left was %d): seqs must stay gap-free and unique", i, e.Seq, last)
		}
	}
}

// A fold that points into a node's output keeps its bytes when the output
// changes: they are copied into the fold first.
func TestFoldSurvivesANewOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	foldFixture(t, j)
	before := readFolded(t, j)
	_, err := j.Fold(ctx, "run")
	check(t, err)
	check(t, j.CompleteNode(ctx, "run", "done", "another answer altogether"))
	after := readFolded(t, j)
	// Only the rebuilt outputs may differ... and they do not: they are the rows'.
	if after != before {
		t.Fatalf("the folded rows changed with the node's output:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// streamWords journals run "run" of one node "n" whose first attempt
// streams n deltas, "word0 word1 ...": it returns the attempt and the text.
func streamWords(t *testing.T, j *Journal, n int) (int, string) {
	t.Helper()
	ctx := context.Background()
	createRun(t, j, "run")
	check(t, j.SetNodesPending(ctx, "run", []string{"n"}))
	a, err := j.BeginAttempt(ctx, "run", "n", ModeStart, "p")
	check(t, err)
	var out strings.Builder
	for i := range n {
		s := fmt.Sprintf("word%d ", i)
		out.WriteString(s)
		check(t, j.Append(Event{RunID: "run", NodeID: "n", Attempt: a, Kind: KindDelta, ProviderSeq: -1, Payload: []byte(s)}))
	}
	return a, out.String()
}

// A folded and vacuumed journal is smaller on disk than the unfolded one.
func TestFoldAndVacuumShrinkTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	a, out := streamWords(t, j, 5000)
	check(t, j.EndAttempt(ctx, "run", "n", a, AttemptEnd{Outcome: OutcomeOK, Cursor: -1}))
	check(t, j.CompleteNode(ctx, "run", "n", out))
	check(t, j.Vacuum(ctx))
	size := func() int64 {
		var n int64
		for _, suffix := range []string{"", "-wal"} {
			if st, err := os.Stat(j.Path() + suffix); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	unfolded := size()
	before := readFolded(t, j)
	_, err := j.Fold(ctx, "run")
	check(t, err)
	check(t, j.Vacuum(ctx))
	folded := size()
	if folded*2 > unfolded {
		t.Errorf("journal %d bytes folded, %d unfolded: want at most half", folded, unfolded)
	}
	if after := readFolded(t, j); !reflect.DeepEqual(after, before) {
		t.Errorf("the run reads differently after a fold and a vacuum")
	}
}

func TestUnpackFoldRejectsDamage(t *testing.T) {
	t.Parallel()
	rows := []foldedRow{{seq: 5, time: 100, providerSeq: -1, payload: []byte("ab"), chunks: 300}, {seq: 9, time: 90, providerSeq: 3, payload: []byte("cde"), chunks: 1}}
	f := packFold(rows)
	back, err := unpackFold(f.firstSeq, f.bytes, f.idx, f.text)
	if err == nil {
		err = setChunks(back, f.chunks)
	}
	if err != nil || !sameRows(back, rows) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	cases := map[string]func() error{
		"short text":                      func() error { _, err := unpackFold(f.firstSeq, f.bytes, f.idx, f.text[1:]); return err },
		"long text":                       func() error { _, err := unpackFold(f.firstSeq, f.bytes+1, f.idx, append(f.text, 'x')); return err },
		"truncated idx":                   func() error { _, err := unpackFold(f.firstSeq, f.bytes, f.idx[:len(f.idx)-1], f.text); return err },
		"overlong index":                  func() error { _, err := unpackFold(f.firstSeq, f.bytes, append(f.idx, 0, 0, 0, 9), f.text); return err },
		"chunk counts for one row of two": func() error { return setChunks(slices.Clone(back), f.chunks[:len(f.chunks)-1]) },
		"a chunk count left over":         func() error { return setChunks(slices.Clone(back), append(slices.Clone(f.chunks), 0)) },
		"a chunk count cut short":         func() error { return setChunks(slices.Clone(back), []byte{0xff}) },
	}
	for name, c := range cases {
		if c() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzUnpackFold: a folds row read from a damaged file never panics the
// reader, and what unpacks packs back to the same idx and text.
func FuzzUnpackFold(f *testing.F) {
	good := packFold([]foldedRow{{seq: 5, time: 100, providerSeq: -1, payload: []byte("ab"), chunks: 16}, {seq: 9, time: 90, providerSeq: 3, payload: []byte("cde")}})
	f.Add(good.firstSeq, good.bytes, good.idx, good.text, good.chunks)
	f.Add(int64(1), int64(0), []byte{0, 0, 0, 0}, []byte{}, []byte(nil))
	f.Add(int64(0), int64(3), []byte{0xff, 0xff, 0xff}, []byte("abc"), []byte{0xff})
	f.Fuzz(func(t *testing.T, first, size int64, idx, text, chunks []byte) {
		rows, err := unpackFold(first, size, idx, text)
		if err != nil || len(rows) == 0 {
			return
		}
		if len(chunks) == 0 {
			chunks = nil // the column's NULL (the fuzzer gives no nil)
		}
		if setChunks(rows, chunks) != nil {
			return
		}
		back := packFold(rows)
		if back.firstSeq != rows[0].seq || string(back.text) != string(text) {
			t.Fatalf("repacked text %q, want %q", back.text, text)
		}
		again, err := unpackFold(back.firstSeq, back.bytes, back.idx, back.text)
		if err == nil {
			err = setChunks(again, back.chunks)
		}
		if err != nil || !sameRows(again, rows) {
			t.Fatalf("repacked rows differ: %v", err)
		}
	})
}

// A row read both before and after a fold moved it (the rows read first,
// then the folds) is one row; none is dropped.
func TestMergeKeepsEachSeqOnce(t *testing.T) {
	t.Parallel()
	ev := func(seqs ...int64) []Event {
		var out []Event
		for _, s := range seqs {
			out = append(out, Event{Seq: s})
		}
		return out
	}
	cases := []struct{ rows, folded, want []Event }{
		{ev(1, 2, 5), nil, ev(1, 2, 5)},
		{nil, ev(3, 4), ev(3, 4)},
		{ev(1, 5), ev(2, 3, 4), ev(1, 2, 3, 4, 5)},
		{ev(1, 2, 3, 4, 5), ev(2, 3, 4), ev(1, 2, 3, 4, 5)}, // the fold committed between the two reads
		{ev(1, 2, 4), ev(2, 3), ev(1, 2, 3, 4)},
	}
	for _, c := range cases {
		got := mergeEvents(c.rows, c.folded)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("merge(%v, %v) = %v, want %v", c.rows, c.folded, got, c.want)
		}
	}
}

// Another process folding while this one reads: every read gives the
// rows as they were, never one twice or one missing.
func TestReadsDuringAFoldElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	w := openTest(t, path)
	const runs = 12
	want := map[string]string{}
	for r := range runs {
		id := fmt.Sprintf("run%d", r)
		createRun(t, w, id)
		check(t, w.SetNodesPending(ctx, id, []string{"n"}))
		a, err := w.BeginAttempt(ctx, id, "n", ModeStart, "p")
		check(t, err)
		var out strings.Builder
		for i := range 300 {
			s := fmt.Sprintf("%d-%d ", r, i)
			out.WriteString(s)
			check(t, w.Append(Event{RunID: id, NodeID: "n", Attempt: a, Kind: KindDelta, ProviderSeq: -1, Payload: []byte(s)}))
		}
		check(t, w.EndAttempt(ctx, id, "n", a, AttemptEnd{Outcome: OutcomeOK, Cursor: -1}))
		check(t, w.CompleteNode(ctx, id, "n", out.String()))
		want[id] = out.String()
	}
	check(t, w.Flush(ctx))
	r := openTest(t, path) // the reader, as another process
	folded := make(chan error, 1)
	go func() {
		for i := range runs {
			if _, err := w.Fold(ctx, fmt.Sprintf("run%d", i)); err != nil {
				folded <- err
				return
			}
		}
		folded <- nil
	}()
	for done := false; !done; {
		select {
		case err := <-folded:
			check(t, err)
			done = true
		default:
		}
		for id, out := range want {
			evs, err := r.Events(ctx, id, EventFilter{Kinds: []string{KindDelta}})
			check(t, err)
			var b strings.Builder
			for _, e := range evs {
				b.Write(e.Payload)
			}
			got, err := r.RebuildOutput(ctx, id, "n", 1)
			check(t, err)
			if len(evs) != 300 || b.String() != out || got != out {
				t.Fatalf("%s during a fold: %d events, their text equal %v, rebuilt equal %v", id, len(evs), b.String() == out, got == out)
			}
		}
	}
	var rows int
	check(t, r.rdb.QueryRow(`SELECT count(*) FROM events WHERE kind = 'delta'`).Scan(&rows))
	if rows != 0 {
		t.Errorf("%d delta rows left after the folds", rows)
	}
}

// Vacuum empties the WAL even while this journal's checkpointer is at work:
// SQLite refuses a truncating checkpoint while another connection
// checkpoints (busy, with no error, and no busy handler called), and a
// refused one left the vacuumed file's second copy in the WAL (a CI run saw
// the folded journal at 2.25 times the unfolded one). Here another
// connection checkpoints without a pause while Vacuum runs, several times.
func TestVacuumTruncatesTheWALBesideACheckpointer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	streamWords(t, j, 3000)
	check(t, j.Flush(ctx))
	stop := make(chan struct{})
	hammered := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				hammered <- n
				return
			default:
			}
			var busy, pages, copied int
			if j.cdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &pages, &copied) == nil {
				n++
			}
		}
	}()
	for i := range 5 {
		check(t, j.Vacuum(ctx))
		if st, err := os.Stat(j.Path() + "-wal"); err == nil && st.Size() != 0 {
			t.Errorf("vacuum %d: the WAL holds %d bytes after it: want it truncated", i+1, st.Size())
		}
	}
	close(stop)
	if n := <-hammered; n == 0 {
		t.Fatal("the other connection never checkpointed: the test did not test")
	}
}
