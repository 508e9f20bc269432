package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/runner"
)

// On a terminal, a slow reasoning node's line is redrawn in place: its bytes
// grow, and while it is silent a counter advances. tmux is the terminal; its
// capture-pane is the screen as a person sees it.
func TestLiveViewUpdatesInPlace(t *testing.T) {
	// Two bursts of 20 tokens, each after 2 s of reasoning silence.
	screenOf := liveRun(t, "warn", `name: slow
providers:
  think:
    kind: sim
    sim: {seed: 3, tokens: 40, tokens_per_second: 40, burst_tokens: 20, silence: 2s}
nodes:
  - {id: ponder, provider: think, prompt: think hard}
`)

	byteRE := regexp.MustCompile(`ponder\s+streaming\s+(\d+) B`)
	silentRE := regexp.MustCompile(`silent (\d+\.\d)s`)
	var sizes, silences []float64
	lineCounts := map[int]int{}
	deadline := time.Now().Add(30 * time.Second)
	done := false
	for !done && time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		screen := screenOf()
		if strings.Contains(screen, "done (") {
			done = true
			break
		}
		var lines []string
		for _, l := range strings.Split(screen, "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		m := byteRE.FindAllStringSubmatch(screen, -1)
		if len(m) == 0 {
			continue // not started yet
		}
		if len(m) != 1 {
			t.Fatalf("the node's line appears %d times: not updated in place\n%s", len(m), screen)
		}
		lineCounts[len(lines)]++
		n, _ := strconv.Atoi(m[0][1])
		sizes = append(sizes, float64(n))
		if s := silentRE.FindStringSubmatch(screen); s != nil {
			v, _ := strconv.ParseFloat(s[1], 64)
			silences = append(silences, v)
		} else {
			silences = append(silences, -1)
		}
	}
	if !done {
		t.Fatalf("the run did not finish on screen; bytes seen %v", sizes)
	}
	t.Logf("bytes %v\nsilent %v\nline counts %v", sizes, silences, lineCounts)
	if len(lineCounts) != 1 {
		t.Errorf("the screen's line count changed while the node ran (%v): lines are added, not redrawn", lineCounts)
	}
	grew := 0
	for i := 1; i < len(sizes); i++ {
		if sizes[i] < sizes[i-1] {
			t.Errorf("bytes went down: %v", sizes)
		}
		if sizes[i] > sizes[i-1] {
			grew++
		}
	}
	if grew == 0 || sizes[len(sizes)-1] == 0 {
		t.Errorf("bytes never grew: %v", sizes)
	}
	advanced := false
	for i := 1; i < len(silences); i++ {
		if silences[i-1] >= 1 && silences[i] > silences[i-1] {
			advanced = true
		}
	}
	if !advanced {
		t.Errorf("the silence counter never advanced: %v", silences)
	}
}

// liveRun runs `noderun run` on the graph src in a tmux terminal of 150x20,
// diagnostics at logLevel, and returns what the screen shows at a call.
func liveRun(t *testing.T, logLevel, src string) func() string {
	t.Helper()
	capture, _ := liveRunSized(t, 150, 20, logLevel, src)
	return func() string { return capture() }
}

// liveRunSized is liveRun in a terminal of cols x rows; a call captures the
// pane with capture-pane's extra args (-S - for the history, -J to join
// the lines the terminal wrapped); keys types into it (tmux send-keys).
func liveRunSized(t *testing.T, cols, rows int, logLevel, src string) (capture func(args ...string) string, keys func(...string)) {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is needed (apt-get install tmux; make tools installs it)")
	}
	bin := noderunBinary(t)
	dir := t.TempDir()
	graph := filepath.Join(dir, "graph.yaml")
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := fmt.Sprintf("noderun-test-%d-%s", os.Getpid(), t.Name())
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	shell := fmt.Sprintf("cd %s && %s run --db j.db --log-level %s %s; sleep 5", dir, bin, logLevel, graph)
	if out, err := tm("new-session", "-d", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), "-s", "live", shell); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })
	capture = func(args ...string) string {
		screen, err := tm(append([]string{"capture-pane", "-p", "-t", "live"}, args...)...)
		if err != nil {
			t.Fatalf("capture-pane: %v\n%s", err, screen)
		}
		return screen
	}
	keys = func(k ...string) {
		if out, err := tm(append([]string{"send-keys", "-t", "live"}, k...)...); err != nil {
			t.Fatalf("send-keys: %v\n%s", err, out)
		}
	}
	return capture, keys
}

// A node's line stays through every recovery step, a continue included: the
// step shows on it while under way, and the line goes only when the node
// ends, with one line above that says how. (The view once took any state it
// did not know, "continuing from byte …" among them, for the node's end: it
// printed the step as the node's outcome, dropped the line, and drew a new
// one, "resuming", when the continuation's data came.)
func TestLiveViewKeepsLineThroughContinue(t *testing.T) {
	// The first stream closes after 15 events; the continuation starts after
	// 1.5 s of silence, long enough to see the step on the node's line.
	screenOf := liveRun(t, "error", `name: cont
providers:
  chat:
    kind: sim
    api: chat
    continuation: prefix
    sim:
      seed: 5
      tokens: 60
      tokens_per_second: 30
      burst_tokens: 30
      silence: 1500ms
      faults:
        - {endpoint: chat, requests: [1], kind: close, after_events: 15}
nodes:
  - {id: write, provider: chat, prompt: write it}
`)
	liveRE := regexp.MustCompile(`(?m)^  write\s+(\S+)\s+(\d+) B.*$`)
	endRE := regexp.MustCompile(`(?m)^write\s+(.*) · at \d+\.\ds$`)
	var states []string
	stepShown, ended := false, false
	var screen string
	deadline := time.Now().Add(30 * time.Second)
	for !ended && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		screen = screenOf()
		for _, m := range endRE.FindAllStringSubmatch(screen, -1) {
			if !strings.HasPrefix(m[1], "done (") {
				t.Fatalf("the node's line ended with %q, before the node did\n%s", m[1], screen)
			}
			ended = true
		}
		lines := liveRE.FindAllStringSubmatch(screen, -1)
		if ended || len(lines) == 0 {
			continue
		}
		if len(lines) != 1 {
			t.Fatalf("the node has %d live lines\n%s", len(lines), screen)
		}
		if st := lines[0][1]; len(states) == 0 || states[len(states)-1] != st {
			states = append(states, st)
		}
		if strings.Contains(lines[0][0], "| continuing from byte") {
			stepShown = true
		}
	}
	if !ended {
		t.Fatalf("the node did not end on screen\n%s", screen)
	}
	if n := len(endRE.FindAllString(screen, -1)); n != 1 {
		t.Errorf("%d end lines for the node, want 1\n%s", n, screen)
	}
	if !slices.Equal(states, []string{"streaming"}) {
		t.Errorf("the node's line went through states %v, want streaming throughout", states)
	}
	if !stepShown {
		t.Errorf("the continue never showed on the node's line")
	}
}

// The view keeps a node's line through each kind of recovery step, shows
// the step on it until data comes again, and drops it only on a final state,
// with one line above that says how the node ended.
func TestLiveViewKeepsNodeThroughRecovery(t *testing.T) {
	t.Parallel()
	steps := []runner.Progress{
		{State: runner.ProgressRecovering, Text: "reconnecting 1/8 in 5ms (transport_disconnect)",
			Step: runner.RecoveryStep{Code: diagnostics.ReconnectScheduled, Class: diagnostics.ClassDisconnect, Delay: 5 * time.Millisecond, N: 1, Of: 8}},
		{State: runner.ProgressRecovering, Text: "continuing from byte 91, 1/8 in 907ms (transport_disconnect)",
			Step: runner.RecoveryStep{Code: diagnostics.ContinueScheduled, Class: diagnostics.ClassDisconnect, Delay: 907 * time.Millisecond, N: 1, Of: 8}},
		{State: runner.ProgressRecovering, Text: "retrying 1/3 in 20ms (server_error)",
			Step: runner.RecoveryStep{Code: diagnostics.RetryStarted, Class: diagnostics.ClassServer, Delay: 20 * time.Millisecond, N: 1, Of: 3}},
		{State: runner.ProgressRecovering, Text: "worker w1 gone; resumed on w2 (activity attempt 2)",
			Step: runner.RecoveryStep{Code: diagnostics.CrossWorkerResume}},
	}
	for _, final := range []runner.ProgressState{runner.ProgressDone, runner.ProgressFailed, runner.ProgressSkipped, runner.ProgressInterrupted, runner.ProgressAttention} {
		t.Run(final.String(), func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "screen"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			v := newLiveView(f)
			defer v.stop()
			t0 := time.Now()
			at := t0
			tick := func() time.Time { at = at.Add(time.Second); return at }
			v.now = func() time.Time { return at }
			line := func() (string, bool) {
				v.mu.Lock()
				defer v.mu.Unlock()
				n, ok := v.nodes["write"]
				if !ok || n.gone {
					return "", false
				}
				return v.line("write", n), true
			}
			v.report(runner.Progress{Node: "write", State: runner.ProgressStreaming, Text: "streaming", Attempt: 1})
			bytes := 0
			for _, s := range steps {
				bytes += 100
				last := tick()
				v.report(runner.Progress{Node: "write", State: runner.ProgressData, Attempt: 1, Bytes: bytes, Tokens: bytes / 4, LastData: last})
				v.report(runner.Progress{Node: "write", State: runner.ProgressDiagnostic, Code: diagnostics.DisconnectDetected, Text: "disconnect detected",
					Attempt: 1, Bytes: bytes, Tokens: bytes / 4, LastData: last})
				tick()
				// every report carries the node's figures
				s.Node, s.Attempt, s.Bytes, s.Tokens, s.LastData = "write", 1, bytes, bytes/4, last
				v.report(s)
				got, ok := line()
				if !ok {
					t.Fatalf("the node's line went at %q", s.Text)
				}
				if !strings.Contains(got, "| "+s.Text) || !strings.Contains(got, fmt.Sprintf("%d B", bytes)) {
					t.Errorf("during %q the line says %q", s.Text, got)
				}
				v.report(runner.Progress{Node: "write", State: runner.ProgressData, Attempt: 1, Bytes: bytes + 1, Tokens: bytes/4 + 1, LastData: tick()})
				if got, ok := line(); !ok || strings.Contains(got, "|") {
					t.Errorf("once data came again after %q, the line says %q (there: %v)", s.Text, got, ok)
				}
			}
			v.report(runner.Progress{Node: "write", State: final, Text: final.String() + " (the outcome)"})
			if got, ok := line(); ok {
				t.Errorf("after %s the line stays: %q", final, got)
			}
			v.stop()
			screen, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			ends := regexp.MustCompile(`(?m)^\r?write\s+([^\n·]*)·.* at \d+\.\ds$`).FindAllStringSubmatch(string(screen), -1)
			if len(ends) != 1 || strings.TrimSpace(ends[0][1]) != final.String()+" (the outcome)" {
				t.Errorf("the lines above say %q, want one for %s", ends, final)
			}
		})
	}
}

// What a running node's line says, for each situation it can be in.
func TestLiveLine(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cases := []struct {
		name string
		now  float64
		n    liveNode
		want []string
		not  []string
	}{
		{"streaming", 2, liveNode{state: "streaming", started: at(0), lastData: at(1.9), bytes: 2048, tokens: 400},
			[]string{"streaming", "2.0 KiB", "400 tok", "200 tok/s", "2.0s"}, []string{"silent"}},
		{"silent, polled", 50, liveNode{state: "streaming", started: at(0), lastData: at(8), lastPoll: at(47), bytes: 10, tokens: 2},
			[]string{"silent 42.0s, polled in_progress 3s ago"}, nil},
		{"never any data", 5, liveNode{state: "streaming", started: at(0)},
			[]string{"0 B", "- tok/s", "silent 5.0s"}, []string{"polled"}},
		{"recovering", 10, liveNode{state: "streaming", started: at(0), lastData: at(6), step: "reconnecting 2/8 in 1.2s (transport_disconnect)", stepAt: at(7)},
			[]string{"| reconnecting 2/8 in 1.2s (transport_disconnect)", "silent 4.0s"}, nil},
		{"recovered", 10, liveNode{state: "streaming", started: at(0), lastData: at(9.5), step: "retrying 1/3 in 5ms", stepAt: at(7)},
			nil, []string{"retrying", "silent"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &liveView{now: func() time.Time { return at(c.now) }, width: func() int { return 150 }}
			got := v.line("node", &c.n)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(got, w) {
					t.Errorf("%q has %q", got, w)
				}
			}
		})
	}
}

// A node whose request the quota does not allow yet says so on its line:
// `waiting for quota (resets in …)`, until it sends.
func TestLiveViewShowsWaitingForQuota(t *testing.T) {
	// One request per 3 s: the second node waits for the first's to replenish.
	screenOf := liveRun(t, "warn", `name: paced
providers:
  chat:
    kind: sim
    sim:
      seed: 5
      tokens: 20
      limits: {requests_per_minute: 1, window: 3s}
nodes:
  - {id: first, provider: chat, prompt: one}
  - {id: second, provider: chat, prompt: two}
`)
	waitRE := regexp.MustCompile(`(?m)^\s*(first|second)\s+waiting\s.*\| waiting for quota \(resets in \d+(\.\d)?s\)`)
	shown, ended := false, false
	var screen string
	deadline := time.Now().Add(30 * time.Second)
	for !ended && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		screen = screenOf()
		shown = shown || waitRE.MatchString(screen)
		ended = strings.Count(screen, "done (") == 2
	}
	if !ended {
		t.Fatalf("the run did not end:\n%s", screen)
	}
	if !shown {
		t.Errorf("no line said the node waits for quota:\n%s", screen)
	}
}
