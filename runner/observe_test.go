package runner

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	started  []string
	ended    []journal.RunStatus
	progress int
	settled  []string // node: its state and attempts as the journal then holds them
	runCtx   context.Context
	nodeCtx  []context.Context
}

type ctxKey struct{}

func (r *recorder) RunStarted(ctx context.Context, runID string, g *Graph) (context.Context, func(journal.RunStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, runID)
	ctx = context.WithValue(ctx, ctxKey{}, runID)
	r.runCtx = ctx
	return ctx, func(st journal.RunStatus) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ended = append(r.ended, st)
	}
}

func (r *recorder) Progress(runID string, p Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress++
}

func (r *recorder) NodeSettled(ctx context.Context, j *journal.Journal, g *Graph, runID, node string) {
	n, err := j.Node(ctx, runID, node)
	atts, aerr := j.Attempts(ctx, runID, node)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || aerr != nil {
		r.settled = append(r.settled, node+": "+errString(err, aerr))
		return
	}
	r.settled = append(r.settled, node+" "+string(n.State)+" "+string(rune('0'+len(atts))))
	r.nodeCtx = append(r.nodeCtx, ctx)
}

func errString(errs ...error) string {
	for _, e := range errs {
		if e != nil {
			return e.Error()
		}
	}
	return ""
}

// The observer is told the run's start and end once, each node once it
// settles with its outcome and attempts committed (read back from the
// journal), under the context RunStarted returned, and the progress.
func TestObserver(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200, TokensPerSecond: 5000,
		Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 50}}})
	g := chatGraph(t, srv.BaseURL(), "a")
	var rec recorder
	res, err := Run(context.Background(), g, Options{Journal: openJournal(t), Observer: &rec})
	if err != nil || res.Status != journal.RunCompleted {
		t.Fatalf("run: %v %v", res, err)
	}
	if !slices.Equal(rec.started, []string{res.RunID}) || !slices.Equal(rec.ended, []journal.RunStatus{journal.RunCompleted}) {
		t.Errorf("started %v ended %v", rec.started, rec.ended)
	}
	if want := []string{"a completed 2"}; !slices.Equal(rec.settled, want) {
		t.Errorf("settled %v, want %v (the retry's two attempts)", rec.settled, want)
	}
	if len(rec.nodeCtx) != 1 || rec.nodeCtx[0].Value(ctxKey{}) != res.RunID || rec.nodeCtx[0].Err() != nil {
		t.Errorf("the node's context does not descend from the run's, or is canceled")
	}
	if rec.progress == 0 {
		t.Error("no progress reached the observer")
	}
}
