package journal

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// WithWriteObserver is told each group commit: its time, its operations,
// its error.
func TestWriteObserver(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var commits, ops int
	var total time.Duration
	j, err := Open(context.Background(), filepath.Join(t.TempDir(), "j.db"), WithWriteObserver(func(d time.Duration, n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("commit error: %v", err)
		}
		commits++
		ops += n
		total += d
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	if err := j.CreateRun(ctx, Run{ID: "r", Graph: "g", Status: RunRunning, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := j.Append(Event{RunID: "r", Kind: KindDiagnostic, ProviderSeq: -1, Payload: []byte(`{}`), Attempt: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if commits == 0 || ops < 11 || total <= 0 {
		t.Errorf("%d commits of %d operations in %s; want at least the run and 10 events", commits, ops, total)
	}
}
