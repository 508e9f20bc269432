package journal

import (
	"context"
	"testing"
	"time"
)

// A completed node is found by its key, with the usage of the attempt that
// produced it; a copy made from the cache keeps its origin (age and cost);
// a pending node, the looking run and an entry older than the TTL are not hits.
func TestCacheLookup(t *testing.T) {
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
