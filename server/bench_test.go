package server_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sse"
)

// BenchmarkServeWatchers: 200 watchers follow a running 1,000-node graph
// through `noderun serve` (a process of its own, as in use), each reading
// every event of the run from its start until end; the same run without a
// server or watchers is its baseline. One iteration is a pair of runs, in
// alternating order. Reported: wall-ratio (watched run's wall / unwatched,
// median of the pairs; target <= 1.05), p99-commit-delay-ms (from an
// event's commit to a watcher reading it, over every live event of the
// timing watchers; target <= 100: the commit is seen by a prober that asks
// the journal for the run's last seq every millisecond), p99-delay-ms (from
// the event's journal time, stamped when its chunk arrived, before the
// runner's coalescing and group commit: an upper bound), server-cpu-s (the
// serve process's CPU time over the run), server-rss-MiB (the serve
// process's peak RSS; target <= 256), dropped (watchers whose stream closed
// before end: they would come back by Last-Event-ID) and events/watcher.
//
// The graph streams at the pace of long reasoning calls: 1,000 nodes of 100
// tokens at 50 tokens/s, 50 at once (2,500 events a second for the run,
// half a million a second for the watchers together). Ten watchers parse
// and time every event; the others read every byte to the end without
// parsing it (200 parsing clients on these 2 cores would measure
// themselves, not the server).
func BenchmarkServeWatchers(b *testing.B) {
	const nodes, parallel, watchers = 1000, 50, 200
	bin := cli.Path(b)
	dir := b.TempDir()
	var g strings.Builder
	g.WriteString("name: wide\nprofile: default\ncache: false\nproviders:\n  chat: {kind: sim, api: chat, sim: {tokens: 100, tokens_per_second: 50}}\nnodes:\n")
	for i := range nodes {
		fmt.Fprintf(&g, "  - {id: n%04d, provider: chat, prompt: \"node %d\"}\n", i, i)
	}
	graph := filepath.Join(dir, "wide.yaml")
	if err := os.WriteFile(graph, []byte(g.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	var ratios []float64
	var delays, commitDelays []time.Duration
	var rss, cpu []float64
	var dropped, perWatcher int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var watched, alone time.Duration
		runOnce := func(watch bool) {
			db := filepath.Join(b.TempDir(), "j.db")
			if !watch {
				alone = runWide(b, bin, db, graph, parallel)
				return
			}
			res := watchWide(b, bin, db, graph, parallel, watchers)
			watched = res.wall
			delays = append(delays, res.delays...)
			commitDelays = append(commitDelays, res.commitDelays...)
			rss = append(rss, res.rssMiB)
			cpu = append(cpu, res.cpuSeconds)
			dropped += res.dropped
			perWatcher = res.events
		}
		first := i%2 == 0
		runOnce(first)
		runOnce(!first)
		ratios = append(ratios, watched.Seconds()/alone.Seconds())
		b.Logf("pair %d: watched %s, alone %s", i, watched.Round(time.Millisecond), alone.Round(time.Millisecond))
	}
	b.StopTimer()
	slices.Sort(ratios)
	slices.Sort(delays)
	slices.Sort(commitDelays)
	slices.Sort(rss)
	slices.Sort(cpu)
	b.ReportMetric(ratios[len(ratios)/2], "wall-ratio")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	if len(delays) > 0 {
		b.ReportMetric(ms(delays[len(delays)*99/100]), "p99-delay-ms")
		b.ReportMetric(ms(delays[len(delays)/2]), "p50-delay-ms")
	}
	if len(commitDelays) > 0 {
		b.ReportMetric(ms(commitDelays[len(commitDelays)*99/100]), "p99-commit-delay-ms")
		b.ReportMetric(ms(commitDelays[len(commitDelays)/2]), "p50-commit-delay-ms")
	}
	b.ReportMetric(cpu[len(cpu)/2], "server-cpu-s")
	b.ReportMetric(rss[len(rss)-1], "server-rss-MiB")
	b.ReportMetric(float64(dropped), "dropped")
	b.ReportMetric(float64(perWatcher), "events/watcher")
}

// runWide runs the graph alone and returns its wall time.
func runWide(b *testing.B, bin, db, graph string, parallel int) time.Duration {
	b.Helper()
	cmd := exec.Command(bin, "run", "--db", db, "--parallel", strconv.Itoa(parallel), graph)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("run: %v\n%s", err, tail(out.String()))
	}
	return time.Since(start)
}

type watchedRun struct {
	wall            time.Duration
	delays          []time.Duration
	commitDelays    []time.Duration // from the prober's sight of the commit
	rssMiB          float64
	cpuSeconds      float64
	dropped, events int64
	seen            []seqSeen
}

// seqSeen is an event (its seq) seen at a time: by a watcher, or
// committed, by the prober.
type seqSeen struct {
	seq   int64
	at    time.Time
	since time.Time // a watcher's: when it connected
}

// watchWide runs the graph while `noderun serve` serves its journal to
// watchers that follow it from its start.
func watchWide(b *testing.B, bin, db, graph string, parallel, watchers int) watchedRun {
	b.Helper()
	srv := exec.Command(bin, "serve", "--db", db, "--addr", "127.0.0.1:0")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var srvErr testkit.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	defer func() { testkit.Terminate(srv, exited, 10*time.Second) }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("serve: %v\n%s", err, srvErr.String())
	}
	go func() { _ = srv.Wait(); close(exited) }()
	base := strings.TrimSpace(line)

	cmd := exec.Command(bin, "run", "--db", db, "--parallel", strconv.Itoa(parallel), graph)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runID string
	for runID == "" {
		resp, err := http.Get(base + "api/runs")
		if err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if i := strings.Index(body.String(), `"run_id": "`); i >= 0 {
				runID = body.String()[i+11 : i+11+36]
			}
		}
		if runID == "" {
			time.Sleep(10 * time.Millisecond)
		}
	}
	commits := proveCommits(b, db, runID)
	var mu sync.Mutex
	res := watchedRun{}
	var dropped atomic.Int64
	var wg sync.WaitGroup
	// Every watcher reads every event; the first measured ones also time
	// each (parsing is the client's cost, not the server's: 200 parsing
	// clients on the run's 2 cores would measure themselves).
	const measured = 10
	for w := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			since := time.Now()
			resp, err := http.Get(base + "api/runs/" + runID + "/events")
			if err != nil {
				dropped.Add(1)
				return
			}
			defer resp.Body.Close()
			if w >= measured {
				if !readsToEnd(resp.Body) {
					dropped.Add(1)
				}
				return
			}
			r := sse.NewReader(resp.Body)
			var mine []time.Duration
			var seen []seqSeen
			n := int64(0)
			for {
				typ, data, err := r.NextRaw()
				if err != nil {
					if dropped.Add(1) == 1 {
						b.Logf("a watcher's stream ended without end after %d events: %v", n, err)
					}
					break
				}
				now := time.Now()
				if typ == "end" {
					break
				}
				n++
				if i := bytes.Index(data, []byte(`"seq":`)); i >= 0 {
					j := i + 6
					for j < len(data) && data[j] >= '0' && data[j] <= '9' {
						j++
					}
					if seq, err := strconv.ParseInt(string(data[i+6:j]), 10, 64); err == nil {
						seen = append(seen, seqSeen{seq, now, since})
					}
				}
				// The event's time, without decoding the whole object.
				if i := bytes.Index(data, []byte(`"time":"`)); i >= 0 {
					if j := bytes.IndexByte(data[i+8:], '"'); j > 0 {
						if t, err := time.Parse(time.RFC3339Nano, string(data[i+8:i+8+j])); err == nil && t.After(since) {
							mine = append(mine, now.Sub(t))
						}
					}
				}
			}
			mu.Lock()
			res.seen = append(res.seen, seen...)
			res.delays = append(res.delays, mine...)
			res.events = n
			mu.Unlock()
		}()
	}
	if err := <-done; err != nil {
		b.Fatalf("run: %v\n%s", err, tail(out.String()))
	}
	res.wall = time.Since(start)
	wg.Wait()
	committed := commits()
	var windows [][]time.Duration
	for _, w := range res.seen {
		// the first probe that saw a last seq at or past it
		i, _ := slices.BinarySearchFunc(committed, w.seq, func(c seqSeen, seq int64) int { return cmp.Compare(c.seq, seq) })
		if i < len(committed) && committed[i].at.After(w.since) { // live, not replayed
			d := max(0, w.at.Sub(committed[i].at))
			res.commitDelays = append(res.commitDelays, d)
			k := int(committed[i].at.Sub(start) / (5 * time.Second))
			for len(windows) <= k {
				windows = append(windows, nil)
			}
			windows[k] = append(windows[k], d)
		}
	}
	for k, ds := range windows { // where in the run the tail is
		if len(ds) > 0 {
			slices.Sort(ds)
			b.Logf("commits %2d-%2d s into the run: %6d live events, p50 %s, p99 %s, max %s", 5*k, 5*k+5, len(ds),
				ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)*99/100].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
		}
	}
	res.seen = nil
	res.cpuSeconds = cpuSeconds(b, srv.Process.Pid)
	res.dropped = dropped.Load()
	res.rssMiB = peakRSS(b, srv.Process.Pid)
	if res.dropped > 0 {
		b.Logf("serve's log: %s", tail(srvErr.String()))
	}
	return res
}

// proveCommits asks the journal for the run's last seq every millisecond
// until the returned function is called, which returns what it saw: each
// new last seq with when it was first seen, in order. An event was
// committed at most a millisecond (and one query) before the first probe
// that saw a last seq at or past its own.
func proveCommits(b *testing.B, db, runID string) func() []seqSeen {
	j, err := journal.OpenReadOnly(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []seqSeen)
	go func() {
		defer j.Close()
		var out []seqSeen
		var last int64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- out
				return
			case <-t.C:
			}
			seq, err := j.LastSeq(ctx, runID, "")
			if err == nil && seq > last {
				last = seq
				out = append(out, seqSeen{seq: seq, at: time.Now()})
			}
		}
	}()
	return func() []seqSeen { cancel(); return <-done }
}

// cpuSeconds is the user and system CPU time process pid has used.
func cpuSeconds(b *testing.B, pid int) float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// the fields after the command's name, which ends at the last ')'
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks (USER_HZ: 100 on Linux)
}

// readsToEnd reads a stream to its end, without parsing it, and reports
// whether it closed with the end event.
func readsToEnd(r io.Reader) bool {
	buf := make([]byte, 64<<10)
	var tail []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			tail = append(tail, buf[:n]...)
			tail = append(tail[:0], tail[max(0, len(tail)-4096):]...) // the end event is whole in it
		}
		if err != nil {
			return bytes.Contains(tail, []byte("event: end\n"))
		}
	}
}

// peakRSS is a process's peak resident set (VmHWM), in MiB.
func peakRSS(b *testing.B, pid int) float64 {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
