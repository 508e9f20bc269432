package temporal_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/noderun/noderun/profile"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

const schedGraph = `name: sched
providers:
  p: {kind: openai, base_url: http://127.0.0.1:1/v1, model: m}
nodes:
  - {id: a, provider: p, prompt: a}
  - {id: b, provider: p, needs: [a], prompt: 'b {{ output "a" }}'}
  - {id: c, provider: p, needs: [b], prompt: 'c {{ output "b" }}'}
  - {id: d, provider: p, prompt: d}
  - {id: e, provider: p, needs: [d], prompt: 'e {{ output "d" }}'}
`

// The workflow's scheduling, with a stand-in node activity (the real one is
// exercised against workers and simulators in the other tests): outputs flow
// to dependents, a failed node skips its dependents while independent
// branches go on, and a held node waits for the operator's signal and is
// replayed with Force before its dependents run.
func TestWorkflowScheduling(t *testing.T) {
	cases := []struct {
		name   string
		fail   string // node that fails by its profile
		hold   string // node held for an operator until signalled
		status string
		states map[string]string
	}{
		{"all complete", "", "", "completed", map[string]string{"a": "completed", "b": "completed", "c": "completed", "d": "completed", "e": "completed"}},
		{"failure skips dependents", "b", "", "failed", map[string]string{"a": "completed", "b": "failed", "c": "skipped", "d": "completed", "e": "completed"}},
		{"held node replayed on signal", "", "b", "completed", map[string]string{"a": "completed", "b": "completed", "c": "completed", "d": "completed", "e": "completed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			var mu sync.Mutex
			var forced []string
			outputs := map[string]string{}
			node := func(ctx context.Context, in ntemporal.NodeInput) (ntemporal.NodeOutcome, error) {
				out := ntemporal.NodeOutcome{Node: in.Node, State: "completed", Output: in.Node}
				for _, v := range in.Needs {
					out.Output += "<" + v
				}
				mu.Lock()
				outputs[in.Node] = out.Output
				mu.Unlock()
				if in.Force {
					mu.Lock()
					forced = append(forced, in.Node)
					mu.Unlock()
				}
				switch {
				case in.Node == tc.fail:
					out.State, out.Reason = "failed", "provider said no"
					return out, temporal.NewNonRetryableApplicationError(out.Reason, "NodeFailed", nil, out)
				case in.Node == tc.hold && !in.Force:
					out.State, out.Output, out.Reason = "attention", "", "unsafe"
				}
				return out, nil
			}
			ntemporal.RegisterWorkflow(env)
			env.RegisterActivityWithOptions(node, activity.RegisterOptions{Name: ntemporal.ActivityName})
			if tc.hold != "" {
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(ntemporal.QueryState)
					var st ntemporal.RunResult
					if err != nil || v.Get(&st) != nil || st.Status != "attention" {
						t.Errorf("before the signal: %+v %v (want status attention)", st, err)
					}
					env.SignalWorkflow(ntemporal.SignalRetry, tc.hold)
				}, time.Hour)
			}
			prof, _ := profile.Set(profile.Builtins()).Get("ci")
			env.ExecuteWorkflow(ntemporal.WorkflowName, ntemporal.RunInput{RunID: "r", GraphPath: "sched.yaml", GraphText: schedGraph, Profile: prof, Parallel: 2})
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow: completed %v, %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
			}
			var res ntemporal.RunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status {
				t.Errorf("status %s, want %s", res.Status, tc.status)
			}
			for _, n := range res.Nodes {
				if n.State != tc.states[n.Node] {
					t.Errorf("node %s: %s (%s), want %s", n.Node, n.State, n.Reason, tc.states[n.Node])
				}
			}
			if tc.states["c"] == "completed" && (outputs["c"] != "c<b<a" || res.Nodes[2].Bytes != len("c<b<a")) {
				t.Errorf("c's output %q (%d bytes in the workflow's state): needs did not flow", outputs["c"], res.Nodes[2].Bytes)
			}
			if tc.hold != "" && strings.Join(forced, ",") != tc.hold {
				t.Errorf("forced replays %v, want %s", forced, tc.hold)
			}
		})
	}
}

// The heartbeat timeout no longer follows the profile's poll_after: a
// fixed default, the run's own when set, never below the floor.
func TestHeartbeatTimeout(t *testing.T) {
	for _, tc := range []struct {
		set, want time.Duration
	}{
		{0, 10 * time.Second},
		{30 * time.Second, 30 * time.Second},
		{time.Second, 3 * time.Second},
	} {
		if got := ntemporal.HeartbeatTimeout(ntemporal.RunInput{HeartbeatTimeout: tc.set}); got != tc.want {
			t.Errorf("run's timeout %s: %s, want %s", tc.set, got, tc.want)
		}
	}
}

// QueryChanges answers with the nodes that changed after the version the
// caller had: a follower of a wide run is not sent every node at each poll.
func TestQueryChangesSinceAVersion(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	node := func(ctx context.Context, in ntemporal.NodeInput) (ntemporal.NodeOutcome, error) {
		if in.Node == "b" && !in.Force {
			return ntemporal.NodeOutcome{Node: in.Node, State: "attention", Reason: "unsafe"}, nil
		}
		return ntemporal.NodeOutcome{Node: in.Node, State: "completed", Output: in.Node}, nil
	}
	ntemporal.RegisterWorkflow(env)
	env.RegisterActivityWithOptions(node, activity.RegisterOptions{Name: ntemporal.ActivityName})
	changes := func(since int) ntemporal.Changes {
		t.Helper()
		v, err := env.QueryWorkflow(ntemporal.QueryChanges, since)
		var ch ntemporal.Changes
		if err != nil || v.Get(&ch) != nil {
			t.Fatalf("query: %v", err)
		}
		return ch
	}
	env.RegisterDelayedCallback(func() {
		// b is held: a, b and d settled; c waits for b, e ran after d.
		all := changes(0)
		if all.Status != "attention" || len(all.Nodes) != 5 {
			t.Errorf("since 0: %+v, want every node and status attention", all)
		}
		if again := changes(all.Version); len(again.Nodes) != 0 || again.Version != all.Version {
			t.Errorf("since the last version: %+v, want nothing new", again)
		}
		env.SignalWorkflow(ntemporal.SignalRetry, "b")
	}, time.Hour)
	prof, _ := profile.Set(profile.Builtins()).Get("ci")
	env.ExecuteWorkflow(ntemporal.WorkflowName, ntemporal.RunInput{RunID: "r", GraphPath: "sched.yaml", GraphText: schedGraph, Profile: prof, Parallel: 2})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
}
