package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// A failed node skips what depends on it, with a reason; the independent
// branch and a dependent of the surviving branch still run.
func TestFailureSkipsDependentsOnly(t *testing.T) {
	// With --parallel 1 and graph order, chat request 1 is "bad"'s: a 400 fails it at once.
	srv := simtest.Start(t, sim.Config{Seed: 1, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultStatus, Status: 400}}})
	g := parseTestGraph(t, fmt.Sprintf(`name: t
profile: ci
providers:
  p: {kind: openai, base_url: %s, model: sim}
nodes:
  - id: bad
    prompt: first
  - id: after_bad
    needs: [bad]
    prompt: 'use {{ output "bad" }}'
  - id: good
    needs: [bad_gate_free]
    prompt: second
  - id: bad_gate_free
    prompt: third
  - id: after_good
    needs: [good]
    prompt: 'use {{ output "good" }}'
  - id: after_both
    needs: [after_bad, after_good]
    prompt: 'both {{ output "after_bad" }} {{ output "after_good" }}'
`, srv.BaseURL()))
	j := openJournal(t)
	res, err := Run(context.Background(), g, Options{Journal: j, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]journal.NodeState{"bad": journal.NodeFailed, "after_bad": journal.NodeSkipped,
		"good": journal.NodeCompleted, "bad_gate_free": journal.NodeCompleted, "after_good": journal.NodeCompleted,
		"after_both": journal.NodeSkipped}
	for _, n := range res.Nodes {
		if n.State != want[n.ID] {
			t.Errorf("%s: %s, want %s (%s)", n.ID, n.State, want[n.ID], n.Reason)
		}
		if n.State == journal.NodeSkipped && !strings.Contains(n.Reason, "needs") {
			t.Errorf("%s skipped without a reason naming its need: %q", n.ID, n.Reason)
		}
	}
	if res.Status != journal.RunFailed {
		t.Errorf("run status %s, want failed", res.Status)
	}
	// Templates see their needs' outputs.
	if out := res.Nodes[4].Output; out == "" {
		t.Errorf("after_good has no output")
	}
	nodes, err := j.Nodes(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.State != want[n.ID] {
			t.Errorf("journal: %s is %s, want %s", n.ID, n.State, want[n.ID])
		}
	}
}

// --parallel bounds concurrency: with 6 slow independent nodes and parallel 2,
// never more than 2 run at once, and 2 do. A node runs from its attempt's
// start to its end, as the journal timed them. (Its chunks, journaled in rows
// of up to 16, time it too coarsely: a node of 20 tokens is two rows, and a
// slowed stream's first row may come after the other node's end.)
func TestParallelBound(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 20, TokensPerSecond: 200})
	g := chatGraph(t, srv.BaseURL(), "a", "b", "c", "d", "e", "f")
	j := openJournal(t)
	res, err := Run(context.Background(), g, Options{Journal: j, Parallel: 2})
	if err != nil || res.Status != journal.RunCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	atts, err := j.Attempts(context.Background(), res.RunID, "")
	if err != nil {
		t.Fatal(err)
	}
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, a := range atts {
		if a.Ended.IsZero() {
			t.Fatalf("attempt %+v never ended", a)
		}
		edges = append(edges, edge{a.Started, 1}, edge{a.Ended, -1})
	}
	slices.SortFunc(edges, func(x, y edge) int { // an end before a start at one instant
		return cmp.Or(x.at.Compare(y.at), cmp.Compare(x.delta, y.delta))
	})
	running, peak := 0, 0
	for _, e := range edges {
		running += e.delta
		peak = max(peak, running)
	}
	if len(atts) != 6 || peak != 2 {
		t.Errorf("%d attempts, at most %d at once; want 6, and 2 at once", len(atts), peak)
	}
	if got := srv.Stats().Requests[sim.EndpointChat]; got != 6 {
		t.Errorf("the simulator saw %d requests, want 6", got)
	}
}

// Ctrl-C: the run stops, the journal says interrupted, nothing is lost.
func TestInterruptRecordsRunAsInterrupted(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 2000, TokensPerSecond: 100})
	g := chatGraph(t, srv.BaseURL(), "slow")
	j := openJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	res, err := Run(ctx, g, Options{Journal: j})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if res.Status != journal.RunInterrupted || res.Nodes[0].State != journal.NodeCanceled {
		t.Fatalf("run %s, node %s", res.Status, res.Nodes[0].State)
	}
	r, err := j.Run(context.Background(), res.RunID)
	if err != nil || r.Status != journal.RunInterrupted {
		t.Fatalf("journal run status %s (%v)", r.Status, err)
	}
	part, err := j.RebuildOutput(context.Background(), res.RunID, "slow", 1)
	if err != nil || part == "" {
		t.Errorf("partial output not journaled: %q %v", part, err)
	}
}

// With the provider down, a graph of 20 independent nodes fails within the
// profile's deadline, and the circuit breaker bounds the connection attempts:
// at most breaker (3) + parallel (4, already dialing when it opened) + one
// probe per cooldown (500ms) elapsed, instead of 20 nodes × (1 + 3 retries).
func TestBreakerBoundsConnectionAttemptsInOutage(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1})
	if err := srv.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%02d", i)
	}
	g := chatGraph(t, srv.BaseURL(), ids...)
	j := openJournal(t)
	start := time.Now()
	res, err := Run(context.Background(), g, Options{Journal: j, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for _, n := range res.Nodes {
		if n.State != journal.NodeFailed {
			t.Fatalf("%s: %s", n.ID, n.State)
		}
	}
	if took > 5*time.Second {
		t.Errorf("the outage took %s to fail the graph; the ci deadline is 5s", took)
	}
	dials, refused := 0, 0
	for _, id := range ids {
		for _, c := range codes(t, j, res.RunID, id) {
			switch c {
			case "NR106": // connect_failed: one real connection attempt
				dials++
			case "NR405": // breaker_open: refused without dialing
				refused++
			}
		}
	}
	bound := 3 + 4 + int(took/(500*time.Millisecond)) + 1
	t.Logf("%d connection attempts (bound %d), %d refused by the breaker, in %s", dials, bound, refused, took)
	if dials > bound {
		t.Errorf("%d connection attempts, more than the breaker's bound %d", dials, bound)
	}
	if refused == 0 {
		t.Errorf("the breaker never refused an attempt")
	}
}
