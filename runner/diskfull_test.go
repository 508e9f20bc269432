//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// smallDisk mounts a tmpfs of size bytes for the test (root only, as CI
// runs; a test that cannot mount fails rather than pretending) and unmounts
// it at cleanup.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs at %s: %v (the disk-full test needs root, as CI has)", size, dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file until the disk is full but for about free bytes.
func fill(t *testing.T, dir string, free int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * st.Bsize
	path := filepath.Join(dir, "filler")
	if err := os.WriteFile(path, make([]byte, max(avail-free, 0)), 0o600); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	return path
}

// Issue 15: the disk holding the journal fills up mid-stream. The node stops
// at once (journal_unavailable, not a disconnect): no re-attach, no retry, no
// cancel, no request the journal cannot record; the run ends interrupted with
// an error naming the journal; the response is left running. After space is
// freed, resume completes the node byte-identical, from the one response.
func TestDiskFullStopsTheNodeAndResumeCompletes(t *testing.T) {
	t.Parallel()
	// Under the race detector, 40,000 events streamed and journaled keep a
	// CPU busy for seconds: among the longest, never last. Without it the
	// test mostly waits on the simulator's pace.
	if testkit.Race {
		cpus.TakeFirst(t)
	}
	const T = 40000 // ~200 KB of output: more than the disk has left
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, TokensPerSecond: 20000})
	want := strings.Join(sim.Text("sim", respPrompt, respSeed, T), "")
	dir := smallDisk(t, 64<<20) // room for the resume's WAL once the filler is gone
	db := filepath.Join(dir, "j.db")
	j, err := journal.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	g := responsesGraph(t, srv.BaseURL(), "")
	// The journal's schema and WAL take their space first; then the disk fills.
	if err := j.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, dir, 96<<10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, g, Options{Journal: j})
	if !errors.Is(err, diagnostics.ErrJournal) || !strings.Contains(err.Error(), db) {
		t.Fatalf("Run: %v; want a journal_unavailable error naming %s", err, db)
	}
	if res == nil || res.Status != journal.RunInterrupted || res.Nodes[0].State != journal.NodeCanceled {
		t.Fatalf("result %+v; want the run interrupted and the node stopped", res)
	}
	st := srv.Stats()
	if st.Requests[sim.EndpointResponsesCreate] != 1 || st.Requests[sim.EndpointResponsesStream] != 0 ||
		st.Requests[sim.EndpointResponsesGet] != 0 || st.Requests[sim.EndpointResponsesCancel] != 0 {
		t.Fatalf("requests after the disk filled: %v; want the one create, nothing more", st.Requests)
	}
	_ = j.Close() // its writer stopped; what it committed is on disk

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The runner could not release its lock on the full disk. A process
	// that exits lets the next one take over at once; in this one process
	// the lock is taken over once its heartbeat is stale.
	j, err = journal.Open(context.Background(), db, journal.WithStaleAfter(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	time.Sleep(time.Second)
	res, err = Resume(ctx, res.RunID, nil, Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, j, res, want)
	checkOneResponse(t, srv, T)
	// Every request sent is in the journal: the one attempt, with the response it created.
	atts, err := j.Attempts(context.Background(), res.RunID, respNode)
	if err != nil || len(atts) != 1 || !strings.HasPrefix(atts[0].Ref, "resp_") {
		t.Fatalf("attempts %+v, %v; want the one attempt with its response id", atts, err)
	}
}
