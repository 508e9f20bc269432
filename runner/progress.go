package runner

import (
	"strings"
	"sync"
	"time"

	"github.com/noderun/noderun/diagnostics"
)

// Progress is one thing that happened to a node, as data (Options.OnProgress).
type Progress struct {
	Node string
	// State is what the node is doing: "streaming", "recovering", "done",
	// "failed", "skipped", "interrupted", "attention"; or "diagnostic" for a
	// journaled diagnostic (Code says which), or "data" for streamed output.
	State string
	// Text is the line Options.Progress gets, or the diagnostic's message.
	Text string
	// Attempt is the node's current attempt, 1-based (0 before the first).
	Attempt int
	// Bytes is the output of the current attempt so far; Tokens the output
	// tokens, as the provider reported them at the end, else the deltas
	// received (about one token each).
	Bytes  int
	Tokens int
	// Code and Step name a diagnostic: "NR102" and "reconnect_scheduled".
	Code, Step string
	Time       time.Time
}

// dataEvery is the least time between two "data" progress reports of a
// node: a fast stream must not call the callback per token.
const dataEvery = 100 * time.Millisecond

// progressSink turns the runner's reports into Progress values for one
// callback, one call at a time. A nil sink does nothing.
type progressSink struct {
	mu    sync.Mutex
	f     func(Progress)
	nodes map[string]*progressNode
}

type progressNode struct {
	attempt, bytes, tokens int
	last                   time.Time // last "data" report
}

func newProgressSink(f func(Progress)) *progressSink {
	if f == nil {
		return nil
	}
	return &progressSink{f: f, nodes: map[string]*progressNode{}}
}

func (s *progressSink) node(id string) *progressNode {
	n := s.nodes[id]
	if n == nil {
		n = &progressNode{}
		s.nodes[id] = n
	}
	return n
}

func (s *progressSink) send(id string, n *progressNode, p Progress) {
	p.Node, p.Attempt, p.Bytes, p.Tokens, p.Time = id, n.attempt, n.bytes, n.tokens, time.Now()
	s.f(p)
}

// progressStates maps the lines of Options.Progress to states.
var progressStates = []struct{ prefix, state string }{
	{"streaming", "streaming"}, {"reconnecting", "recovering"}, {"retrying", "recovering"},
	{"done", "done"}, {"failed", "failed"}, {"skipped", "skipped"}, {"interrupted", "interrupted"},
	{"needs attention", "attention"},
}

// state reports a node's state line.
func (s *progressSink) state(id, text string) {
	if s == nil {
		return
	}
	state := text
	for _, ps := range progressStates {
		if strings.HasPrefix(text, ps.prefix) {
			state = ps.state
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(id)
	if state == "streaming" { // a new attempt starts (its number is confirmed by attempt)
		n.attempt, n.bytes, n.tokens = n.attempt+1, 0, 0
	}
	s.send(id, n, Progress{State: state, Text: text})
}

// attempt starts a node's attempt n: nothing streamed yet.
func (s *progressSink) attempt(id string, a int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(id)
	n.attempt, n.bytes, n.tokens = a, 0, 0
}

// data reports output: the attempt's bytes so far and one more delta;
// usage, when the provider reported it, replaces the delta count.
func (s *progressSink) data(id string, bytes, usageTokens int, final bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(id)
	n.bytes = bytes
	if usageTokens > 0 {
		n.tokens = usageTokens
	} else if !final {
		n.tokens++
	}
	if now := time.Now(); final || now.Sub(n.last) >= dataEvery {
		n.last = now
		s.send(id, n, Progress{State: "data"})
	}
}

// diag reports a node's diagnostic.
func (s *progressSink) diag(id string, attempt int, d diagnostics.Record) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(id)
	if attempt > 0 {
		n.attempt = attempt
	}
	s.send(id, n, Progress{State: "diagnostic", Text: d.Message, Code: d.Code.ID, Step: d.Code.Name})
}
