// Package trickle measures noderun at the pace real streams trickle (issue
// 45): whole processes, `noderun run` against a bare standard-library client
// (./bareclient) reading the same streams from the same `noderun sim serve`,
// one token per SSE event at 50 tokens a second.
package trickle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/benchstat"
	"github.com/noderun/noderun/internal/testkit"
)

var cli testkit.CLI

func TestMain(m *testing.M) {
	code := m.Run()
	cli.Remove()
	os.Exit(code)
}

const (
	trickleTokens = 200 // a node's answer
	tricklePace   = 50  // tokens a second: a 4 s floor
)

// proc is a finished process's cost.
type proc struct {
	wall, cpu time.Duration
	rssKiB    int64
	stdout    []byte
}

func runProc(tb testing.TB, name string, args ...string) proc {
	tb.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(stderr.String()))
	}
	ps := cmd.ProcessState
	ru, _ := ps.SysUsage().(*syscall.Rusage)
	p := proc{wall: time.Since(began), cpu: ps.UserTime() + ps.SystemTime(), stdout: stdout.Bytes()}
	if ru != nil {
		p.rssKiB = ru.Maxrss // KiB on Linux
	}
	return p
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// simServe starts `noderun sim serve` paced at tricklePace and returns its
// base URL; it is stopped when tb ends. apart starts it in a session of its
// own, as a simulator started on its own is (another terminal, a CI
// service): with the kernel's autogroup scheduling (Linux's default for
// desktops and many servers) a session is a group that the CPU is shared
// between, so the simulator and the client no longer share it thread by
// thread, and a client that wakes often pays for each wake-up (see
// conns.WaitTick).
func simServe(tb testing.TB, bin string, apart bool) string {
	tb.Helper()
	dir := tb.TempDir()
	conf := filepath.Join(dir, "sim.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "seed: 45\ntokens: %d\ntokens_per_second: %d\n", trickleTokens, tricklePace), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "sim", "serve", "--faults", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: apart}
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() { testkit.Terminate(cmd, exited, 5*time.Second) })
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/v1`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if u := re.FindString(out.String()); u != "" {
			return u
		}
		select {
		case <-exited:
			tb.Fatalf("noderun sim serve exited: %s", out.String())
		default:
		}
	}
	tb.Fatalf("noderun sim serve printed no URL: %s", out.String())
	return ""
}

func buildBare(tb testing.TB) string {
	tb.Helper()
	testkit.SkipInShort(tb, "links the bare client")
	p := filepath.Join(tb.TempDir(), "bareclient")
	if out, err := exec.Command("go", "build", "-o", p, "github.com/noderun/noderun/internal/trickle/bareclient").CombinedOutput(); err != nil {
		tb.Fatalf("build bareclient: %v\n%s", err, out)
	}
	return p
}

func graph(tb testing.TB, dir, base string, n int) string {
	tb.Helper()
	var y strings.Builder
	fmt.Fprintf(&y, "name: trickle\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n", base)
	for i := range n {
		fmt.Fprintf(&y, "  - {id: n%05d, prompt: fan out}\n", i)
	}
	f := filepath.Join(dir, "trickle.yaml")
	if err := os.WriteFile(f, []byte(y.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return f
}

// BenchmarkTrickle runs N chat nodes of 200 tokens at 50 tokens a second (a
// 4 s floor), one token per SSE event, as `noderun run --parallel N` (every
// chunk journaled) and as the bare client, whole processes alternating
// (b.N pairs, the order swapped each pair), against one simulator. It
// reports the medians of the pairs' ratios (noderun / bare: `cpu-ratio`,
// `wall-ratio`, `rss-ratio`), each side's median wall, CPU and peak RSS, and
// checks both sides read every byte (the bare client's count and noderun's
// outputs).
func BenchmarkTrickle(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchTrickle(b, n, false) })
	}
	// The simulator in a session of its own (simServe): 1,000 nodes.
	b.Run("sim-apart/nodes=1000", func(b *testing.B) { benchTrickle(b, 1000, true) })
}

func benchTrickle(b *testing.B, n int, apart bool) {
	bin := cli.Path(b)
	bare := buildBare(b)
	base := simServe(b, bin, apart)
	dir := b.TempDir()
	g := graph(b, dir, base, n)
	var cpuR, wallR, rssR []float64
	var nr, br []proc
	runBare := func() proc {
		p := runProc(b, bare, "--base-url", base, "--n", fmt.Sprint(n))
		var streams, bytes, failed int64
		if _, err := fmt.Sscanf(string(p.stdout), "streams %d bytes %d failed %d", &streams, &bytes, &failed); err != nil || failed != 0 || streams != int64(n) {
			b.Fatalf("bareclient: %q", p.stdout)
		}
		p.stdout = fmt.Append(nil, bytes)
		return p
	}
	runNoderun := func(i int) proc {
		db := filepath.Join(dir, fmt.Sprintf("run%d.db", i))
		p := runProc(b, bin, "run", "--db", db, "--parallel", fmt.Sprint(n), "--no-cache", "--json", "--log-level", "error", g)
		var res struct {
			Status string `json:"status"`
			Nodes  []struct {
				Output string `json:"output"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(p.stdout, &res); err != nil || res.Status != "completed" || len(res.Nodes) != n {
			b.Fatalf("noderun run: status %q, %d nodes, %v", res.Status, len(res.Nodes), err)
		}
		var total int
		for _, nd := range res.Nodes {
			total += len(nd.Output)
		}
		p.stdout = fmt.Append(nil, total)
		_ = os.Remove(db)
		_ = os.Remove(db + "-wal")
		_ = os.Remove(db + "-shm")
		return p
	}
	b.ResetTimer()
	for i := range b.N {
		var x, y proc
		if i%2 == 0 {
			y = runBare()
			x = runNoderun(i)
		} else {
			x = runNoderun(i)
			y = runBare()
		}
		if !bytes.Equal(x.stdout, y.stdout) {
			b.Fatalf("noderun's outputs hold %s bytes, the bare client read %s", x.stdout, y.stdout)
		}
		nr, br = append(nr, x), append(br, y)
		cpuR = append(cpuR, x.cpu.Seconds()/y.cpu.Seconds())
		wallR = append(wallR, x.wall.Seconds()/y.wall.Seconds())
		rssR = append(rssR, float64(x.rssKiB)/float64(y.rssKiB))
		b.Logf("pair %d: noderun wall %s cpu %s rss %d MiB; bare wall %s cpu %s rss %d MiB", i+1,
			x.wall.Round(time.Millisecond), x.cpu.Round(time.Millisecond), x.rssKiB>>10, y.wall.Round(time.Millisecond), y.cpu.Round(time.Millisecond), y.rssKiB>>10)
	}
	b.StopTimer()
	b.ReportMetric(benchstat.Median(cpuR), "cpu-ratio")
	b.ReportMetric(benchstat.Median(wallR), "wall-ratio")
	b.ReportMetric(benchstat.Median(rssR), "rss-ratio")
	pick := func(ps []proc, f func(proc) float64) float64 {
		v := make([]float64, len(ps))
		for i, p := range ps {
			v[i] = f(p)
		}
		return benchstat.Median(v)
	}
	b.ReportMetric(pick(nr, func(p proc) float64 { return p.wall.Seconds() }), "wall-s")
	b.ReportMetric(pick(br, func(p proc) float64 { return p.wall.Seconds() }), "bare-wall-s")
	b.ReportMetric(pick(nr, func(p proc) float64 { return p.cpu.Seconds() }), "cpu-s")
	b.ReportMetric(pick(br, func(p proc) float64 { return p.cpu.Seconds() }), "bare-cpu-s")
	b.ReportMetric(pick(nr, func(p proc) float64 { return float64(p.rssKiB) / 1024 }), "peak-rss-MiB")
	b.ReportMetric(pick(br, func(p proc) float64 { return float64(p.rssKiB) / 1024 }), "bare-peak-rss-MiB")
	b.ReportMetric(0, "ns/op")
}
