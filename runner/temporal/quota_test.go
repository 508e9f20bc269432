package temporal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/quota"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// Two workers of one run pace alone (each learns the account's budget from
// its own answers): a graph three times wider than the limit lets through at
// once completes; the simulator refuses requests in the first window (both
// workers start on a full budget), and few after it: a refusal makes the
// worker refused count on a smaller share of what replenishes, so the two
// soon leave slack between them. (At a short window a worker's timing is a
// large part of the pace: at 12 s this bound is 3 (at 4 s a loaded make test
// saw 4, and at 8 s the package run alone under a profiler, and make test at
// -p 3); BenchmarkQuota/two-runners, at a minute, has none after the first
// window.)
func TestTwoWorkersPaceOneAccount(t *testing.T) {
	const nodes, perWindow, window = 60, 20, 12 * time.Second
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 20,
		Limits: &sim.Limits{RequestsPerWindow: perWindow, TokensPerWindow: 1_000_000, Window: window}})
	var src strings.Builder
	fmt.Fprintf(&src, "name: quota\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n", srv.BaseURL())
	for i := range nodes {
		fmt.Fprintf(&src, "  - {id: n%02d, prompt: 'write about %d'}\n", i, i)
	}
	dir := t.TempDir()
	g := loadGraph(t, dir, "quota.yaml", src.String())
	c := dialDev(t)
	queue := fmt.Sprintf("quota-%d", time.Now().UnixNano())
	for _, id := range []string{"w1", "w2"} {
		startWorker(t, c, queue, filepath.Join(dir, id+".db"), &ntemporal.Activities{Identity: id, Pacers: quota.NewRegistry()})
	}
	ctx := context.Background()
	in := ciInput(t, "quota", g)
	in.Parallel = nodes
	// The default profile's deadlines: this test is of pacing, and under a
	// loaded make test the ci profile's (a 2 s idle timeout, a 5 s recovery
	// deadline that a paced retry's wait counts against) failed nodes that
	// a stalled test process had not read in time.
	prof, err := profile.Set(profile.Builtins()).Get("default")
	if err != nil {
		t.Fatal(err)
	}
	in.Profile = prof
	start := time.Now()
	// The first window is the simulator's: it begins with the first request
	// it sees, which under a loaded make test comes seconds after Submit
	// (the workflow is scheduled, the activities dispatched), not at start.
	var early atomic.Int64
	early.Store(-1)
	watch, unwatch := context.WithCancel(ctx)
	defer unwatch()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for srv.Stats().Requests[sim.EndpointChat] == 0 {
			select {
			case <-tick.C:
			case <-watch.Done():
				return
			}
		}
		select {
		case <-time.After(window):
			early.Store(srv.Stats().RateLimited)
		case <-watch.Done():
		}
	}()
	if _, err := ntemporal.Submit(ctx, c, queue, in); err != nil {
		t.Fatal(err)
	}
	res, err := ntemporal.Follow(ctx, c, in.RunID, 50*time.Millisecond, nil)
	wall := time.Since(start)
	unwatch()
	<-watched
	if err != nil || res.Status != string(journal.RunCompleted) {
		t.Fatalf("run: %v %+v", err, res)
	}
	workers := map[string]int{}
	for _, n := range res.Nodes {
		workers[n.Worker]++
	}
	st := srv.Stats()
	late := st.RateLimited - max(early.Load(), 0)
	t.Logf("%d nodes on %v in %s: %d refused, %d after the first window", nodes, workers, wall.Round(time.Millisecond), st.RateLimited, late)
	if len(workers) != 2 {
		t.Errorf("nodes ran on %v: want both workers", workers)
	}
	if early.Load() >= 0 && late > 3 {
		t.Errorf("%d requests refused after the first window, want at most 3", late)
	}
	if floor := time.Duration(nodes-perWindow) * window / perWindow; wall < floor {
		t.Errorf("%s for what the limit lets through in no less than %s", wall, floor)
	}
}
