package runner

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/noderun/noderun/diagnostics"
)

// ProgressState is what a Progress reports: a node's state, or one of the
// two reports that change none (ProgressData, ProgressDiagnostic).
type ProgressState uint8

const (
	// ProgressStreaming: an attempt starts (Progress.Attempt); its figures
	// start from nothing.
	ProgressStreaming ProgressState = iota + 1
	// ProgressRecovering: a recovery step is scheduled; Progress.Step says
	// which, its delay and its place in its budget. The node goes on.
	ProgressRecovering
	// ProgressData: the node's figures moved (output, reasoning, a status
	// poll that found the work alive). Reported at most every 100 ms per
	// node, a poll at once, and once more when an attempt ends.
	ProgressData
	// ProgressDiagnostic: a diagnostic of the node was journaled
	// (Progress.Code, and its message in Text).
	ProgressDiagnostic
	// The final states: the node will report nothing more in this run.
	ProgressDone
	ProgressFailed
	ProgressSkipped     // a node it needs did not complete
	ProgressInterrupted // Ctrl-C, SIGTERM, a worker stopping: resumable
	ProgressAttention   // held for an operator (noderun resume --retry)
	// ProgressWaiting: the node waits for its provider's quota before it
	// sends (a request the budget does not allow yet, or a 429 that parked
	// it); Step.Delay is how long until the budget it waits for is full
	// again (0 when not known). It sends when the budget allows.
	ProgressWaiting
)

var progressStateNames = [...]string{"", "streaming", "recovering", "data", "diagnostic", "done", "failed", "skipped", "interrupted", "attention", "waiting"}

func (s ProgressState) String() string {
	if int(s) < len(progressStateNames) {
		return progressStateNames[s]
	}
	return fmt.Sprintf("ProgressState(%d)", uint8(s))
}

// Final reports whether s ends the node: done, failed, skipped, interrupted,
// attention.
func (s ProgressState) Final() bool { return s >= ProgressDone && s <= ProgressAttention }

// Progress is one thing that happened to a node, as data (Options.OnProgress).
type Progress struct {
	Node  string
	State ProgressState
	// Text says it for people: the state's line ("streaming",
	// "reconnecting 2/8 in 1.2s (transport_disconnect)", "done (12 bytes)",
	// "failed: …"), or the diagnostic's message. Decide on State, Step and
	// Code; the wording may change.
	Text string
	// Attempt is the node's current attempt, 1-based (0 before the first).
	Attempt int
	// Bytes is the output of the current attempt so far; Tokens its output
	// tokens, as the provider reported them at the end, else the output
	// chunks received (about a token each); Reasoning the reasoning chunks.
	Bytes, Tokens, Reasoning int
	// LastData is when the attempt last received output, reasoning or word
	// that its work advanced; LastPoll when a status poll or check last
	// found its work queued or in progress. Zero: not yet.
	LastData, LastPoll time.Time
	// Step is the recovery step of a ProgressRecovering report.
	Step RecoveryStep
	// Code is the diagnostic of a ProgressDiagnostic report. Codes are
	// comparable values: compare with ==, like p.Code ==
	// diagnostics.Reattached, or ask the code what it is (p.Code.Role,
	// p.Code.Means, p.Code.IsFault()); Code.ID ("NR201") is its stable
	// text, for storing.
	Code diagnostics.Code
	// Time is when it was reported.
	Time time.Time
}

// RecoveryStep is a recovery step about to be taken, as data.
type RecoveryStep struct {
	// Code is the step's diagnostic code: NR102 reconnect_scheduled, NR110
	// continue_scheduled, NR103 retry_started, NR205 fell_back_to_retry,
	// NR112 continue_rejected. Code.Means says how the step gets the output
	// back (diagnostics.ByReconnect, ByContinue, ByRetry). A Temporal run's
	// node that another worker picks up reports NR210 cross_worker_resume,
	// a fault whose Means is zero (Follow).
	Code diagnostics.Code
	// Class is the class of the fault it recovers from.
	Class diagnostics.Class
	// Delay is the wait before the step is taken.
	Delay time.Duration
	// N is the step's place in its budget and Of the budget: reconnect 2 of
	// 8 (re-attaches and continues share the reconnect budget, which counts
	// steps in a row without progress), retry 1 of 3 (the node's retries,
	// which never refill).
	N, Of int
}

// stepJSON is a RecoveryStep on the wire (a Temporal heartbeat): the code by
// its ID.
type stepJSON struct {
	Code  string            `json:"code"`
	Class diagnostics.Class `json:"class,omitempty"`
	Delay time.Duration     `json:"delay,omitempty"`
	N     int               `json:"n,omitempty"`
	Of    int               `json:"of,omitempty"`
}

// MarshalJSON writes the step with its code's ID.
func (s RecoveryStep) MarshalJSON() ([]byte, error) {
	return json.Marshal(stepJSON{Code: s.Code.ID, Class: s.Class, Delay: s.Delay, N: s.N, Of: s.Of})
}

// UnmarshalJSON reads a step; a code this build does not know keeps its ID
// alone (a newer worker's), rather than losing the cursor it travels in.
func (s *RecoveryStep) UnmarshalJSON(b []byte) error {
	var j stepJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("recovery step: %w", err)
	}
	c, ok := diagnostics.Lookup(j.Code)
	if !ok {
		c = diagnostics.Code{ID: j.Code}
	}
	*s = RecoveryStep{Code: c, Class: j.Class, Delay: j.Delay, N: j.N, Of: j.Of}
	return nil
}

// dataEvery is the least time between two ProgressData reports of a node
// streaming: a fast stream must not call the callback per token.
const dataEvery = 100 * time.Millisecond

// progressSink hands the runner's reports to Options.OnProgress, one call at
// a time. A nil sink does nothing; the executor checks for nil before it
// gathers anything, so that a run without a callback pays nothing.
type progressSink struct {
	mu sync.Mutex
	f  func(Progress)
	// last holds each node's figures as last reported by its executor, for
	// the reports made without them (the scheduler's final states, the
	// run's diagnostics about a node).
	last map[string]Progress
}

func newProgressSink(f func(Progress)) *progressSink {
	if f == nil {
		return nil
	}
	return &progressSink{f: f, last: map[string]Progress{}}
}

// report sends an executor's p, which carries the node's figures.
func (s *progressSink) report(p Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[p.Node] = p
	p.Time = time.Now()
	s.f(p)
}

// reportFor sends p, made without the node's figures (a final state, a
// diagnostic of the run's about the node), with its last reported ones.
// attempt, when above 0, is the attempt it is about.
func (s *progressSink) reportFor(node string, attempt int, p Progress) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.last[node]
	p.Node, p.Attempt = node, last.Attempt
	if attempt > 0 {
		p.Attempt = attempt
	}
	p.Bytes, p.Tokens, p.Reasoning, p.LastData, p.LastPoll = last.Bytes, last.Tokens, last.Reasoning, last.LastData, last.LastPoll
	p.Time = time.Now()
	s.f(p)
}
