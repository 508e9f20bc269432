package journal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run that ends has its WAL checkpointed at once, beside the reads of its
// account, rather than within the checkpointer's interval or in Close,
// where its caller would wait for it.
func TestRunEndCheckpointsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	// Only the first commit is checkpointed by the interval; any later
	// checkpoint within the test is the run end's.
	j := openTest(t, path, func(j *Journal) { j.ckptEvery = time.Hour })
	createRun(t, j, "r")
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// The first checkpoint (of the schema and the run) lands in the file.
	waitFor(t, "the first checkpoint", func() bool { return size() > 0 })
	time.Sleep(50 * time.Millisecond) // let it finish
	before := size()
	payload := strings.Repeat("x", 1000)
	for i := range 1000 {
		if err := j.Append(Event{RunID: "r", NodeID: "a", Attempt: 1, Kind: KindDelta, ProviderSeq: int64(i), Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := size(); got != before {
		t.Fatalf("the file grew from %d to %d bytes before the run ended: the interval is an hour", before, got)
	}
	if err := j.SetRunStatus(ctx, "r", RunCompleted); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run end's checkpoint", func() bool { return size() > before+900_000 })
}

// waitFor polls cond for up to 10 s (a loaded machine's scheduling, not
// what is measured).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come within 10 s", what)
		}
	}
}
