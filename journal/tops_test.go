package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkTops fails unless provider_seq_tops agrees with the events: one row
// per attempt with provider events, holding their highest provider seq and
// lowest seq, and no (run, node, attempt, provider seq) journaled twice.
func checkTops(t *testing.T, j *Journal) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct{ what, query string }{
		{"tops that disagree with the events", `SELECT count(*) FROM (
			SELECT run, node, attempt, MAX(provider_seq) AS top, MIN(seq) AS first FROM events
			WHERE provider_seq >= 0 AND attempt > 0 GROUP BY run, node, attempt) e
			FULL JOIN provider_seq_tops t USING (run, node, attempt)
			WHERE e.top IS NOT t.top OR e.first IS NOT t.first_seq`},
		{"provider events journaled twice", `SELECT count(*) FROM (
			SELECT 1 FROM events WHERE provider_seq >= 0 AND attempt > 0
			GROUP BY run, node, attempt, provider_seq HAVING count(*) > 1)`},
	} {
		var n int
		if err := j.rdb.QueryRowContext(ctx, c.query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d %s", n, c.what)
		}
	}
}

// A journal written by a build that had the unique index events_provider_seq
// (schema version 2) is migrated: the index goes, each attempt's highest
// provider seq is backfilled, and the resume cursor and duplicate detection
// carry on from what was journaled, across a chain of reattach attempts too.
func TestMigrateProviderSeqTops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	if _, err := createFile(path); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(path, writerParams)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, migrations[:2], ""); err != nil {
		t.Fatal(err)
	}
	// Run r: node a, attempt 1 (start) and 2 (reattach) sharing numbering,
	// attempt 3 (retry) with its own, out of order; node b, attempt 1; and
	// attempt 9 of node a, which has no row in attempts.
	const now = 1
	for _, q := range []string{
		`INSERT INTO runs (key, id, graph, graph_sha256, status, started) VALUES (7, 'r', 'g', '', 'running', 1)`,
		`INSERT INTO nodes (run, id, state) VALUES ('r', 'a', 'running'), ('r', 'b', 'running')`,
		`INSERT INTO attempts (run, node, n, mode, outcome, started) VALUES
			('r', 'a', 1, 'start', 'error', 1), ('r', 'a', 2, 'reattach', 'error', 1),
			('r', 'a', 3, 'retry', 'running', 1), ('r', 'b', 1, 'start', 'running', 1)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old := []struct {
		node    string
		attempt int
		ps      int64
	}{
		{"", 0, -1}, {"a", 1, 0}, {"a", 1, 1}, {"b", 1, 0}, {"a", 1, 2}, {"a", 2, 3}, {"a", 2, 4},
		{"a", 3, 0}, {"a", 3, 5}, {"a", 3, 2}, {"a", 3, -1}, {"a", 9, 0}, {"b", 1, 1},
	}
	for i, e := range old {
		if _, err := db.ExecContext(ctx, `INSERT INTO events (run, seq, node, attempt, time, kind, provider_seq, payload)
			VALUES (7, ?, ?, ?, ?, 'delta', ?, ?)`, i+1, e.node, e.attempt, now, e.ps, fmt.Sprintf("%s%d.%d ", e.node, e.attempt, e.ps)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	j := openTest(t, path)
	if v := userVersion(t, j); v != len(migrations) {
		t.Fatalf("user_version = %d, want %d", v, len(migrations))
	}
	var n int
	if err := j.rdb.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'events_provider_seq'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("events_provider_seq still there (%d, %v)", n, err)
	}
	checkTops(t, j)
	for _, c := range []struct {
		node    string
		attempt int
		top     int64
	}{{"a", 1, 2}, {"a", 2, 4}, {"a", 3, 5}, {"a", 4, -1}, {"a", 9, 0}, {"b", 1, 1}, {"b", 2, -1}, {"c", 1, -1}} {
		if top, err := j.MaxProviderSeq(ctx, "r", c.node, c.attempt); err != nil || top != c.top {
			t.Errorf("MaxProviderSeq(%s#%d) = %d, %v; want %d", c.node, c.attempt, top, err, c.top)
		}
	}

	// Repeats of what the old build journaled are dropped; new numbers,
	// including ones below the top, are kept.
	delta := func(node string, attempt int, ps int64) {
		j.Append(Event{RunID: "r", NodeID: node, Attempt: attempt, Kind: KindDelta, ProviderSeq: ps,
			Payload: fmt.Appendf(nil, "%s%d.%d ", node, attempt, ps)})
	}
	delta("a", 2, 1) // journaled in attempt 1, which attempt 2 continues
	delta("a", 2, 4)
	delta("a", 2, 5) // new
	delta("a", 3, 2)
	delta("a", 3, 3) // new, below the top
	delta("a", 3, 6) // new
	delta("a", 9, 0)
	delta("b", 1, 1)
	delta("b", 1, 2) // new
	check(t, j.Flush(ctx))
	checkTops(t, j)
	for _, c := range []struct {
		node    string
		attempt int
		out     string
		top     int64
	}{
		{"a", 2, "a1.0 a1.1 a1.2 a2.3 a2.4 a2.5 ", 5},
		{"a", 3, "a3.0 a3.5 a3.2 a3.-1 a3.3 a3.6 ", 6},
		{"a", 9, "a9.0 ", 0},
		{"b", 1, "b1.0 b1.1 b1.2 ", 2},
	} {
		if out, err := j.RebuildOutput(ctx, "r", c.node, c.attempt); err != nil || out != c.out {
			t.Errorf("RebuildOutput(%s#%d) = %q, %v; want %q", c.node, c.attempt, out, err, c.out)
		}
		if top, err := j.MaxProviderSeq(ctx, "r", c.node, c.attempt); err != nil || top != c.top {
			t.Errorf("MaxProviderSeq(%s#%d) = %d, %v; want %d", c.node, c.attempt, top, err, c.top)
		}
	}
	evs, err := j.Events(ctx, "r", EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(old)+4 {
		t.Errorf("%d events, want %d (4 new)", len(evs), len(old)+4)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d: not gap-free", e.Seq, i)
		}
	}
}

// The tops live in the database, not in the writer: a journal reopened
// (after a crash, or by the process that resumes) still drops what the
// previous writer journaled, across a chain of reattach attempts, however
// the repeats fall across batches.
func TestProviderSeqTopsAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	var want []string
	for round := range 4 {
		j := openTest(t, path, WithBatch(3+round, time.Millisecond))
		if round == 0 {
			createRun(t, j, "r")
		}
		mode := ModeStart
		if round > 0 {
			mode = ModeReattach
		}
		n, err := j.BeginAttempt(ctx, "r", "a", mode, "responses")
		if err != nil {
			t.Fatal(err)
		}
		cursor, err := j.MaxProviderSeq(ctx, "r", "a", n)
		if err != nil {
			t.Fatal(err)
		}
		if wantCursor := int64(10*round) - 1; cursor != wantCursor {
			t.Fatalf("round %d: cursor %d, want %d", round, cursor, wantCursor)
		}
		// A stale resume: it repeats the last five of the previous round,
		// some of them twice, then streams ten new ones.
		for ps := max(cursor-4, 0); ps < cursor+11; ps++ {
			for range 1 + int(ps%2) {
				j.Append(Event{RunID: "r", NodeID: "a", Attempt: n, Kind: KindDelta, ProviderSeq: ps,
					Payload: fmt.Appendf(nil, "%d ", ps)})
			}
			if ps > cursor {
				want = append(want, fmt.Sprint(ps))
			}
		}
		check(t, j.Flush(ctx))
		checkTops(t, j)
		if out, err := j.RebuildOutput(ctx, "r", "a", n); err != nil || out != strings.Join(want, " ")+" " {
			t.Fatalf("round %d: output %q, %v; want %q", round, out, err, strings.Join(want, " ")+" ")
		}
		check(t, j.Close())
	}
}

// Within one transaction, a reattach attempt's chain includes what the same
// transaction journaled for the attempt it continues, before any of it is
// in provider_seq_tops.
func TestProviderSeqTopsWithinOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "", WithBatch(1000, time.Minute)) // everything below commits at the Flush
	createRun(t, j, "r")
	for _, mode := range []AttemptMode{ModeStart, ModeReattach} {
		if _, err := j.BeginAttempt(ctx, "r", "a", mode, "responses"); err != nil {
			t.Fatal(err)
		}
	}
	delta := func(attempt int, ps int64) {
		j.Append(Event{RunID: "r", NodeID: "a", Attempt: attempt, Kind: KindDelta, ProviderSeq: ps,
			Payload: fmt.Appendf(nil, "%d ", ps)})
	}
	for ps := range int64(5) {
		delta(1, ps)
	}
	for ps := int64(3); ps < 7; ps++ {
		delta(2, ps)
	}
	check(t, j.Flush(ctx))
	checkTops(t, j)
	if out, err := j.RebuildOutput(ctx, "r", "a", 2); err != nil || out != "0 1 2 3 4 5 6 " {
		t.Errorf("output %q, %v", out, err)
	}
	if top, err := j.MaxProviderSeq(ctx, "r", "a", 2); err != nil || top != 6 {
		t.Errorf("MaxProviderSeq = %d, %v; want 6", top, err)
	}
}

// providerCrashHelperEnv makes the test binary stream provider events into
// the journal at its value's path until killed (TestProviderSeqTopsCrash).
const providerCrashHelperEnv = "NODERUN_JOURNAL_PROVIDER_CRASH_HELPER"

// providerCrashHelper streams provider events for node a in a chain of
// reattach attempts, each resumed from a stale cursor so that it repeats
// what was journaled, with repeats inside the stream too. It runs until
// killed.
func providerCrashHelper(path string) {
	ctx := context.Background()
	j, fail := helperJournal(path)
	// Every round starts at or below hi+1, so what is journaled at the
	// crash (a prefix of what was appended) covers 0..top without a gap.
	hi := int64(-1)
	for round := 0; ; round++ {
		mode := ModeReattach
		if round == 0 {
			mode = ModeStart
		}
		n, err := j.BeginAttempt(ctx, "run", "a", mode, "responses")
		if err != nil {
			fail(err)
		}
		if round == 0 {
			fmt.Println("ready") // the kill lands among the attempts, never before the first
		}
		ps := rand.Int64N(hi + 2) // anywhere up to what earlier rounds sent
		for range 50 + rand.IntN(200) {
			if err := j.Append(Event{RunID: "run", NodeID: "a", Attempt: n, Kind: KindDelta, ProviderSeq: ps,
				Payload: []byte(strconv.FormatInt(ps, 10))}); err != nil {
				fail(err)
			}
			hi = max(hi, ps)
			if rand.IntN(8) > 0 {
				ps++
			}
		}
	}
}

// TestProviderSeqTopsCrash SIGKILLs a process that journals provider events
// with repeats, and checks what the next process finds: provider_seq_tops
// agrees with the events (they commit together), no provider seq is
// journaled twice in an attempt, and a resume from the journaled cursor
// carries on without duplicates.
func TestProviderSeqTopsCrash(t *testing.T) {
	t.Parallel()
	crashTrials(t, 6, 2, func(t *testing.T) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "crash.db")
		killedHelper(t, providerCrashHelperEnv, path, time.Duration(20+rand.IntN(300))*time.Millisecond)
		j := openIntact(t, path)
		checkTops(t, j)
		atts, err := j.Attempts(ctx, "run", "a")
		if err != nil || len(atts) == 0 {
			t.Fatalf("attempts: %v, %v", atts, err)
		}
		before, err := j.RebuildOutput(ctx, "run", "a", len(atts))
		if err != nil {
			t.Fatal(err)
		}
		cursor, err := j.MaxProviderSeq(ctx, "run", "a", len(atts))
		if err != nil {
			t.Fatal(err)
		}
		// The resume: a reattach from a cursor a little stale.
		n, err := j.BeginAttempt(ctx, "run", "a", ModeReattach, "responses")
		if err != nil {
			t.Fatal(err)
		}
		for ps := max(cursor-5, 0); ps <= cursor+5; ps++ {
			j.Append(Event{RunID: "run", NodeID: "a", Attempt: n, Kind: KindDelta, ProviderSeq: ps,
				Payload: []byte(strconv.FormatInt(ps, 10))})
		}
		check(t, j.Flush(ctx))
		checkTops(t, j)
		after, err := j.RebuildOutput(ctx, "run", "a", n)
		if err != nil {
			t.Fatal(err)
		}
		var added strings.Builder
		for ps := cursor + 1; ps <= cursor+5; ps++ {
			added.WriteString(strconv.FormatInt(ps, 10))
		}
		if after != before+added.String() {
			t.Errorf("after the resume the output grew by %q, want %q", strings.TrimPrefix(after, before), added.String())
		}
		if top, err := j.MaxProviderSeq(ctx, "run", "a", n); err != nil || top != cursor+5 {
			t.Errorf("cursor after the resume = %d, %v; want %d", top, err, cursor+5)
		}
		t.Logf("%d attempts, cursor %d at the crash", len(atts), cursor)
	})
}
