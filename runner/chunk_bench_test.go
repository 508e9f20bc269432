package runner

import (
	"context"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/benchstat"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/runner/graph"
)

// chunkProvider emits n deltas as fast as emit takes them, stamped the way
// the chat adapter stamps them (once per read of a few dozen chunks): what
// is left of a node's stream without the network and the decoding is the
// runner's own path (record, coalescer, journal).
type chunkProvider struct{ n int }

func (chunkProvider) Capabilities() provider.Capabilities { return provider.Capabilities{} }

func (p chunkProvider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	var at time.Time
	for i := range p.n {
		if i%32 == 0 {
			at = time.Now()
		}
		if err := emit(provider.Event{Kind: provider.KindDelta, Text: " token", Seq: -1, Time: at}); err != nil {
			return err
		}
	}
	return emit(provider.Event{Kind: provider.KindDone, Seq: -1, Time: time.Now()})
}

// oneNode is a graph of one node, a, on p (a provider kind of its own), and
// options that run it with a journal of its own.
func oneNode(tb testing.TB, p provider.Provider) (*Graph, Options) {
	tb.Helper()
	opts := Options{Kinds: map[string]ProviderFunc{"own": func(*graph.ProviderSpec) (provider.Provider, error) { return p, nil }}}
	g, err := ParseGraphWith("own.yaml", []byte("name: own\nproviders:\n  p: {kind: own, model: m}\nnodes:\n  - {id: a, prompt: x}\n"), opts)
	if err != nil {
		tb.Fatal(err)
	}
	opts.Journal = testkit.TempJournal(tb, "own.db")
	return g, opts
}

// chunkRun returns a function that runs one node of n chunks through Run,
// reporting progress to hook when it is not nil.
func chunkRun(tb testing.TB, n int, hook func(Progress)) func() {
	g, opts := oneNode(tb, chunkProvider{n})
	opts.OnProgress = hook
	return func() {
		res, err := Run(context.Background(), g, opts)
		if err != nil || res.Status != journal.RunCompleted {
			tb.Fatalf("%v %s", err, res.Status)
		}
	}
}

// BenchmarkChunkPath is the runner's own cost per chunk: the CPU of a
// 200,000-chunk stream through Run (journal writer included) over its
// chunks.
func BenchmarkChunkPath(b *testing.B) { benchChunks(b, nil) }

// benchChunks measures a 200,000-chunk stream through Run with hook.
func benchChunks(b *testing.B, hook func(Progress)) {
	const n = 200_000
	run := chunkRun(b, n, hook)
	run() // warm up: the schema, the prepared statements
	b.ReportAllocs()
	b.ResetTimer()
	var cpu []float64
	for range b.N {
		c0 := benchstat.CPUTime()
		run()
		cpu = append(cpu, float64(benchstat.CPUTime()-c0)/n)
	}
	b.ReportMetric(benchstat.Median(cpu), "cpu-ns/chunk")
}

// A chunk costs no allocation of the runner's own: at 100,000 chunks a
// stream through Run allocates a few thousand times (the output builder
// growing, the journal's batches), not once or more a chunk.
func TestChunkPathDoesNotAllocatePerChunk(t *testing.T) {
	const n = 100_000
	run := chunkRun(t, n, nil)
	run()
	if allocs := testing.AllocsPerRun(3, run); allocs > n/20 {
		t.Errorf("a %d-chunk stream through Run allocated %.0f times: one allocation or more a chunk", n, allocs)
	}
}
