package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/noderun/noderun/internal/humanlog"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// liveView is the run's progress on a terminal: one line per running node,
// redrawn in place (vbauerster/mpb does the terminal work) with its state,
// bytes and tokens so far, tokens/s, elapsed time, how long it has been
// silent and when a status poll last found it alive, and the recovery step
// under way with its budget. Finished nodes and diagnostics scroll above.
type liveView struct {
	p     *mpb.Progress
	f     *os.File
	start time.Time
	now   func() time.Time
	width func() int // the terminal's columns: no line may wrap

	mu    sync.Mutex
	nodes map[string]*liveNode
}

type liveNode struct {
	bar       *mpb.Bar
	state     string
	started   time.Time
	lastData  time.Time // last output or reasoning chunk
	lastPoll  time.Time // last status poll that found the work in progress
	bytes     int
	tokens    int    // output tokens (chunks, ≈ tokens, until the provider counts them)
	reasoning int    // reasoning chunks
	step      string // the recovery step under way, with its budget
	stepAt    time.Time
	gone      bool // finished: its line is dropped
}

// newLiveView draws on f, which must be a terminal.
//
// Locking: mu guards the nodes; mpb calls the line decorators from its own
// goroutines, which take mu, so mu is never held while calling into mpb.
func newLiveView(f *os.File) *liveView {
	width := termWidth(f)
	if width == nil { // not a terminal after all (a test's file): nothing wraps
		width = func() int { return 0 }
	}
	return &liveView{
		p:     mpb.New(mpb.WithOutput(f), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithAutoRefresh()),
		f:     f,
		start: time.Now(), now: time.Now, nodes: map[string]*liveNode{},
		width: width,
	}
}

// Write prints lines above the live lines (the diagnostics' writer). Each
// starts with a carriage return: after Ctrl-C the terminal echoes ^C where
// the cursor is, and a line written after it would start shifted right.
func (v *liveView) Write(b []byte) (int, error) {
	line := append([]byte("\r"), b...)
	if _, err := v.p.Write(line); err == nil {
		return len(b), nil
	}
	if _, err := v.f.Write(line); err != nil { // the view is stopped: write through
		return 0, err
	}
	return len(b), nil
}

// report takes what happens to a node (runner.Options.OnProgress). The
// node's line stays through every recovery step (a reconnect, a continue, a
// retry, a move to another worker) and goes only when the node ends.
func (v *liveView) report(p runner.Progress) {
	switch {
	case p.State.Final():
		v.finish(p.Node, p.Text)
		return
	case p.State == runner.ProgressDiagnostic:
		return // the log writes them above the lines
	}
	n := v.track(p.Node) // a resumed node may stream before any state change
	v.mu.Lock()
	defer v.mu.Unlock()
	if n.gone {
		return
	}
	switch p.State {
	case runner.ProgressStreaming: // a new attempt
		n.state, n.step = "streaming", ""
	case runner.ProgressRecovering:
		n.step, n.stepAt = p.Text, v.now()
	case runner.ProgressWaiting: // for quota: the node sends when it allows
		n.state, n.step, n.stepAt = "waiting", p.Text, v.now()
	}
	n.bytes, n.tokens, n.reasoning = p.Bytes, p.Tokens, p.Reasoning
	n.lastData, n.lastPoll = p.LastData, p.LastPoll
}

// finish prints a node's final state above the live lines and drops its
// line: done, failed, skipped, interrupted, needs attention.
func (v *liveView) finish(node, state string) {
	v.mu.Lock()
	text := state
	var bar *mpb.Bar
	if n, ok := v.nodes[node]; ok {
		if n.tokens > 0 {
			text += fmt.Sprintf(" · %d tokens in %s", n.tokens, v.now().Sub(n.started).Round(100*time.Millisecond))
		}
		bar, n.gone = n.bar, true
		delete(v.nodes, node)
	}
	text += fmt.Sprintf(" · at %.1fs", v.now().Sub(v.start).Seconds())
	v.mu.Unlock()
	// Keyed and folded as the log's lines are: they share the terminal.
	prefix := fmt.Sprintf("%-*s ", humanlog.KeyWidth, node)
	_, _ = v.Write([]byte(textfit.Fold(prefix, text, v.width(), len(prefix)) + "\n"))
	if bar != nil {
		bar.Abort(true) // the line goes; the scrolled-up one stays
	}
}

// track returns a node's live state, creating it and its line on first sight.
// A node finished meanwhile has gone set and no line.
func (v *liveView) track(node string) *liveNode {
	v.mu.Lock()
	n, ok := v.nodes[node]
	if !ok {
		n = &liveNode{state: "resuming", started: v.now()}
		v.nodes[node] = n
	}
	v.mu.Unlock()
	if ok {
		return n
	}
	bar := v.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.line(node, n)
	})))
	v.mu.Lock()
	gone := n.gone
	if !gone {
		n.bar = bar
	}
	v.mu.Unlock()
	if gone {
		bar.Abort(true)
	}
	return n
}

// line renders one running node, cut to the terminal's width: a wrapped
// live line would break the redraw. Called with v.mu held.
func (v *liveView) line(id string, n *liveNode) string {
	now := v.now()
	el := now.Sub(n.started)
	var b strings.Builder
	fmt.Fprintf(&b, "  %-*s %-9s %8s %6d tok", humanlog.KeyWidth, id, n.state, ledger.Size(int64(n.bytes)), n.tokens)
	if el > 0 && n.tokens > 0 {
		fmt.Fprintf(&b, " %5.0f tok/s", float64(n.tokens)/el.Seconds())
	} else {
		b.WriteString("     - tok/s")
	}
	fmt.Fprintf(&b, " %6.1fs", el.Seconds())
	// The step under way first: on a narrow terminal the line is cut at
	// its end, and the step says most.
	if n.step != "" {
		if n.lastData.After(n.stepAt) {
			n.step = "" // data again: the step worked
		} else {
			fmt.Fprintf(&b, "  | %s", n.step)
		}
	}
	last := n.lastData
	if last.IsZero() {
		last = n.started
	}
	if quiet := now.Sub(last); quiet >= time.Second {
		fmt.Fprintf(&b, "  silent %.1fs", quiet.Seconds())
		if !n.lastPoll.IsZero() {
			fmt.Fprintf(&b, ", polled in_progress %ds ago", int(now.Sub(n.lastPoll).Seconds()))
		}
	}
	if n.reasoning > 0 {
		fmt.Fprintf(&b, "  reasoning %d", n.reasoning)
	}
	if w := v.width(); w > 0 {
		return textfit.CutEnd(b.String(), w-1)
	}
	return b.String()
}

// stop ends the view: lines still drawn are dropped (their nodes' fate is
// in the summary), and what was written above stays.
func (v *liveView) stop() {
	v.mu.Lock()
	var bars []*mpb.Bar
	for id, n := range v.nodes {
		if n.bar != nil {
			bars = append(bars, n.bar)
		}
		n.gone = true
		delete(v.nodes, id)
	}
	v.mu.Unlock()
	for _, b := range bars {
		b.Abort(true)
	}
	v.p.Wait()
	_, _ = v.f.WriteString("\r") // what follows starts its line, after a ^C too
}
