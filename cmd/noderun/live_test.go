package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On a terminal, a slow reasoning node's line is redrawn in place: its bytes
// grow, and while it is silent a counter advances. tmux is the terminal; its
// capture-pane is the screen as a person sees it.
func TestLiveViewUpdatesInPlace(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is needed (apt-get install tmux; make tools installs it)")
	}
	bin := noderunBinary(t)
	dir := t.TempDir()
	graph := filepath.Join(dir, "slow.yaml")
	// Two bursts of 20 tokens, each after 2 s of reasoning silence.
	src := `name: slow
providers:
  think:
    kind: sim
    sim: {seed: 3, tokens: 40, tokens_per_second: 40, burst_tokens: 20, silence: 2s}
nodes:
  - {id: ponder, provider: think, prompt: think hard}
`
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := fmt.Sprintf("noderun-test-%d", os.Getpid())
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	shell := fmt.Sprintf("cd %s && %s run --db j.db --log-level warn %s; sleep 5", dir, bin, graph)
	if out, err := tm("new-session", "-d", "-x", "150", "-y", "20", "-s", "live", shell); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })

	byteRE := regexp.MustCompile(`ponder\s+streaming\s+(\d+) B`)
	silentRE := regexp.MustCompile(`silent (\d+\.\d)s`)
	var sizes, silences []float64
	lineCounts := map[int]int{}
	deadline := time.Now().Add(30 * time.Second)
	done := false
	for !done && time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		screen, err := tm("capture-pane", "-p", "-t", "live")
		if err != nil {
			t.Fatalf("capture-pane: %v\n%s", err, screen)
		}
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

// What a running node's line says, for each situation it can be in.
func TestLiveLine(t *testing.T) {
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
			v := &liveView{now: func() time.Time { return at(c.now) }}
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
