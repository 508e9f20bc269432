package runner

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
)

// BenchmarkRunnerVsBareClient reads the same 100,000-token stream from the
// simulator twice per iteration: once through the runner, with every chunk
// journaled in SQLite, and once through a bare go-openai loop that discards
// it. It reports both medians and their ratio (target <= 1.10), measured in
// the same run so machine noise hits both alike.
func BenchmarkRunnerVsBareClient(b *testing.B) {
	const tokens = 100000
	srv := sim.New(sim.Config{Seed: 1, Tokens: tokens})
	if err := srv.Start(""); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	dir := b.TempDir()
	j, err := journal.Open(context.Background(), filepath.Join(dir, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	g := benchGraph(b, srv.BaseURL())
	cfg := goopenai.DefaultConfig("")
	cfg.BaseURL = srv.BaseURL()
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
		res, err := Run(ctx, g, Options{Journal: j})
		if err != nil || res.Status != journal.RunCompleted {
			b.Fatalf("%v %+v", err, res)
		}
	}
	bare() // warm both paths up: connections, the schema, the page cache
	journaled()

	var bareT, runT []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		bare()
		t1 := time.Now()
		journaled()
		t2 := time.Now()
		bareT = append(bareT, float64(t1.Sub(t0).Microseconds())/1000)
		runT = append(runT, float64(t2.Sub(t1).Microseconds())/1000)
	}
	b.StopTimer()
	mb, mr := median(bareT), median(runT)
	b.ReportMetric(mb, "bare-ms")
	b.ReportMetric(mr, "runner-ms")
	b.ReportMetric(mr/mb, "ratio")
	b.ReportMetric(tokens/(mr/1000), "runner-tokens/s")
}

func benchGraph(b *testing.B, baseURL string) *Graph {
	g, err := ParseGraph(filepath.Join(b.TempDir(), "bench.yaml"), []byte("name: bench\nproviders:\n  p: {kind: openai, base_url: "+baseURL+", model: sim}\nnodes:\n  - id: n\n    prompt: bench\n"))
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
