package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkSeqs fails unless evs have seqs 1..len(evs) and payloads equal to them.
func checkSeqs(t *testing.T, evs []Event) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != int64(i+1) || string(e.Payload) != strconv.Itoa(i+1) {
			t.Fatalf("event %d: seq %d payload %q; want a gap-free prefix", i, e.Seq, e.Payload)
		}
	}
}

func TestStateChangeCommitsEarlierAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	// A long linger: nothing but the state change can trigger the commit.
	w := openTest(t, path, WithBatch(1<<20, time.Hour))
	r := openTest(t, path) // another Journal, as another process would read
	createRun(t, w, "run")
	const n = 5000
	for i := 1; i <= n; i++ {
		w.Append(Event{RunID: "run", NodeID: "a", Kind: KindDelta, ProviderSeq: -1, Payload: []byte(strconv.Itoa(i))})
	}
	check(t, w.SetNodeState(ctx, "run", "a", NodeRunning, ""))
	evs, err := r.Events(ctx, "run", EventFilter{})
	if err != nil || len(evs) != n {
		t.Fatalf("after the state change another reader sees %d events, %v; want %d", len(evs), err, n)
	}
	checkSeqs(t, evs)
}

// AppendAll journals its events in order, in one transaction however many
// there are (a commit per operation here: 3,000 appends one by one would be
// 3,000 commits), with payloads of their own: the caller may reuse its
// buffers at once. An unusable event queues none of them.
func TestAppendAllIsOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var commits []int
	j := openTest(t, "", WithBatch(1, 0), WithWriteObserver(func(_ time.Duration, ops int, err error) {
		mu.Lock()
		commits = append(commits, ops)
		mu.Unlock()
	}))
	createRun(t, j, "run")
	mu.Lock()
	commits = nil // the run's
	mu.Unlock()
	check(t, j.AppendAll(nil)) // nothing queued, nothing committed
	const n = 3000
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{RunID: "run", NodeID: fmt.Sprint("n", i%7), Kind: KindDelta, ProviderSeq: -1, Payload: []byte(strconv.Itoa(i + 1))}
	}
	check(t, j.AppendAll(evs))
	for i := range evs {
		clear(evs[i].Payload) // the caller's buffers, reused
	}
	bad := []Event{{RunID: "run", Kind: KindDelta, Payload: []byte("x")}, {RunID: "run", Payload: []byte("no kind")}}
	if err := j.AppendAll(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AppendAll with an event without a kind: %v, want ErrInvalid", err)
	}
	check(t, j.Flush(ctx))
	got, err := j.Events(ctx, "run", EventFilter{})
	if err != nil || len(got) != n {
		t.Fatalf("%d events, %v; want %d", len(got), err, n)
	}
	checkSeqs(t, got)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(commits, []int{1, 1}) {
		t.Fatalf("commits of %v operations; want the batch's and the flush's, one each", commits)
	}
}

func TestSeqsArePerRunAndGapFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "", WithBatch(7, time.Millisecond)) // many small batches
	createRun(t, j, "a")
	createRun(t, j, "b")
	var wg sync.WaitGroup
	for _, run := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 1000; i++ {
				j.Append(Event{RunID: run, Kind: "k", ProviderSeq: -1, Payload: []byte(strconv.Itoa(i))})
			}
		}()
	}
	wg.Wait()
	check(t, j.Flush(ctx))
	for _, run := range []string{"a", "b"} {
		evs, err := j.Events(ctx, run, EventFilter{})
		if err != nil || len(evs) != 1000 {
			t.Fatalf("run %s: %d events, %v", run, len(evs), err)
		}
		checkSeqs(t, evs)
	}
	// Seqs continue across reopen (the writer reads the last one).
	path := j.Path()
	j.Close()
	j = openTest(t, path)
	j.Append(Event{RunID: "a", Kind: "k", ProviderSeq: -1, Payload: []byte("1001")})
	check(t, j.Flush(ctx))
	evs, _ := j.Events(ctx, "a", EventFilter{AfterSeq: 1000})
	if len(evs) != 1 || evs[0].Seq != 1001 {
		t.Fatalf("after reopen: %+v", evs)
	}
}

// The writer keeps what it knows of a run (its last seq) from one batch to
// the next, which holds only while nobody else writes: two Journals (two
// processes) appending to one run in turn still give every event its own
// seq, gap-free.
func TestSeqsWithAnotherWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	a, b := openTest(t, path), openTest(t, path)
	createRun(t, a, "run")
	n := 0
	for round := range 20 {
		j := a
		if round%2 == 1 {
			j = b
		}
		for range 1 + round%3 { // one to three batches in a row from each
			n++
			j.Append(Event{RunID: "run", Kind: "k", ProviderSeq: -1, Payload: []byte(strconv.Itoa(n))})
			check(t, j.Flush(ctx))
		}
	}
	evs, err := a.Events(ctx, "run", EventFilter{})
	if err != nil || len(evs) != n {
		t.Fatalf("%d events, %v; want %d", len(evs), err, n)
	}
	checkSeqs(t, evs)
}

func TestEventsFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	at := time.Unix(1700000000, 123)
	j.Append(Event{RunID: "r", Kind: "run.start", ProviderSeq: -1, Time: at})
	j.Append(Event{RunID: "r", NodeID: "a", Attempt: 1, Kind: KindDelta, ProviderSeq: 0, Payload: []byte("x")})
	j.Append(Event{RunID: "r", NodeID: "b", Attempt: 1, Kind: "diagnostic", Code: "NR-DISCONNECT", ProviderSeq: -1})
	j.Append(Event{RunID: "r", NodeID: "a", Attempt: 1, Kind: KindDelta, ProviderSeq: 1, Payload: []byte("y")})
	check(t, j.Flush(ctx))

	all, err := j.Events(ctx, "r", EventFilter{})
	if err != nil || len(all) != 4 {
		t.Fatalf("all = %+v, %v", all, err)
	}
	if e := all[0]; !e.Time.Equal(at) || e.NodeID != "" || e.Attempt != 0 || e.ProviderSeq != -1 || e.RunID != "r" {
		t.Errorf("run-level event = %+v", e)
	}
	if e := all[2]; e.Code != "NR-DISCONNECT" || e.Seq != 3 {
		t.Errorf("diagnostic = %+v", e)
	}
	seqs := func(evs []Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, strconv.FormatInt(e.Seq, 10))
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		f    EventFilter
		want string
	}{
		{EventFilter{Node: "a"}, "2,4"},
		{EventFilter{AfterSeq: 2}, "3,4"},
		{EventFilter{Limit: 2}, "1,2"},
		{EventFilter{AfterSeq: 1, Limit: 2}, "2,3"},
		{EventFilter{Kinds: []string{"diagnostic", "run.start"}}, "1,3"},
		{EventFilter{Node: "a", Kinds: []string{"diagnostic"}}, ""},
	} {
		got, err := j.Events(ctx, "r", c.f)
		if err != nil || seqs(got) != c.want {
			t.Errorf("Events(%+v) = %s, %v; want %s", c.f, seqs(got), err, c.want)
		}
	}
	if got, err := j.Events(ctx, "nope", EventFilter{}); err != nil || len(got) != 0 {
		t.Errorf("events of a missing run = %v, %v", got, err)
	}
}

func TestDuplicateProviderEventsAreIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "", WithBatch(8, time.Millisecond))
	createRun(t, j, "r")
	if got, err := j.MaxProviderSeq(ctx, "r", "a", 1); err != nil || got != NoProviderSeq {
		t.Fatalf("MaxProviderSeq before any = %d, %v", got, err)
	}
	delta := func(attempt int, ps int64) {
		j.Append(Event{RunID: "r", NodeID: "a", Attempt: attempt, Kind: KindDelta, ProviderSeq: ps,
			Payload: []byte(fmt.Sprint(ps, " "))})
	}
	for ps := range int64(10) { // 0..9
		delta(1, ps)
	}
	check(t, j.Flush(ctx))
	for ps := int64(5); ps < 15; ps++ { // a resumed stream repeating 5..9 (committed)
		delta(1, ps)
	}
	delta(1, 12) // a repeat inside the same batch
	delta(1, 12)
	delta(2, 3) // another attempt has its own numbering
	// Events without a provider seq, or outside an attempt, are never deduplicated.
	j.Append(Event{RunID: "r", NodeID: "a", Attempt: 1, Kind: "note", ProviderSeq: -1})
	j.Append(Event{RunID: "r", NodeID: "a", Attempt: 1, Kind: "note", ProviderSeq: -1})
	j.Append(Event{RunID: "r", Kind: "run-note"})
	j.Append(Event{RunID: "r", Kind: "run-note"})
	delta(1, 20) // gaps and out-of-order new seqs are kept
	delta(1, 17)
	check(t, j.Flush(ctx))

	evs, err := j.Events(ctx, "r", EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at index %d: a dropped duplicate consumed a seq", e.Seq, i)
		}
		got = append(got, fmt.Sprintf("%d:%d", e.Attempt, e.ProviderSeq))
	}
	want := "1:0 1:1 1:2 1:3 1:4 1:5 1:6 1:7 1:8 1:9 1:10 1:11 1:12 1:13 1:14 2:3 1:-1 1:-1 0:0 0:0 1:20 1:17"
	if strings.Join(got, " ") != want {
		t.Fatalf("journaled\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if out, _ := j.RebuildOutput(ctx, "r", "a", 1); out != "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 20 17 " {
		t.Errorf("rebuilt output %q", out)
	}
	if got, err := j.MaxProviderSeq(ctx, "r", "a", 1); err != nil || got != 20 {
		t.Errorf("MaxProviderSeq = %d, %v; want 20", got, err)
	}
	if got, _ := j.MaxProviderSeq(ctx, "r", "a", 2); got != 3 {
		t.Errorf("MaxProviderSeq of attempt 2 = %d; want 3", got)
	}
}

func TestRebuildOutputHonoursReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	ev := func(node string, attempt int, kind, payload string) {
		j.Append(Event{RunID: "r", NodeID: node, Attempt: attempt, Kind: kind, ProviderSeq: -1, Payload: []byte(payload)})
	}
	ev("a", 1, KindDelta, "stale ")
	ev("b", 1, KindDelta, "other node ")
	ev("a", 1, KindDelta, "partial")
	ev("a", 1, KindReset, "")
	ev("a", 2, KindDelta, "attempt two")
	ev("a", 1, KindDelta, "Hello")
	ev("a", 1, "reasoning", "not output")
	ev("a", 1, KindDelta, ", world")
	check(t, j.Flush(ctx))
	for _, c := range []struct {
		node    string
		attempt int
		want    string
	}{{"a", 1, "Hello, world"}, {"a", 2, "attempt two"}, {"b", 1, "other node "}, {"a", 3, ""}} {
		if got, err := j.RebuildOutput(ctx, "r", c.node, c.attempt); err != nil || got != c.want {
			t.Errorf("RebuildOutput(%s, %d) = %q, %v; want %q", c.node, c.attempt, got, err, c.want)
		}
	}
}

func TestAppendCopiesPayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	buf := []byte("first")
	j.Append(Event{RunID: "r", Kind: KindDelta, Payload: buf, ProviderSeq: -1})
	copy(buf, "XXXXX")
	check(t, j.Flush(ctx))
	if evs, _ := j.Events(ctx, "r", EventFilter{}); string(evs[0].Payload) != "first" {
		t.Fatalf("payload %q: Append kept the caller's buffer", evs[0].Payload)
	}
}

// A reader in another Journal polls while a writer streams: it must see
// every event exactly once, in seq order, without gaps.
func TestConcurrentReaderWhileWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	w := openTest(t, path, WithBatch(64, 2*time.Millisecond))
	r := openTest(t, path)
	createRun(t, w, "run")
	const n = 5000
	go func() {
		for i := 1; i <= n; i++ {
			w.Append(Event{RunID: "run", NodeID: "a", Attempt: 1, Kind: KindDelta, ProviderSeq: int64(i),
				Payload: []byte(strconv.Itoa(i))})
			if i%500 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		w.Flush(ctx)
	}()
	var last int64
	deadline := time.Now().Add(30 * time.Second)
	for last < n {
		if time.Now().After(deadline) {
			t.Fatalf("reader stuck at seq %d", last)
		}
		evs, err := r.Events(ctx, "run", EventFilter{AfterSeq: last, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Seq != last+1 || string(e.Payload) != strconv.FormatInt(e.Seq, 10) {
				t.Fatalf("reader got seq %d (payload %q) after %d", e.Seq, e.Payload, last)
			}
			last = e.Seq
		}
		if len(evs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestAppendToUnknownRunFailsTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	j.Append(Event{RunID: "ghost", Kind: "k"})
	err := j.Flush(ctx)
	if err == nil || !strings.Contains(err.Error(), `"ghost"`) || !strings.Contains(err.Error(), j.Path()) {
		t.Fatalf("Flush after an event for a missing run = %v", err)
	}
	if err2 := j.Append(Event{RunID: "r", Kind: "k"}); err2 == nil || !strings.Contains(err2.Error(), `"ghost"`) {
		t.Errorf("Append after the failure = %v, want the sticky error", err2)
	}
	if err2 := j.Close(); err2 == nil {
		t.Error("Close after the failure returned nil")
	}
}

func TestWriterFailureIsSticky(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	j.wdb.Close() // the database goes away under the writer (as with an I/O error)
	j.Append(Event{RunID: "r", Kind: "k"})
	err := j.Flush(ctx)
	if err == nil || !strings.Contains(err.Error(), j.Path()) {
		t.Fatalf("Flush = %v, want an error naming the path", err)
	}
	for _, later := range []error{
		j.Append(Event{RunID: "r", Kind: "k"}),
		j.SetRunStatus(ctx, "r", RunFailed),
		j.Flush(ctx),
		j.Close(),
	} {
		if later == nil || !strings.Contains(later.Error(), "writer stopped") {
			t.Errorf("later call = %v, want the writer's error", later)
		}
	}
}

// While another process holds the write lock, the queue fills and Append
// blocks (backpressure) instead of growing memory or dropping events; when
// the lock is released everything is committed.
func TestBackpressureAndBusyWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path, WithQueueSize(8), WithBatch(4, 0))
	createRun(t, j, "r")

	other, err := openDB(path, writerParams)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin() // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	appended := make(chan int, 100)
	go func() {
		for i := 1; i <= 50; i++ {
			j.Append(Event{RunID: "r", Kind: "k", ProviderSeq: -1, Payload: []byte(strconv.Itoa(i))})
			appended <- i
		}
		close(appended)
	}()
	time.Sleep(300 * time.Millisecond)
	if n := len(appended); n >= 50 || n > 8+4+1 {
		t.Fatalf("%d appends returned while the writer was blocked; want at most queue+batch+1", n)
	}
	check(t, tx.Rollback())
	for range appended {
	}
	check(t, j.Flush(ctx))
	evs, err := j.Events(ctx, "r", EventFilter{})
	if err != nil || len(evs) != 50 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	checkSeqs(t, evs)
}

func TestFlushHonoursContext(t *testing.T) {
	t.Parallel()
	j := openTest(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Either it got through before noticing, or it reports the cancellation.
	if err := j.Flush(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with a canceled context = %v", err)
	}
}

// The writer never checkpoints (see checkpoint.go): the checkpointer must,
// or the WAL would grow for as long as the journal is open.
func TestCheckpointerMovesTheWALIntoTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	createRun(t, j, "r")
	for range 5000 {
		j.Append(Event{RunID: "r", Kind: KindDelta, Payload: benchPayload, ProviderSeq: -1})
	}
	check(t, j.Flush(ctx))
	deadline := time.Now().Add(10 * checkpointEvery)
	for {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 256<<10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes: nothing was checkpointed", st.Size())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A reattach attempt continues the response of the attempt before it: its
// output and its provider sequence numbers follow on, so rebuilding, the
// cursor and duplicate detection all span the chain. A retry starts afresh.
func TestReattachChains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	begin := func(mode AttemptMode, want int) {
		t.Helper()
		if n, err := j.BeginAttempt(ctx, "r", "a", mode, "responses"); err != nil || n != want {
			t.Fatalf("BeginAttempt(%s) = %d, %v; want %d", mode, n, err, want)
		}
	}
	delta := func(attempt int, ps int64, text string) {
		j.Append(Event{RunID: "r", NodeID: "a", Attempt: attempt, Kind: KindDelta, ProviderSeq: ps, Payload: []byte(text)})
	}
	begin(ModeStart, 1)
	for ps, text := range []string{"The ", "quick ", "brown ", "fox "} {
		delta(1, int64(ps), text)
	}
	check(t, j.Flush(ctx))
	begin(ModeReattach, 2) // resumed from a stale cursor: 2 and 3 come again
	delta(2, 2, "brown ")
	delta(2, 3, "fox ")
	delta(2, 4, "jumps")
	begin(ModeReattach, 3) // dropped again before anything arrived
	begin(ModeRetry, 4)    // a new response: its own numbering
	delta(4, 0, "A ")
	delta(4, 1, "new ")
	begin(ModeReattach, 5)
	delta(5, 1, "new ") // a repeat across the chain 4-5
	delta(5, 2, "try")
	j.Append(Event{RunID: "r", NodeID: "a", Attempt: 9, Kind: KindDelta, ProviderSeq: 0, Payload: []byte("no attempt row")})
	check(t, j.Flush(ctx))

	for _, c := range []struct {
		attempt int
		out     string
		top     int64
	}{
		{1, "The quick brown fox ", 3},
		{2, "The quick brown fox jumps", 4},
		{3, "The quick brown fox jumps", 4},
		{4, "A new ", 1},
		{5, "A new try", 2},
		{9, "no attempt row", 0},
	} {
		if out, err := j.RebuildOutput(ctx, "r", "a", c.attempt); err != nil || out != c.out {
			t.Errorf("RebuildOutput(attempt %d) = %q, %v; want %q", c.attempt, out, err, c.out)
		}
		if top, err := j.MaxProviderSeq(ctx, "r", "a", c.attempt); err != nil || top != c.top {
			t.Errorf("MaxProviderSeq(attempt %d) = %d, %v; want %d", c.attempt, top, err, c.top)
		}
	}
	evs, _ := j.Events(ctx, "r", EventFilter{})
	if len(evs) != 9 {
		t.Errorf("%d events journaled, want 9 (12 sent, 3 repeats)", len(evs))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d: not gap-free", e.Seq, i)
		}
	}

	// A reset voids the chain's output so far (the whole output came from a
	// status check, say).
	begin(ModeReattach, 6)
	j.Append(Event{RunID: "r", NodeID: "a", Attempt: 6, Kind: KindReset, ProviderSeq: NoProviderSeq})
	delta(6, NoProviderSeq, "A new try, whole")
	check(t, j.Flush(ctx))
	if out, _ := j.RebuildOutput(ctx, "r", "a", 6); out != "A new try, whole" {
		t.Errorf("after reset: %q", out)
	}
}

// A state change that fails on its own (here: after a write of its own) is
// reported to its caller alone and keeps none of its writes, while the rest
// of its batch, before and after it, commits. The batch first runs without
// savepoints; this is the run again that isolates each state change.
func TestFailedStateChangeFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "", WithBatch(1000, time.Minute))
	createRun(t, j, "r")
	change := func(fn func(context.Context, stmtTx) error) op {
		o := op{kind: opFunc, fn: fn, done: make(chan error, 1)}
		check(t, j.enqueue(ctx, o))
		return o
	}
	node := func(id string) func(context.Context, stmtTx) error {
		return func(ctx context.Context, tx stmtTx) error { return upsertNode(ctx, tx, "r", id, NodeRunning, 1) }
	}
	// Hold the writer inside a batch so that everything below queues up
	// behind it and goes into the next batch together.
	held, release := make(chan struct{}), make(chan struct{})
	hold := change(func(context.Context, stmtTx) error { close(held); <-release; return nil })
	<-held
	delta := func(text string) {
		check(t, j.Append(Event{RunID: "r", NodeID: "a", Kind: KindDelta, ProviderSeq: NoProviderSeq, Payload: []byte(text)}))
	}
	a := change(node("a"))
	delta("one ")
	bad := change(func(ctx context.Context, tx stmtTx) error {
		if err := node("b")(ctx, tx); err != nil {
			return err
		}
		return ErrNotFound
	})
	delta("two")
	c := change(node("c"))
	close(release)

	for name, o := range map[string]op{"hold": hold, "a": a, "c": c} {
		if err := <-o.done; err != nil {
			t.Errorf("state change %s: %v", name, err)
		}
	}
	if err := <-bad.done; !errors.Is(err, ErrNotFound) {
		t.Errorf("failing state change reported %v; want ErrNotFound", err)
	}
	nodes, err := j.Nodes(ctx, "r")
	check(t, err)
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	if !slices.Equal(ids, []string{"a", "c"}) {
		t.Errorf("nodes %v; want [a c]: the failed change's own write must be rolled back, the others kept", ids)
	}
	if out, err := j.RebuildOutput(ctx, "r", "a", 0); err != nil || out != "one two" {
		t.Errorf("events of the batch: %q, %v; want %q", out, err, "one two")
	}
	// The rolled-back first try numbered the events too; the second must
	// number them afresh.
	evs, err := j.Events(ctx, "r", EventFilter{})
	check(t, err)
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 {
		t.Errorf("events %+v; want seqs 1 and 2", evs)
	}
}

// EventFilter.NoText reads the same events, seq, time and kind, with the
// text of delta and reasoning events left out and every other payload
// kept, before and after a fold.
func TestEventsNoText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "run")
	check(t, j.SetNodesPending(ctx, "run", []string{"n"}))
	a, err := j.BeginAttempt(ctx, "run", "n", ModeStart, "p")
	check(t, err)
	for i := range 50 {
		kind := KindDelta
		if i%5 == 0 {
			kind = KindReasoning
		}
		check(t, j.Append(Event{RunID: "run", NodeID: "n", Attempt: a, Kind: kind, ProviderSeq: -1, Payload: fmt.Appendf(nil, "w%d ", i)}))
	}
	check(t, j.Append(Event{RunID: "run", NodeID: "n", Attempt: a, Kind: KindUsage, ProviderSeq: -1, Payload: []byte(`{"output_tokens":50}`)}))
	check(t, j.EndAttempt(ctx, "run", "n", a, AttemptEnd{Outcome: OutcomeOK, Cursor: -1}))
	out, err := j.RebuildOutput(ctx, "run", "n", a)
	check(t, err)
	check(t, j.CompleteNode(ctx, "run", "n", out))
	for _, when := range []string{"rows", "folded"} {
		if when == "folded" {
			_, err := j.Fold(ctx, "run")
			check(t, err)
		}
		all, err := j.Events(ctx, "run", EventFilter{AfterSeq: -1})
		check(t, err)
		bare, err := j.Events(ctx, "run", EventFilter{AfterSeq: -1, NoText: true})
		check(t, err)
		if len(all) != len(bare) || len(all) < 51 {
			t.Fatalf("%s: %d events, %d without text", when, len(all), len(bare))
		}
		for i, e := range bare {
			w := all[i]
			text := w.Kind == KindDelta || w.Kind == KindReasoning
			if e.Seq != w.Seq || !e.Time.Equal(w.Time) || e.Kind != w.Kind || (text && len(e.Payload) != 0) || (!text && string(e.Payload) != string(w.Payload)) {
				t.Fatalf("%s: event %d: %+v, want %+v without text", when, i, e, w)
			}
		}
	}
}
