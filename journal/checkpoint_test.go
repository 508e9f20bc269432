package journal

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// A writer that never pauses still lets the WAL start over
// (walRestartFrames): without that, every PASSIVE checkpoint ends behind the
// writer, the WAL never starts over and only grows (to the whole of what
// was written here), and emptying it at Close costs in proportion.
func TestWALStartsOverBesideAWriterThatNeverPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	// A start-over asked for past 1 MiB of WAL, checked every 10 ms.
	j := openTest(t, path, func(j *Journal) { j.ckptEvery, j.walRestart = 10*time.Millisecond, 256 })
	createRun(t, j, "r")
	// The sampler sees how large the WAL grew and each time it started
	// over: SQLite gives a WAL a new salt (its header's bytes 16-23) each
	// time it writes it from its start again.
	var biggest atomic.Int64
	salts := map[[8]byte]bool{}
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if f, err := os.Open(path + "-wal"); err == nil {
				var hdr [32]byte
				if _, err := io.ReadFull(f, hdr[:]); err == nil {
					salts[[8]byte(hdr[16:24])] = true
				}
				if fi, err := f.Stat(); err == nil {
					biggest.Store(max(biggest.Load(), fi.Size()))
				}
				f.Close()
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	// Four streams append 16 MiB as fast as the writer takes them: its
	// queue is never empty, so it commits without a pause.
	const total, writers = 16 << 20, 4
	payload := []byte(strings.Repeat("x", 2000))
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range total / len(payload) / writers {
				if err := j.Append(Event{RunID: "r", NodeID: fmt.Sprintf("n%d", w), Attempt: 1, Kind: KindDelta, ProviderSeq: int64(i), Payload: payload}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-sampled
	// Left to grow, the WAL never starts over (one salt) and holds all 16
	// MiB appended and their index pages: 40 MB. Starting over, it holds
	// the 1 MiB and what was written while the checkpointer copied it and
	// the writer's transaction ended: 5-12 MB under -race, a commit here
	// being ~1 MB, but 27 MB once with another test binary taking the
	// cores, the checkpointer then getting few turns. So the start-overs
	// are counted, and the size bounded only well below the 40 MB.
	if len(salts) < 3 {
		t.Errorf("the WAL started over %d times while %d bytes were appended, each past 1 MiB: want at least 2", len(salts)-1, total)
	}
	if got := biggest.Load(); got > 2*total || got == 0 {
		t.Errorf("the WAL reached %d bytes while %d were appended: it did not start over", got, total)
	}
}
