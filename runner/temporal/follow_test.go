package temporal

import (
	"slices"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/runner"
)

// What Follow reports from each poll of a run: the nodes' state changes as
// typed states, each recovery step a heartbeat shows (as data, once), and a
// node another worker picked up; nothing twice, nothing it cannot know.
func TestFollowerReports(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	retry := runner.RecoveryStep{Code: diagnostics.RetryStarted, Class: diagnostics.ClassServer, Delay: 20 * time.Millisecond, N: 1, Of: 3}
	reconnect := runner.RecoveryStep{Code: diagnostics.ReconnectScheduled, Class: diagnostics.ClassDisconnect, Delay: 5 * time.Millisecond, N: 1, Of: 8}
	type poll struct {
		nodes   []NodeOutcome
		pending []PendingActivity
		want    []string // node state/step-code "text"
	}
	outcome := func(node, state string) NodeOutcome { return NodeOutcome{Node: node, State: state} }
	cursor := func(step string, rs *runner.RecoveryStep) runner.NodeCursor {
		return runner.NodeCursor{Attempt: 1, Bytes: 42, Step: step, Recovery: rs}
	}
	polls := []poll{
		{nodes: []NodeOutcome{outcome("a", "running"), outcome("b", "pending"), outcome("c", "pending")},
			want: []string{`a streaming "streaming"`}},
		// a response started: a heartbeat with a note, no step
		{nodes: []NodeOutcome{outcome("a", "running"), outcome("b", "pending"), outcome("c", "pending")},
			pending: []PendingActivity{{Node: "a", Attempt: 1, Worker: "w1", Beat: Heartbeat{NodeCursor: cursor("started resp_1", nil)}}}},
		{nodes: []NodeOutcome{outcome("a", "running"), outcome("b", "pending"), outcome("c", "pending")},
			pending: []PendingActivity{{Node: "a", Attempt: 1, Worker: "w1", Beat: Heartbeat{NodeCursor: cursor("reconnecting 1/8 in 5ms (transport_disconnect)", &reconnect)}}},
			want:    []string{`a recovering NR102 "reconnecting 1/8 in 5ms (transport_disconnect) on w1"`}},
		// the same heartbeat again: nothing new
		{nodes: []NodeOutcome{outcome("a", "running"), outcome("b", "pending"), outcome("c", "pending")},
			pending: []PendingActivity{{Node: "a", Attempt: 1, Worker: "w1", Beat: Heartbeat{NodeCursor: cursor("reconnecting 1/8 in 5ms (transport_disconnect)", &reconnect)}}}},
		// w1 is lost; w2 picks the node up and retries it
		{nodes: []NodeOutcome{outcome("a", "running"), outcome("b", "pending"), outcome("c", "pending")},
			pending: []PendingActivity{{Node: "a", Attempt: 2, Worker: "w2", Beat: Heartbeat{NodeCursor: cursor("retrying 1/3 in 20ms (server_error)", &retry)}}},
			want: []string{`a recovering NR210 "worker w1 gone; resumed on w2 (activity attempt 2)"`,
				`a recovering NR103 "retrying 1/3 in 20ms (server_error) on w2"`}},
		{nodes: []NodeOutcome{{Node: "a", State: "completed", Bytes: 5}, outcome("b", "running"), outcome("c", "pending")},
			want: []string{`a done "done (5 bytes)"`, `b streaming "streaming"`}},
		{nodes: []NodeOutcome{{Node: "a", State: "completed", Bytes: 5}, {Node: "b", State: "failed", Reason: "boom"},
			{Node: "c", State: "skipped", Reason: "needs b"}},
			want: []string{`b failed "failed: boom"`, `c skipped "skipped: needs b"`}},
	}
	f := newFollower()
	for i, p := range polls {
		got := f.nodes(RunResult{Nodes: p.nodes}, now)
		got = append(got, f.pending(p.pending, now)...)
		var says []string
		for _, g := range got {
			s := g.Node + " " + g.State.String()
			if g.State == runner.ProgressRecovering {
				s += " " + g.Step.Code.ID
				if g.Bytes != 42 || g.Attempt != 1 {
					t.Errorf("poll %d: a step without the cursor's figures: %+v", i, g)
				}
			}
			says = append(says, s+` "`+g.Text+`"`)
			if !g.Time.Equal(now) {
				t.Errorf("poll %d: reported at %s", i, g.Time)
			}
		}
		if !slices.Equal(says, p.want) {
			t.Errorf("poll %d: %q, want %q", i, says, p.want)
		}
		for _, g := range got {
			if g.State == runner.ProgressRecovering && g.Step.Code == diagnostics.RetryStarted && g.Step != retry {
				t.Errorf("poll %d: the retry reported as %+v", i, g.Step)
			}
		}
	}
}
