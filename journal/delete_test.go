package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullRun journals a run with rows in every table a run has: nodes (one
// with a cache key), attempts, events with provider seqs (so
// provider_seq_tops), and folded rows (folds).
func fullRun(t *testing.T, j *Journal, id string, started time.Time) {
	t.Helper()
	ctx := context.Background()
	check(t, j.CreateRun(ctx, Run{ID: id, Graph: "g", GraphText: []byte("name: g\n"), Started: started}))
	check(t, j.SetNodesPending(ctx, id, []string{"a", "b"}))
	for _, n := range []string{"a", "b"} {
		check(t, j.StartNode(ctx, id, n, "key-"+id+"-"+n))
		at, err := j.BeginAttempt(ctx, id, n, ModeStart, "p")
		check(t, err)
		var out strings.Builder
		for i := range 200 {
			s := fmt.Sprintf("%s %s token %d of a long enough output\n", id, n, i)
			out.WriteString(s)
			check(t, j.Append(Event{RunID: id, NodeID: n, Attempt: at, Kind: KindDelta, ProviderSeq: int64(i), Payload: []byte(s)}))
		}
		// A diagnostic stays an event row after folding.
		check(t, j.Append(Event{RunID: id, NodeID: n, Attempt: at, Kind: KindDiagnostic, Code: "NR101", ProviderSeq: -1, Payload: []byte(`{"code":"NR101"}`)}))
		check(t, j.EndAttempt(ctx, id, n, at, AttemptEnd{Outcome: OutcomeOK, Cursor: 199}))
		check(t, j.CompleteNode(ctx, id, n, out.String()))
	}
	check(t, j.SetRunStatus(ctx, id, RunCompleted))
	check(t, j.Flush(ctx))
	if _, err := j.Fold(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// runRows counts, per table with a run column, the rows of run id (tables
// keyed by runs.key or by the id alike). Every table is asked, so a table
// added later that DeleteRun forgets fails the test.
func runRows(t *testing.T, j *Journal, id string, key int64) map[string]int {
	t.Helper()
	rows, err := j.rdb.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	check(t, err)
	var tables []string
	for rows.Next() {
		var n string
		check(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	check(t, rows.Close())
	out := map[string]int{}
	for _, tb := range tables {
		var hasRun int
		check(t, j.rdb.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name = 'run'`, tb).Scan(&hasRun))
		if tb == "runs" {
			var n int
			check(t, j.rdb.QueryRow(`SELECT count(*) FROM runs WHERE id = ?`, id).Scan(&n))
			out[tb] = n
			continue
		}
		if hasRun == 0 {
			continue
		}
		var n int
		check(t, j.rdb.QueryRow(`SELECT count(*) FROM "`+tb+`" WHERE run = ? OR run = ?`, id, key).Scan(&n))
		out[tb] = n
	}
	return out
}

func runKey(t *testing.T, j *Journal, id string) int64 {
	t.Helper()
	var k int64
	check(t, j.rdb.QueryRow(`SELECT key FROM runs WHERE id = ?`, id).Scan(&k))
	return k
}

// intact fails unless SQLite finds the file and its references sound.
func intact(t *testing.T, j *Journal) {
	t.Helper()
	var res string
	check(t, j.rdb.QueryRow(`PRAGMA integrity_check`).Scan(&res))
	if res != "ok" {
		t.Fatalf("integrity_check: %s", res)
	}
	rows, err := j.rdb.Query(`PRAGMA foreign_key_check`)
	check(t, err)
	defer rows.Close()
	if rows.Next() {
		t.Fatal("foreign_key_check found rows that reference nothing")
	}
}

func freePages(t *testing.T, j *Journal) int {
	t.Helper()
	var n int
	check(t, j.rdb.QueryRow(`PRAGMA freelist_count`).Scan(&n))
	return n
}

func TestDeleteRunRemovesEveryRowAndCompactReclaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	now := time.Now()
	fullRun(t, j, "gone", now.Add(-time.Hour))
	fullRun(t, j, "kept", now)
	goneKey, keptKey := runKey(t, j, "gone"), runKey(t, j, "kept")
	before := runRows(t, j, "gone", goneKey)
	for _, tb := range []string{"runs", "nodes", "attempts", "events", "provider_seq_tops", "folds"} {
		if before[tb] == 0 {
			t.Fatalf("fixture: run has no %s rows (%v): the test would prove nothing", tb, before)
		}
	}
	keptBefore := runRows(t, j, "kept", keptKey)
	if _, ok, err := j.LookupCache(ctx, "key-gone-a", "", time.Time{}); !ok || err != nil {
		t.Fatalf("fixture: the run's cache entry is not found (%v)", err)
	}
	check(t, j.Vacuum(ctx))
	free0 := freePages(t, j)

	check(t, j.DeleteRun(ctx, "gone"))
	for tb, n := range runRows(t, j, "gone", goneKey) {
		if n != 0 {
			t.Errorf("after delete, %s still has %d rows of the run", tb, n)
		}
	}
	if got := runRows(t, j, "kept", keptKey); !mapsEqual(got, keptBefore) {
		t.Errorf("the other run's rows changed: %v, were %v", got, keptBefore)
	}
	if out, err := j.RebuildOutput(ctx, "kept", "a", 1); err != nil || !strings.Contains(out, "kept a token 199") {
		t.Errorf("the other run's output after the delete: %.40q, %v", out, err)
	}
	if _, ok, err := j.LookupCache(ctx, "key-gone-a", "", time.Time{}); ok || err != nil {
		t.Errorf("the deleted run's cache entry is still found (%v)", err)
	}
	intact(t, j)
	if err := j.DeleteRun(ctx, "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}

	free1 := freePages(t, j)
	if free1 <= free0 {
		t.Fatalf("free pages after the delete: %d, before %d: nothing was freed", free1, free0)
	}
	size1 := DiskSize(path)
	check(t, j.Vacuum(ctx))
	if free2 := freePages(t, j); free2 >= free1 {
		t.Errorf("free pages after vacuum: %d, before %d", free2, free1)
	}
	if size2 := DiskSize(path); size2 >= size1 {
		t.Errorf("file size after vacuum: %d, before %d", size2, size1)
	}
	intact(t, j)
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A run whose runner holds it is refused, naming the process; once the
// runner lets go it can be deleted.
func TestDeleteRunRefusesALiveRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	o := NewOwner()
	check(t, j.CreateRun(ctx, Run{ID: "live", Graph: "g", GraphText: []byte("x"), Owner: o}))
	err := j.DeleteRun(ctx, "live")
	le, ok := errors.AsType[*LockedError](err)
	if !ok {
		t.Fatalf("delete of a live run: %v, want *LockedError", err)
	}
	if le.Owner.PID != os.Getpid() || le.Owner.Host != o.Host || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("the error names %+v (%v), want this process", le.Owner, err)
	}
	if ok, _ := j.HasRun(ctx, "live"); !ok {
		t.Fatal("the refused run is gone")
	}
	check(t, j.ReleaseRun(ctx, "live", o))
	check(t, j.DeleteRun(ctx, "live"))
	if ok, _ := j.HasRun(ctx, "live"); ok {
		t.Fatal("the released run is still there")
	}
}

func ids(runs []Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func TestFindRunsFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	now := time.Now()
	mk := func(id, graph string, age time.Duration, s RunStatus, owner Owner) {
		check(t, j.CreateRun(ctx, Run{ID: id, Graph: graph, GraphText: []byte("x"), Started: now.Add(-age), Owner: owner}))
		if s != RunRunning {
			check(t, j.SetRunStatus(ctx, id, s))
			if owner.Token != "" {
				check(t, j.ReleaseRun(ctx, id, owner))
			}
		}
	}
	mk("c1", "alpha", 10*24*time.Hour, RunCompleted, Owner{})
	mk("f1", "beta", 5*24*time.Hour, RunFailed, Owner{})
	mk("c2", "alpha", 2*time.Hour, RunCompleted, Owner{})
	mk("gone", "alpha", time.Hour, RunRunning, Owner{}) // says running; nobody runs it: interrupted
	mk("live", "beta", time.Minute, RunRunning, NewOwner())
	for _, c := range []struct {
		q    RunQuery
		want []string
	}{
		{RunQuery{}, []string{"live", "gone", "c2", "f1", "c1"}},
		{RunQuery{Limit: 2}, []string{"live", "gone"}},
		{RunQuery{Status: RunCompleted}, []string{"c2", "c1"}},
		{RunQuery{Status: RunInterrupted}, []string{"gone"}},
		{RunQuery{Status: RunRunning}, []string{"live"}},
		{RunQuery{Graph: "alpha"}, []string{"gone", "c2", "c1"}},
		{RunQuery{Graph: "alpha", Limit: 1, Status: RunCompleted}, []string{"c2"}},
		{RunQuery{Since: now.Add(-3 * time.Hour)}, []string{"live", "gone", "c2"}},
		{RunQuery{Before: now.Add(-3 * time.Hour)}, []string{"f1", "c1"}},
		{RunQuery{Graph: "nosuch"}, nil},
	} {
		got, err := j.FindRuns(ctx, c.q)
		check(t, err)
		if !slices.Equal(ids(got), c.want) {
			t.Errorf("FindRuns(%+v) = %v, want %v", c.q, ids(got), c.want)
		}
	}
	if _, err := j.FindRuns(ctx, RunQuery{Status: "done"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "completed") {
		t.Errorf("an unknown status: %v, want ErrInvalid naming the valid ones", err)
	}
	if _, err := ParseRunStatus("complete"); err == nil || !strings.Contains(err.Error(), "running, completed, failed, interrupted") {
		t.Errorf("ParseRunStatus(complete) = %v", err)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	now := time.Now()
	day := 24 * time.Hour
	for _, r := range []struct {
		id  string
		age time.Duration
		s   RunStatus
	}{{"old-ok", 10 * day, RunCompleted}, {"old-failed", 9 * day, RunFailed}, {"new", time.Hour, RunCompleted}} {
		fullRun(t, j, r.id, now.Add(-r.age))
		check(t, j.SetRunStatus(ctx, r.id, r.s))
	}
	o := NewOwner() // an old run still being run
	check(t, j.CreateRun(ctx, Run{ID: "old-live", Graph: "g", GraphText: []byte("x"), Started: now.Add(-8 * day), Owner: o}))

	if _, err := j.Prune(ctx, PruneOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("prune with no age: %v, want ErrInvalid", err)
	}
	if _, err := j.Prune(ctx, PruneOptions{OlderThan: -day}); !errors.Is(err, ErrInvalid) {
		t.Errorf("prune with a negative age: %v, want ErrInvalid", err)
	}
	dry, err := j.Prune(ctx, PruneOptions{OlderThan: 7 * day, DryRun: true})
	check(t, err)
	if got := ids(dry.Deleted); !slices.Equal(got, []string{"old-failed", "old-ok"}) {
		t.Errorf("dry run would delete %v", got)
	}
	if len(dry.Live) != 1 || dry.Live[0].RunID != "old-live" || dry.Live[0].Owner.PID != os.Getpid() {
		t.Errorf("dry run's live runs: %+v", dry.Live)
	}
	all, err := j.FindRuns(ctx, RunQuery{})
	check(t, err)
	if len(all) != 4 {
		t.Fatalf("a dry run deleted something: %v left", ids(all))
	}

	res, err := j.Prune(ctx, PruneOptions{OlderThan: 7 * day, Status: RunFailed})
	check(t, err)
	if got := ids(res.Deleted); !slices.Equal(got, []string{"old-failed"}) || len(res.Live) != 0 {
		t.Errorf("prune --status failed deleted %v (live %v)", got, res.Live)
	}
	res, err = j.Prune(ctx, PruneOptions{OlderThan: 7 * day})
	check(t, err)
	if got := ids(res.Deleted); !slices.Equal(got, []string{"old-ok"}) {
		t.Errorf("prune deleted %v", got)
	}
	all, err = j.FindRuns(ctx, RunQuery{})
	check(t, err)
	if got := ids(all); !slices.Equal(got, []string{"new", "old-live"}) {
		t.Errorf("left after prune: %v", got)
	}
	intact(t, j)
}
