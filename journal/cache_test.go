package journal

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// A completed node is found by its key, with the usage of the attempt that
// produced it; a copy made from the cache keeps its origin (age and cost);
// a pending node, the looking run and an entry older than the TTL are not hits.
func TestCacheLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r1")
	check(t, j.SetNodesPending(ctx, "r1", []string{"a", "b"}))
	check(t, j.StartNode(ctx, "r1", "a", "k1"))
	check(t, j.StartNode(ctx, "r1", "b", "k2")) // never completes
	n, err := j.BeginAttempt(ctx, "r1", "a", ModeStart, "p")
	check(t, err)
	check(t, j.RecordUsage("r1", "a", n, Usage{InputTokens: 10, OutputTokens: 20, Model: "m"}))
	check(t, j.CompleteNode(ctx, "r1", "a", "out-a"))
	check(t, j.Flush(ctx))

	e, ok, err := j.LookupCache(ctx, "k1", "r2", time.Time{})
	check(t, err)
	if !ok || e.Output != "out-a" || e.Origin.Run != "r1" || e.Origin.Node != "a" || e.Origin.Usage.OutputTokens != 20 {
		t.Fatalf("lookup k1 = %+v, %v", e, ok)
	}
	for _, tc := range []struct {
		key, exclude string
		notBefore    time.Time
	}{{"k2", "r2", time.Time{}}, {"k1", "r1", time.Time{}}, {"k1", "r2", time.Now().Add(time.Hour)}, {"nosuch", "", time.Time{}}} {
		if _, ok, err := j.LookupCache(ctx, tc.key, tc.exclude, tc.notBefore); ok || err != nil {
			t.Errorf("lookup %+v: a hit (%v)", tc, err)
		}
	}

	createRun(t, j, "r2")
	check(t, j.SetNodesPending(ctx, "r2", []string{"a"}))
	check(t, j.CompleteNodeFromCache(ctx, "r2", "a", "k1", e))
	check(t, j.Flush(ctx))
	e2, ok, err := j.LookupCache(ctx, "k1", "r3", time.Time{})
	check(t, err)
	if !ok || e2.Origin.Run != "r1" || !e2.Origin.Produced.Equal(e.Origin.Produced) || e2.Origin.Usage != e.Origin.Usage {
		t.Fatalf("a copy's origin = %+v, want %+v", e2.Origin, e.Origin)
	}
	// The copy is newer, but its answer is as old as the original's.
	if _, ok, _ := j.LookupCache(ctx, "k1", "r3", e.Origin.Produced.Add(time.Nanosecond)); ok {
		t.Error("a copy renewed its origin's age")
	}
}

// ClaimKey: of two live runs claiming one key, the first gets it and the
// second is told whom to wait for, until that node ends (completed,
// failed) or its runner is gone; a run's own nodes never count, nor do
// runs without a live owner.
func TestClaimKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j, other := openTest(t, path), openTest(t, path)
	start := func(j *Journal, run string) Owner {
		o := NewOwner()
		check(t, j.CreateRun(ctx, Run{ID: run, Graph: "g", GraphText: []byte("name: g\n"), Status: RunRunning, Owner: o}))
		check(t, j.SetNodesPending(ctx, run, []string{"n", "m"}))
		return o
	}
	oa := start(j, "a")
	start(other, "b")
	if f, err := j.ClaimKey(ctx, "a", "n", "k"); f != nil || err != nil {
		t.Fatalf("the first claim: %+v, %v", f, err)
	}
	if f, err := j.ClaimKey(ctx, "a", "m", "k"); f != nil || err != nil {
		t.Fatalf("a second node of the same run: %+v, %v (a run's own nodes are not in flight for it)", f, err)
	}
	f, err := other.ClaimKey(ctx, "b", "n", "k")
	if err != nil || f == nil || f.Run != "a" || f.Node != "n" || f.Owner.Token != oa.Token {
		t.Fatalf("the second run's claim: %+v, %v; want run a's node n", f, err)
	}
	if f, _ := other.InFlightOf(ctx, "b", "k"); f == nil || f.Run != "a" {
		t.Fatalf("InFlightOf: %+v", f)
	}
	check(t, j.StartNode(ctx, "a", "n", "k"))
	if f, _ := other.InFlightOf(ctx, "b", "k"); f == nil {
		t.Fatal("a claimed node that started is no longer in flight")
	}
	check(t, j.CompleteNode(ctx, "a", "n", "out"))
	check(t, j.FailNode(ctx, "a", "m", "deterministic", "no"))
	if f, err := other.ClaimKey(ctx, "b", "n", "k"); f != nil || err != nil {
		t.Fatalf("after a's nodes ended: %+v, %v; want the claim", f, err)
	}

	// A run whose runner is gone (its lock released, as by a kill) holds nothing.
	oc := start(j, "c")
	if f, err := j.ClaimKey(ctx, "c", "n", "k2"); f != nil || err != nil {
		t.Fatalf("run c's claim: %+v, %v", f, err)
	}
	if f, _ := other.ClaimKey(ctx, "b", "m", "k2"); f == nil || f.Run != "c" {
		t.Fatalf("while c's runner lives: %+v, want c's node", f)
	}
	check(t, j.ReleaseRun(ctx, "c", oc))
	if f, err := other.ClaimKey(ctx, "b", "m", "k2"); f != nil || err != nil {
		t.Fatalf("after c's runner is gone: %+v, %v; want the claim", f, err)
	}
}
