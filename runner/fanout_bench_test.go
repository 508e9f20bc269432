package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/internal/benchstat"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
)

// fanOutTokens is what every node of the fan-out benchmark streams.
const fanOutTokens = 200

// simChildEnv makes the test binary a simulator process streaming that many
// tokens per request (see TestMain). The benchmarks measure the client side:
// the simulator's CPU must not count as the client's, and at 10,000 streams
// its end of the connections must not share this process's file
// descriptors or peak RSS.
const simChildEnv = "NODERUN_BENCH_SIM_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(simChildEnv) != "" {
		os.Exit(serveSimChild())
	}
	// Some of this package's parallel tests only wait (out minutes of
	// silence behind nginx, a Retry-After): they may all run at once,
	// beside the others. Every other parallel test takes one of cpus'
	// slots.
	testkit.ParallelUnlessSet(64)
	// The key of the Anthropic tests' graphs (api_key_env), one value for
	// all: set once here, those tests run in parallel (t.Setenv forbids it).
	if err := os.Setenv("NODERUN_TEST_ANTHROPIC_KEY", "sk-ant-test"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// cpus bounds the parallel tests that keep a CPU busy to one a CPU, as the
// default -parallel did (testkit.CPUs): the agent CLIs' (seconds of CPU
// each), and those that stream and check what the stream's pace implies (a
// reference run journaling no recovery, a re-attach within the tokens left
// to generate), which a burst of tests starting at once could starve.
var cpus testkit.CPUs

// serveSimChild serves a simulator until its stdin closes, and prints its
// base URL on stdout.
func serveSimChild() int {
	tokens, err := strconv.Atoi(os.Getenv(simChildEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, simChildEnv+":", err)
		return 2
	}
	srv := sim.New(sim.Config{Seed: 1, Tokens: tokens})
	if err := srv.Start(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.BaseURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// startSimChild starts a simulator process streaming tokens per request
// and returns its base URL.
func startSimChild(b *testing.B, tokens int) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), simChildEnv+"="+strconv.Itoa(tokens))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("simulator process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("simulator process: %v", err)
	}
	return strings.TrimSpace(line)
}

// BenchmarkFanOut runs N independent nodes of 200 tokens each, all at once
// (--parallel N), against a simulator in another process, and the same N
// streams through a bare go-openai fan-out (one goroutine per stream, the
// default client), interleaved. It reports the medians of both walls and
// their ratio (target <= 1.2 at 10,000), the peak heap and peak RSS of the
// runner side (RSS target <= 1 GiB at 10,000), the heap per in-flight node,
// events lost (journaled delta bytes against the output of every node:
// must be 0) and dial timeouts (must be 0; the bare side's are reported
// too).
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchFanOut(b, n) })
	}
}

func benchFanOut(b *testing.B, n int) {
	base := startSimChild(b, fanOutTokens)
	j := testkit.TempJournal(b, "fanout.db")
	var y strings.Builder
	fmt.Fprintf(&y, "name: fanout\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n", base)
	for i := range n {
		fmt.Fprintf(&y, "  - id: n%d\n    prompt: fan out\n", i)
	}
	g, err := ParseGraph(filepath.Join(b.TempDir(), "fanout.yaml"), []byte(y.String()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()

	var bareTimeouts, bareErrors atomic.Int64
	bare := func() {
		cfg := goopenai.DefaultConfig("")
		cfg.BaseURL = base
		client := goopenai.NewClientWithConfig(cfg)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				s, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: "sim",
					Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "fan out"}}, Stream: true})
				if err == nil {
					defer s.Close()
					for err == nil {
						_, err = s.Recv()
					}
					if errors.Is(err, io.EOF) {
						return
					}
				}
				bareErrors.Add(1)
				if strings.Contains(err.Error(), "i/o timeout") {
					bareTimeouts.Add(1)
				}
			})
		}
		wg.Wait()
	}
	// The runner side's timed pass is the run alone; what it journaled is
	// checked after all passes (verify), so that reading back 10,000 nodes'
	// events does not count as running them. A pass keeps only each node's
	// output length for that, not its output.
	type ran struct {
		id      string
		outputs map[string]int64
	}
	var runs []ran
	journaled := func() {
		res, err := Run(ctx, g, Options{Journal: j, Parallel: n, Cache: noCache})
		if err != nil || res.Status != journal.RunCompleted {
			b.Fatalf("%v %s", err, res.Status)
		}
		r := ran{id: res.RunID, outputs: make(map[string]int64, len(res.Nodes))}
		for _, nr := range res.Nodes {
			r.outputs[nr.ID] = int64(len(nr.Output))
		}
		runs = append(runs, r)
	}
	var lost, timeouts, retries int64
	verify := func(r ran) {
		evs, err := j.Events(ctx, r.id, journal.EventFilter{Kinds: []string{journal.KindDelta, "diagnostic"}})
		if err != nil {
			b.Fatal(err)
		}
		got := map[string]int64{}
		for _, e := range evs {
			switch {
			case e.Kind == journal.KindDelta:
				got[e.NodeID] += int64(len(e.Payload))
			case bytes.Contains(e.Payload, []byte("i/o timeout")):
				timeouts++
			}
		}
		for id, out := range r.outputs {
			if d := out - got[id]; d != 0 {
				lost += max(d, -d)
			}
		}
		nodes, err := j.Nodes(ctx, r.id)
		if err != nil {
			b.Fatal(err)
		}
		for _, nd := range nodes {
			retries += int64(nd.Attempts - 1)
		}
	}

	// Both sides sample their heap alike (the sampler's own cost included),
	// and the bare side's peak is the floor for the runner's.
	var peakHeap, peakRSS, barePeakHeap []float64
	measured := func() {
		resetPeakRSS()
		stop := samplePeakHeap()
		journaled()
		peakHeap = append(peakHeap, float64(stop())/(1<<20))
		peakRSS = append(peakRSS, float64(peakRSSBytes())/(1<<20))
	}
	bareMeasured := func() {
		stop := samplePeakHeap()
		bare()
		barePeakHeap = append(barePeakHeap, float64(stop())/(1<<20))
	}
	p := interleave(b.N, bareMeasured, measured)
	b.StopTimer()
	for _, r := range runs {
		verify(r)
	}
	p.report(b, "s")
	// CPU per node, to set against other runners on the same simulator
	// settings (docs/performance.md).
	b.ReportMetric(benchstat.Median(p.runCPU)*1e6/float64(n), "cpu-µs/node")
	b.ReportMetric(benchstat.Median(p.bareCPU)*1e6/float64(n), "bare-cpu-µs/node")
	b.ReportMetric(benchstat.Median(peakHeap), "peak-heap-MiB")
	b.ReportMetric(benchstat.Median(peakHeap)*1024/float64(n), "heap-KiB/node")
	b.ReportMetric(benchstat.Median(barePeakHeap)*1024/float64(n), "bare-heap-KiB/node")
	b.ReportMetric(benchstat.Median(peakRSS), "peak-rss-MiB")
	b.ReportMetric(float64(lost), "lost-bytes")
	b.ReportMetric(float64(timeouts), "dial-timeouts")
	b.ReportMetric(float64(retries), "retries")
	b.ReportMetric(float64(bareTimeouts.Load()), "bare-dial-timeouts")
	b.ReportMetric(float64(bareErrors.Load()), "bare-errors")
}

// pairs holds what interleave measured: per run, the wall and process CPU
// seconds of each side.
type pairs struct {
	bareWall, runWall, bareCPU, runCPU []float64
}

// interleave runs bare and runner n times each, in pairs whose order
// alternates, so that neither side always runs first (on a warmer cache, or
// right after the other side's garbage). Machine load hits both sides of a
// pair alike, so the median of the pairwise ratios is the steadiest figure
// on a shared machine.
func interleave(n int, bare, runner func()) pairs {
	var p pairs
	timed := func(side string, f func(), wall, cpu *[]float64) {
		runtime.GC()
		c0, t0 := benchstat.CPUTime(), time.Now()
		// The label tells the sides apart in a CPU profile (make profile).
		pprof.Do(context.Background(), pprof.Labels("side", side), func(context.Context) { f() })
		*wall = append(*wall, time.Since(t0).Seconds())
		*cpu = append(*cpu, (benchstat.CPUTime() - c0).Seconds())
	}
	for i := range n {
		if i%2 == 0 {
			timed("bare", bare, &p.bareWall, &p.bareCPU)
			timed("runner", runner, &p.runWall, &p.runCPU)
		} else {
			timed("runner", runner, &p.runWall, &p.runCPU)
			timed("bare", bare, &p.bareWall, &p.bareCPU)
		}
	}
	return p
}

// report reports both sides' median walls (in unit: "s" or "ms"), the
// median of the pairwise wall ratios runner/bare ("ratio") and of the CPU
// ratios ("cpu-ratio").
func (p pairs) report(b *testing.B, unit string) {
	scale := 1.0
	if unit == "ms" {
		scale = 1000
	}
	ratios := func(num, den []float64) []float64 {
		out := make([]float64, len(num))
		for i := range num {
			out[i] = num[i] / den[i]
		}
		return out
	}
	b.ReportMetric(benchstat.Median(p.bareWall)*scale, "bare-"+unit)
	b.ReportMetric(benchstat.Median(p.runWall)*scale, "runner-"+unit)
	b.ReportMetric(benchstat.Median(ratios(p.runWall, p.bareWall)), "ratio")
	b.ReportMetric(benchstat.Median(ratios(p.runCPU, p.bareCPU)), "cpu-ratio")
}

// samplePeakHeap samples the live heap every 5 ms until the returned
// function is called, which returns the highest sample.
func samplePeakHeap() func() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return func() uint64 { close(done); <-stopped; return peak }
}

// resetPeakRSS resets the process's peak RSS (VmHWM), where Linux allows it.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSBytes is the process's peak RSS since the last reset (0 if unknown).
func peakRSSBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
