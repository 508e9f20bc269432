package journal

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func readStmtCount(j *Journal) int {
	j.reads.mu.Lock()
	defer j.reads.mu.Unlock()
	return len(j.reads.stmts)
}

// Each read query is prepared once, whatever its arguments; past the bound,
// new texts run unprepared and still answer.
func TestReadStmtsCachedAndBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	if err := j.SetNodesPending(ctx, "r", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Append(Event{RunID: "r", NodeID: "a", Attempt: 0, Kind: fmt.Sprint("k", i), ProviderSeq: NoProviderSeq}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "a"} {
		if _, err := j.Node(ctx, "r", id); err != nil {
			t.Fatal(err)
		}
	}
	if n := readStmtCount(j); n != 1 {
		t.Fatalf("%d statements after three Node reads, want 1", n)
	}
	// Events with 1..200 kinds: two texts per shape (rows and folds).
	for n := 1; n <= 200; n++ {
		kinds := []string{"k0", "k1", "k2"}
		for len(kinds) < n {
			kinds = append(kinds, fmt.Sprint("x", len(kinds)))
		}
		evs, err := j.Events(ctx, "r", EventFilter{AfterSeq: -1, Kinds: kinds[:n]})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(n, 3); len(evs) != want {
			t.Fatalf("%d kinds: %d events, want %d", n, len(evs), want)
		}
	}
	if n := readStmtCount(j); n != maxReadStmts {
		t.Fatalf("%d statements, want the bound %d", n, maxReadStmts)
	}
}

// SQLite compiles a prepared statement again when the schema changed under
// it: a cached read still answers after a schema change and a VACUUM.
func TestReadStmtsAfterSchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	if _, err := j.Run(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.wdb.ExecContext(ctx, `CREATE TABLE extra (a)`); err != nil {
		t.Fatal(err)
	}
	if err := j.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	createRun(t, j, "r2")
	for _, id := range []string{"r", "r2"} {
		if r, err := j.Run(ctx, id); err != nil || r.ID != id {
			t.Fatalf("run %s: %+v, %v", id, r, err)
		}
	}
}

// A read-only journal's connections on a live WAL close after each use, so
// its statements are prepared again each time: reads still see new commits.
func TestReadStmtsReadOnlyFollows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	ro, err := OpenReadOnly(ctx, j.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for i := range 5 {
		id := fmt.Sprint("n", i)
		if err := j.SetNodesPending(ctx, "r", []string{id}); err != nil {
			t.Fatal(err)
		}
		nodes, err := ro.Nodes(ctx, "r")
		if err != nil || len(nodes) != i+1 {
			t.Fatalf("after %d nodes: %d, %v", i+1, len(nodes), err)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Nodes(ctx, "r"); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Fatalf("read after Close: %v, want the closed database's error", err)
	}
}

// Reads racing Close fail as reads of a closed journal did before the
// cache (the database's error, not a closed statement's), or succeed, and
// Close leaves no statement behind. (The window where a reader holds a
// statement that Close has just closed is narrow: this run rarely hits it,
// query's fallback covers it.)
func TestReadStmtsCloseUnderReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")
	if err := j.SetNodesPending(ctx, "r", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			<-start
			for {
				_, err := j.Node(ctx, "r", "a")
				if err == nil {
					_, err = j.Events(ctx, "r", EventFilter{Node: "a", AfterSeq: -1})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	close(start)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !strings.Contains(err.Error(), "database is closed") {
			t.Errorf("read during Close: %v", err)
		}
	}
	if n := readStmtCount(j); n != 0 {
		t.Fatalf("%d statements left after Close", n)
	}
}
