//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Issue 15: a graph "file" that never ends (/dev/zero, a FIFO fed forever)
// is refused with exit 2 as soon as it passes the graph file bound, and a
// FIFO that nobody writes holds the command only until a signal: SIGTERM
// ends it at once. Real processes, real signals.
func TestGraphFilesThatNeverEnd(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	dir := t.TempDir()
	fed := filepath.Join(dir, "fed.yaml")
	idle := filepath.Join(dir, "idle.yaml")
	for _, f := range []string{fed, idle} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, &stderr
	}
	exitOf := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	}
	for _, args := range [][]string{{"validate"}, {"run", "--db", filepath.Join(dir, "j.db")}} {
		name := args[0]
		with := func(path string) []string { return append(append([]string{}, args...), path) }
		// /dev/zero: refused at the bound.
		cmd, stderr := start(with("/dev/zero")...)
		code := exitOf(cmd.Wait())
		if code != exitUsage || !strings.Contains(stderr.String(), "at most 4 MiB") {
			t.Errorf("%s /dev/zero: exit %d\n%s", name, code, stderr)
		}
		// A FIFO fed forever: the same.
		cmd, stderr = start(with(fed)...)
		exited, gone := make(chan int, 1), make(chan struct{})
		go func() { exited <- exitOf(cmd.Wait()); close(gone) }()
		go feed(fed, gone)
		select {
		case code = <-exited:
		case <-time.After(time.Minute):
			t.Fatalf("%s on a FIFO fed forever still reading after a minute", name)
		}
		if code != exitUsage || !strings.Contains(stderr.String(), "at most 4 MiB") {
			t.Errorf("%s on a FIFO fed forever: exit %d\n%s", name, code, stderr)
		}
		// A FIFO nobody writes: SIGTERM ends it at once.
		cmd, stderr = start(with(idle)...)
		waitOpeningFIFO(t, cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		sent := time.Now()
		code = exitOf(cmd.Wait())
		if took := time.Since(sent); code != exitInterrupted || took > 2*time.Second || !strings.Contains(stderr.String(), "nothing was written") {
			t.Errorf("%s on a FIFO nobody writes, SIGTERM: exit %d after %s\n%s", name, code, took, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "j.db")); !os.IsNotExist(err) {
		t.Errorf("a journal was created: %v", err)
	}
}

// waitOpeningFIFO waits until a thread of process pid waits in open(2) for a
// FIFO's writer (Linux's wchan "wait_for_partner"): past its start, and past
// the signal handlers that run installs before anything else. A fixed sleep
// was not enough under make test's load: SIGTERM came before the handler
// and the process died of it (exit -1 after 10 ms). Without /proc (not
// Linux), it gives the process a second.
func waitOpeningFIFO(t *testing.T, pid int) {
	t.Helper()
	task := fmt.Sprintf("/proc/%d/task", pid)
	if _, err := os.Stat(task); err != nil {
		time.Sleep(time.Second)
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		tids, _ := os.ReadDir(task)
		for _, tid := range tids {
			if w, err := os.ReadFile(filepath.Join(task, tid.Name(), "wchan")); err == nil && string(w) == "wait_for_partner" {
				return
			}
		}
	}
	t.Fatalf("process %d never waited in open(2) for a writer of its FIFO within 30s", pid)
}

// feed writes comment lines into the FIFO at path until its reader goes away
// (or never came: done says the process ended).
func feed(path string, done <-chan struct{}) {
	var w *os.File
	for w == nil {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0) // ENXIO until a reader opens it
		if err == nil {
			w = f
			break
		}
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	defer w.Close()
	chunk := bytes.Repeat([]byte("# a comment line that never ends\n"), 1024)
	for {
		if _, err := w.Write(chunk); err != nil && !errors.Is(err, syscall.EAGAIN) {
			return
		}
	}
}

// Issue 42: a flag that cannot mean anything is exit 2 before anything
// runs: a negative duration, or a flag without the one it needs
// (--metrics-linger without --metrics, --pack without --temporal, ...).
func TestFlagsThatCannotMeanAnything(t *testing.T) {
	t.Parallel()
	graph, db := writeGraph(t, "name: t\nproviders:\n  c: {kind: sim, api: chat}\nnodes:\n  - {id: a, provider: c, prompt: hi}\n")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"run", graph, "--db", db, "--metrics", "127.0.0.1:0", "--metrics-linger", "-5s"}, "--metrics-linger -5s: give a duration of 0 or more"},
		{[]string{"run", graph, "--db", db, "--metrics-linger", "5s"}, "give --metrics ADDR too"},
		{[]string{"resume", "last", "--db", db, "--metrics-linger", "5s"}, "give --metrics ADDR too"},
		// flags that mean something only with another one
		{[]string{"run", graph, "--db", db, "--heartbeat-timeout", "30s"}, "--heartbeat-timeout is for a run on Temporal's workers: give --temporal too"},
		{[]string{"run", graph, "--db", db, "--pack", "4"}, "--pack is for a run on Temporal's workers: give --temporal too"},
		{[]string{"run", graph, "--db", db, "--task-queue", "q"}, "--task-queue is for a Temporal frontend: give --temporal too"},
		{[]string{"run", graph, "--db", db, "--token-env", "T"}, "--token-env is for the run's page (--serve): give --serve too"},
		{[]string{"run", graph, "--db", db, "--temporal", "127.0.0.1:1", "--heartbeat-timeout", "-3s"}, "--heartbeat-timeout -3s: give a duration above 0"},
		{[]string{"serve", "--db", db, "--namespace", "prod"}, "--namespace is for a Temporal frontend: give --temporal too"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%v: exit %d, %q; want 2 saying %q", c.args, code, errs, c.says)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused run created the journal")
	}
}

// Issue 42: a server that streams valid deltas without end (never a
// finish_reason) ends the node at its answer's bound, 32 MiB by default,
// within the profile's deadline: NR501, exit 1, the journal under the bound
// plus overhead, and memory bounded. A real process against a real socket.
//
// Memory: a peak RSS of at most 256 MiB. Without the bound the process
// passed 1 GiB in 7 s and kept growing; with it, but with the answer in a
// doubling builder and the closing account reading every chunk's text and
// rebuilding the answer in another, it peaked at 204-258 MiB alone and 670
// MiB under make test's load. Now the answer grows by blocks (runner's
// answer), the account reads chunks without their text (EventFilter.NoText)
// and the closing summary reads no chunk's text at all: ~96 MiB, also under load.
func TestEndlessAnswerIsBounded(t *testing.T) {
	t.Parallel()
	piece := strings.Repeat("y", 1000)
	deltas := bytes.Repeat(fmt.Appendf(nil, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}\n\n", piece), 64)
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			n, err := w.Write(deltas)
			served.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	graph := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(graph, fmt.Appendf(nil, "name: endless\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s/v1, api_key_env: NR_TEST_KEY, model: m}\n"+
		"nodes:\n  - {id: a, prompt: hi}\n", srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "j.db")
	cmd := exec.Command(noderunBinary(t), "run", "--db", db, graph)
	cmd.Env = append(os.Environ(), "NR_TEST_KEY=sk-test")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	took := time.Since(start)
	rss := peak()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(out.String(), "NR501") || !strings.Contains(out.String(), "max_output_bytes") {
		t.Fatalf("%v after %s\n%s", err, took, out.String())
	}
	size := int64(0)
	for _, f := range []string{db, db + "-wal"} {
		if st, err := os.Stat(f); err == nil {
			size += st.Size()
		}
	}
	t.Logf("served %d MiB; ended in %s, peak RSS %d MiB, journal %d MiB", served.Load()>>20, took.Round(time.Millisecond), rss>>20, size>>20)
	if rss > 256<<20 {
		t.Errorf("peak RSS %d MiB, want at most 256 MiB", rss>>20)
	}
	if size > 80<<20 {
		t.Errorf("the journal is %d MiB, want at most the 32 MiB bound and overhead", size>>20)
	}
	if took > time.Minute { // it ends at the bound (NR501, above), not by a clock: this only says it ended
		t.Errorf("it took %s to end", took)
	}
}

// watchPeakRSS samples process pid's peak resident set (VmHWM, the
// high-water mark of its own memory since it was exec'd) every 2 ms until
// the returned function is called, which gives the highest seen, in bytes.
// Not the rusage of its exit: Go starts a child with vfork, and Linux counts
// the parent's high-water mark into the child's ru_maxrss at exec, so a test
// binary of 500 MiB (the race detector, under make test) reported that for a
// child that never passed 100.
func watchPeakRSS(pid int) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for l := range strings.Lines(string(b)) {
					if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
						if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb<<10 > peak.Load() {
							peak.Store(kb << 10)
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
