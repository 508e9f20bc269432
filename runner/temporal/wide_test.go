package temporal_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// Temporal's limits on one workflow execution's history, which a wide run
// must stay under half of (issue 29).
const (
	historyEventsLimit = 51_200
	historyBytesLimit  = 50 << 20
)

// wide is one width case: a fan-out of nodes whose prompts are about
// promptBytes each, run locally and on three workers.
type wide struct {
	nodes, promptBytes, parallel int
}

// wideResult is what a width case measured.
type wideResult struct {
	local, temporal time.Duration
	executions      []execution
}

type execution struct {
	run           string
	events, bytes int
}

// simServe starts `noderun sim serve` with config and returns its base URL:
// a process of its own, like the workers, so that the test binary's race
// detector slows neither side.
func simServe(tb testing.TB, bin, dir, config string) string {
	tb.Helper()
	f := filepath.Join(dir, "sim.yaml")
	if err := os.WriteFile(f, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	p := start(tb, "sim", bin, "sim", "serve", "--faults", f)
	return waitFor(tb, 30*time.Second, "the simulator's URL", func() (string, bool) {
		m := regexp.MustCompile(`http://127\.0\.0\.1:\d+/v1`).FindString(p.stdout.String() + p.out.String())
		return m, m != ""
	})
}

// wideGraph writes a fan-out of n nodes whose prompts are promptBytes of
// words each (seeded: the same graph every time).
func wideGraph(tb testing.TB, dir, baseURL string, n, promptBytes int) string {
	tb.Helper()
	words := strings.Fields("socket stream gateway token reasoning journal cursor resume heartbeat worker provider budget answer graph node")
	rng := rand.New(rand.NewPCG(29, uint64(n)))
	var b strings.Builder
	fmt.Fprintf(&b, "name: wide\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n", baseURL)
	for i := range n {
		fmt.Fprintf(&b, "  - {id: n%05d, provider: p, prompt: '", i)
		for l := 0; l < promptBytes; {
			w := words[rng.IntN(len(words))]
			b.WriteString(w + " ")
			l += len(w) + 1
		}
		b.WriteString("'}\n")
	}
	return writeGraph(tb, dir, "wide.yaml", b.String())
}

// runWide runs c's graph with `noderun run` locally, then on Temporal with
// three `noderun worker` processes, checks that both give the same
// outputs, and measures both walls and the workflow's executions.
func runWide(tb testing.TB, c wide) wideResult {
	tb.Helper()
	bin := noderun.Path(tb)
	hostPort := devServer(tb)
	dir := tb.TempDir()
	// 20 tokens at 100 tokens/s: 0.2 s a node, so a wave of nodes is paced
	// by the stream as a real one is, not only by the orchestration.
	url := simServe(tb, bin, dir, "seed: 29\ntokens: 20\ntokens_per_second: 100\n")
	graph := wideGraph(tb, dir, url, c.nodes, c.promptBytes)
	var res wideResult

	t0 := time.Now()
	local := start(tb, "run (local)", bin, "run", "--db", filepath.Join(dir, "local.db"), "--parallel", strconv.Itoa(c.parallel),
		"--json", "--log-level", "error", graph)
	local.wait(tb, 10*time.Minute, "did not finish")
	res.local = time.Since(t0)
	if local.err != nil {
		tb.Fatalf("local run: %v\n%s", local.err, tail(local.out.String()))
	}
	want := jsonOutputs(tb, local.stdout.String())

	queue := fmt.Sprintf("wide-%d-%d", c.nodes, time.Now().UnixNano())
	per := strconv.Itoa((c.parallel + 2) / 3)
	for _, id := range []string{"w1", "w2", "w3"} {
		start(tb, id, bin, "worker", "--temporal", hostPort, "--task-queue", queue, "--parallel", per,
			"--db", filepath.Join(dir, id+".db"), "--identity", id, "--log-level", "error")
	}
	t1 := time.Now()
	run := start(tb, "run --temporal", bin, "run", "--temporal", hostPort, "--task-queue", queue, "--parallel", strconv.Itoa(c.parallel),
		"--json", "--log-level", "error", graph)
	run.wait(tb, 10*time.Minute, "did not finish")
	res.temporal = time.Since(t1)
	if run.err != nil {
		tb.Fatalf("run --temporal: %v\n%s", run.err, tail(run.out.String()))
	}
	got := jsonOutputs(tb, run.stdout.String())
	if len(got) != c.nodes || len(want) != c.nodes {
		tb.Fatalf("%d nodes on Temporal, %d locally; want %d", len(got), len(want), c.nodes)
	}
	for id, w := range want {
		if got[id] != w || w == "" {
			tb.Fatalf("node %s: Temporal output differs from the local one (%d vs %d bytes)", id, len(got[id]), len(w))
		}
	}
	runID := regexp.MustCompile(`run ([0-9a-f-]{36}) submitted`).FindStringSubmatch(run.out.String())
	if runID == nil {
		tb.Fatalf("no run id in:\n%s", tail(run.out.String()))
	}
	res.executions = executions(tb, runID[1])
	return res
}

// executions measures each workflow execution of the run: its history's
// events and bytes, as Temporal holds them.
func executions(tb testing.TB, runID string) []execution {
	tb.Helper()
	st, err := ntemporal.State(context.Background(), dialDev(tb), runID)
	if err != nil {
		tb.Fatal(err)
	}
	c := dialDev(tb)
	var out []execution
	for _, run := range st.Runs {
		e := execution{run: run}
		it := c.GetWorkflowHistory(context.Background(), runID, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				tb.Fatal(err)
			}
			e.events++
			e.bytes += proto.Size(ev)
		}
		out = append(out, e)
	}
	return out
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// Issue 29: a graph as wide as a local run takes runs on Temporal. Before,
// every activity's input carried the whole graph, and a 1,000-node graph
// never started (each workflow task over the 4 MB gRPC limit, retried
// forever). Each execution's history stays under half of Temporal's limits.
func TestWideGraphsOnTemporal(t *testing.T) {
	for _, c := range []wide{
		{nodes: 10_000, promptBytes: 100, parallel: 1000},
		{nodes: 1_000, promptBytes: 1000, parallel: 1000}, // 1 MB of prompts
	} {
		t.Run(fmt.Sprintf("%d nodes × %d-byte prompts", c.nodes, c.promptBytes), func(t *testing.T) {
			res := runWide(t, c)
			for i, e := range res.executions {
				t.Logf("execution %d/%d %s: %d events, %.1f MB of history", i+1, len(res.executions), e.run, e.events, float64(e.bytes)/(1<<20))
				if e.events > historyEventsLimit/2 || e.bytes > historyBytesLimit/2 {
					t.Errorf("execution %s: %d events, %d bytes: over half of Temporal's limits (%d, %d)", e.run, e.events, e.bytes, historyEventsLimit, historyBytesLimit)
				}
			}
			t.Logf("wall: local %s, Temporal %s (%.2f×); per node %.2f vs %.2f ms", res.local.Round(time.Millisecond), res.temporal.Round(time.Millisecond),
				res.temporal.Seconds()/res.local.Seconds(), res.local.Seconds()*1e3/float64(c.nodes), res.temporal.Seconds()*1e3/float64(c.nodes))
		})
	}
}
