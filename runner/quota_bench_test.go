package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner/ledger"
)

// The quota benchmark (issue 26): 300 nodes of 300 tokens at once against a
// simulator limited to 120 requests and 40,000 tokens a minute, paced and
// not. Its figures, per side, in one run:
//
//	wall-s          the run's wall time
//	floor-s         the least the limits allow: when the last request can
//	                leave, by the simulator's own buckets (they start full)
//	wall/floor      paced: <= 1.1
//	429s            requests the simulator refused for the limits
//	429s-late       those refused after the first window (a minute): paced <= 2
//	retries         retries the nodes spent (a 429 costs one without pacing)
//	completed       nodes completed (paced: all 300)
//
// The third side, two-runners, splits the graph between two runners that
// pace alone, sharing nothing but the simulator: what two Temporal workers
// of one run do (each worker has its own pacers).
//
// About two minutes a side; run with -benchtime 1x.
func BenchmarkQuota(b *testing.B) {
	const nodes, tokens, rpm, tpm = 300, 300, 120, 40_000
	for _, side := range []struct {
		name    string
		paced   bool
		runners int
	}{{"paced", true, 1}, {"unpaced", false, 1}, {"two-runners", true, 2}} {
		b.Run(side.name, func(b *testing.B) {
			for range b.N {
				quotaRun(b, nodes, tokens, rpm, tpm, side.paced, side.runners)
			}
		})
	}
}

func quotaRun(b *testing.B, nodes, tokens, rpm, tpm int, paced bool, runners int) {
	b.Helper()
	window := time.Minute
	srv := sim.New(sim.Config{Seed: 1, Tokens: tokens, Limits: &sim.Limits{RequestsPerWindow: rpm, TokensPerWindow: tpm, Window: window}})
	if err := srv.Start(""); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	// The graph, in as many parts as runners, each with its own journal.
	type part struct {
		g   *Graph
		j   *journal.Journal
		res *Result
		err error
	}
	parts := make([]*part, runners)
	for r := range parts {
		var src strings.Builder
		fmt.Fprintf(&src, "name: quota\nproviders:\n  p:\n    kind: openai\n    base_url: %s\n    model: sim\nnodes:\n", srv.BaseURL())
		for i := r; i < nodes; i += runners {
			fmt.Fprintf(&src, "  - id: n%03d\n    prompt: write about %d\n", i, i)
		}
		g, err := ParseGraph("quota.yaml", []byte(src.String()))
		if err != nil {
			b.Fatal(err)
		}
		j, err := journal.Open(context.Background(), fmt.Sprintf("%s/j%d.db", b.TempDir(), r))
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		parts[r] = &part{g: g, j: j}
	}

	// The simulator's refusals by the end of the first window.
	var early atomic.Int64
	early.Store(-1)
	start := time.Now()
	stop := time.AfterFunc(window, func() { early.Store(srv.Stats().RateLimited) })
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.res, p.err = Run(context.Background(), p.g, Options{Journal: p.j, Parallel: nodes, Quota: QuotaOptions{Off: !paced}})
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	stop.Stop()
	for _, p := range parts {
		if p.err != nil {
			b.Fatal(p.err)
		}
	}
	st := srv.Stats()
	late := st.RateLimited - max(early.Load(), 0)
	if early.Load() < 0 { // the run ended within the first window
		late = 0
	}
	completed, retries, used := 0, 0, 0
	for _, p := range parts {
		for _, n := range p.res.Nodes {
			if n.State == journal.NodeCompleted {
				completed++
			}
		}
		evs, err := p.j.Events(context.Background(), p.res.RunID, journal.EventFilter{Kinds: []string{journal.KindDiagnostic}, AfterSeq: -1})
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			if c, ok := diagnostics.Lookup(e.Code); ok && c.SpendsRetry() {
				retries++
			}
		}
		// A node's tokens are its usage, which the simulator charges.
		run, err := ledger.Load(context.Background(), p.j, p.res.RunID, ledger.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		a := ledger.AccountOf(run, nil)
		used += a.Totals.Tokens.Needed + a.Totals.Tokens.Input
	}
	// The floor: each request needs one of the requests bucket and its
	// tokens of the tokens bucket; both start full and replenish at
	// limit/window. The last request leaves when both have had enough.
	perNode := float64(used) / float64(max(completed, 1))
	needReq := float64(nodes - rpm)
	needTok := float64(nodes)*perNode - float64(tpm)
	floor := time.Duration(max(needReq/float64(rpm), needTok/float64(tpm)) * float64(window))
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(floor.Seconds(), "floor-s")
	b.ReportMetric(wall.Seconds()/floor.Seconds(), "wall/floor")
	b.ReportMetric(float64(st.RateLimited), "429s")
	b.ReportMetric(float64(late), "429s-late")
	b.ReportMetric(float64(retries), "retries")
	b.ReportMetric(float64(completed), "completed")
	if paced && runners == 1 && (completed != nodes || late > 2 || wall > floor*11/10) {
		b.Errorf("paced: %d of %d completed, %d refused after the first window, wall %s against a floor of %s",
			completed, nodes, late, wall.Round(time.Millisecond), floor.Round(time.Millisecond))
	}
}
