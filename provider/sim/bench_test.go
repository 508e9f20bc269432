package sim

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// benchClient is a go-openai client whose transport keeps one connection
// per concurrent stream, so the benchmark measures streaming, not dialing.
func benchClient(b *testing.B, s *Server, conns int) *openai.Client {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.BaseURL()
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	b.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = &http.Client{Transport: tr}
	return openai.NewClientWithConfig(cfg)
}

// streams runs n concurrent chat streams to the end and returns the tokens
// received.
func streams(b *testing.B, c *openai.Client, n int) int64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for i := range n {
		wg.Go(func() {
			st, err := c.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
				Model:    "sim",
				Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "bench"}},
				Stream:   true,
			})
			if err != nil {
				b.Errorf("stream %d: %v", i, err)
				return
			}
			defer st.Close()
			var got int64
			for {
				ch, err := st.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Errorf("stream %d: %v", i, err)
					return
				}
				if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
					got++
				}
			}
			mu.Lock()
			total += got
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

func benchStreams(b *testing.B, n int, cfg Config) {
	s := New(cfg)
	if err := s.Start(""); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := benchClient(b, s, n)
	streams(b, c, n) // warm the connection pool
	var tokens int64
	var elapsed time.Duration
	for b.Loop() {
		t0 := time.Now()
		tokens += streams(b, c, n)
		elapsed += time.Since(t0)
	}
	b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tokens/s")
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/batch")
}

// BenchmarkSim1000Streams serves 1,000 concurrent chat streams of 64
// tokens, as fast as possible, through go-openai (client and server share
// the machine). tokens/s is the simulator's ceiling: later benchmarks that
// stay well below it are not measuring the simulator. It holds about 2,000
// file descriptors (both ends of 1,000 connections); `ulimit -n` must allow it.
func BenchmarkSim1000Streams(b *testing.B) {
	benchStreams(b, 1000, Config{Tokens: 64})
}

// BenchmarkSim1000PacedStreams: 1,000 concurrent streams of 32 tokens at 20
// tokens/s each, 20,000 tokens/s offered; the ideal is 1.6 s a batch, and
// s/batch close to it shows the pacing holds at that concurrency. A paced
// token costs a write (and a client read) of its own, so paced streams
// saturate the machine well below the unpaced ceiling.
func BenchmarkSim1000PacedStreams(b *testing.B) {
	benchStreams(b, 1000, Config{Tokens: 32, TokensPerSecond: 20})
}

// BenchmarkSimStream is one stream of 64 tokens at a time.
func BenchmarkSimStream(b *testing.B) {
	benchStreams(b, 1, Config{Tokens: 64})
}

func BenchmarkText(b *testing.B) {
	for b.Loop() {
		Text("sim", "a prompt of some length", 1, 64)
	}
}
