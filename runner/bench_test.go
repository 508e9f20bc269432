package runner

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/internal/benchstat"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// BenchmarkRunnerVsBareClient reads the same 100,000-token stream from a
// simulator process twice per iteration: once through the runner, with every
// chunk journaled in SQLite, and once through a bare go-openai loop that
// discards it, in alternating order (see interleave). It reports both
// medians, the median of the pairwise ratios (target <= 1.05) and of the
// CPU ratios (this process only: the simulator's CPU is its own).
func BenchmarkRunnerVsBareClient(b *testing.B) {
	const tokens = 100000
	base := startSimChild(b, tokens)
	dir := b.TempDir()
	j := testkit.OpenJournal(b, filepath.Join(dir, "bench.db"))
	g := benchGraph(b, base)
	cfg := goopenai.DefaultConfig("")
	cfg.BaseURL = base
	client := goopenai.NewClientWithConfig(cfg)
	ctx := context.Background()

	bare := func() {
		s, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: "sim",
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "bench"}}, Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for {
			if _, err := s.Recv(); errors.Is(err, io.EOF) {
				return
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
	journaled := func() {
		res, err := Run(ctx, g, Options{Journal: j, Cache: noCache})
		if err != nil || res.Status != journal.RunCompleted {
			b.Fatalf("%v %+v", err, res)
		}
	}
	bare() // warm both paths up: connections, the schema, the page cache
	journaled()

	b.ResetTimer()
	p := interleave(b.N, bare, journaled)
	b.StopTimer()
	p.report(b, "ms")
	b.ReportMetric(tokens/benchstat.Median(p.runWall), "runner-tokens/s")
}

func benchGraph(b *testing.B, baseURL string) *Graph {
	g, err := ParseGraph(filepath.Join(b.TempDir(), "bench.yaml"), []byte("name: bench\nproviders:\n  p: {kind: openai, base_url: "+baseURL+", model: sim}\nnodes:\n  - id: n\n    prompt: bench\n"))
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// noCache: every pass of a benchmark streams. Its graph is the same each
// pass, so with the node cache on (the default) every pass after the first
// completed its nodes from the journal and measured nothing of the stream.
var noCache = CacheOptions{Off: true}
