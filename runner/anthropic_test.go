package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Kind anthropic against the simulator's Messages API, on real sockets and
// the real adapter: retried within the budget, continued by prefill where
// the model takes it, its errors classified, its thinking kept apart.

const anthTokens = 40

// anthGraph is one anthropic node against baseURL.
func anthGraph(t *testing.T, baseURL, model, continuation, node, extra string) *Graph {
	t.Helper()
	cont := ""
	if continuation != "" {
		cont = "    continuation: " + continuation + "\n"
	}
	return parseTestGraph(t, fmt.Sprintf("name: t\nprofile: ci\nproviders:\n  p:\n    kind: anthropic\n    base_url: %s\n    api_key_env: NODERUN_TEST_ANTHROPIC_KEY\n    model: %s\n%snodes:\n  - id: %s\n    prompt: write about %s\n%s",
		baseURL, model, cont, node, node, extra))
}

func anthAnswer(model, node string) string {
	return strings.Join(sim.Text(model, "write about "+node, 1, anthTokens), "")
}

func anthSim(t *testing.T, faults ...sim.Fault) *sim.Server {
	t.Helper()
	return simtest.Start(t, sim.Config{Seed: 1, Tokens: anthTokens, Faults: faults})
}

// A drop (each kind) is retried within the budget; the output is byte-identical.
func TestAnthropicDropRetried(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut} {
		t.Run(string(kind), func(t *testing.T) {
			srv := anthSim(t, sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{1}, Kind: kind, AfterEvents: 20})
			j := openJournal(t)
			res := runGraph(t, anthGraph(t, srv.BaseURL(), "claude-sonnet-4-5", "", "a", ""), j)
			n := res.Nodes[0]
			if want := anthAnswer("claude-sonnet-4-5", "a"); n.State != journal.NodeCompleted || n.Output != want {
				t.Fatalf("node %s (%v)\n got %q\nwant %q", n.State, n.Err, n.Output, want)
			}
			if r := srv.Stats().Requests[sim.EndpointMessages]; r != 2 {
				t.Errorf("%d requests, want 2 (the drop and one retry)", r)
			}
			if got := codes(t, j, res.RunID, "a"); !has(got, diagnostics.DisconnectDetected.ID, diagnostics.RetryStarted.ID, diagnostics.Recovered.ID) {
				t.Errorf("codes %v: want disconnect, retry, recovered", got)
			}
		})
	}
}

// A mid-stream overloaded_error (and HTTP 529) is transient: retried (a
// 429 parks the node until its Retry-After).
// A 400, mid-stream or as the answer, is not: the node fails at once with
// its code.
func TestAnthropicErrorsClassified(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	for _, c := range []struct {
		name  string
		fault sim.Fault
		ok    bool
		code  diagnostics.Code
	}{
		{"overloaded-event", sim.Fault{Kind: sim.FaultErrorEvent, Status: 529, AfterEvents: 10}, true, diagnostics.ProviderError},
		{"http-529", sim.Fault{Kind: sim.FaultStatus, Status: 529}, true, diagnostics.ProviderError},
		{"http-429", sim.Fault{Kind: sim.FaultStatus, Status: 429, RetryAfter: "1"}, true, diagnostics.RateLimitWait},
		{"invalid-event", sim.Fault{Kind: sim.FaultErrorEvent, Status: 400, AfterEvents: 10}, false, diagnostics.DeterministicError},
		{"http-400", sim.Fault{Kind: sim.FaultStatus, Status: 400}, false, diagnostics.DeterministicError},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.fault
			f.Endpoint, f.Requests = sim.EndpointMessages, []int{1}
			srv := anthSim(t, f)
			j := openJournal(t)
			res := runGraph(t, anthGraph(t, srv.BaseURL(), "claude-sonnet-4-5", "", "a", ""), j)
			n := res.Nodes[0]
			got := codes(t, j, res.RunID, "a")
			reqs := srv.Stats().Requests[sim.EndpointMessages]
			if c.ok {
				if n.State != journal.NodeCompleted || n.Output != anthAnswer("claude-sonnet-4-5", "a") || reqs != 2 {
					t.Fatalf("node %s (%v) after %d requests, want completed byte-identical after 2", n.State, n.Err, reqs)
				}
				step := diagnostics.RetryStarted // a 429 parks the node instead: the same request again, no retry
				if c.code == diagnostics.RateLimitWait {
					step = diagnostics.QuotaParked
				}
				if !has(got, c.code.ID, step.ID) {
					t.Errorf("codes %v: want %s and %s", got, c.code, step)
				}
				return
			}
			if n.State != journal.NodeFailed || reqs != 1 {
				t.Fatalf("node %s after %d requests: want failed after 1 (not retried)", n.State, reqs)
			}
			if !has(got, c.code.ID) || slices.Contains(got, diagnostics.RetryStarted.ID) {
				t.Errorf("codes %v: want %s and no retry", got, c.code)
			}
		})
	}
}

// With continuation: prefill on a model that takes prefills, a drop is
// continued: 0 tokens regenerated (the simulator generated each once),
// the output byte-identical, in two requests.
func TestAnthropicPrefillContinues(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut} {
		for _, after := range []int{5, 20, 40} {
			node := fmt.Sprintf("n_%s_%d", kind, after)
			t.Run(node, func(t *testing.T) {
				srv := anthSim(t, sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{1}, Kind: kind, AfterEvents: after})
				j := openJournal(t)
				res := runGraph(t, anthGraph(t, srv.BaseURL(), "claude-sonnet-4-5", "prefill", node, ""), j)
				n := res.Nodes[0]
				if want := anthAnswer("claude-sonnet-4-5", node); n.State != journal.NodeCompleted || n.Output != want {
					t.Fatalf("node %s (%v)\n got %q\nwant %q", n.State, n.Err, n.Output, want)
				}
				st := srv.Stats()
				if st.TokensGenerated != anthTokens || st.ContinuedRequests != 1 || st.Requests[sim.EndpointMessages] != 2 {
					t.Errorf("generated %d tokens in %d requests (%d continued): want %d (0 regenerated) in 2 (1 continued)",
						st.TokensGenerated, st.Requests[sim.EndpointMessages], st.ContinuedRequests, anthTokens)
				}
				got := codes(t, j, res.RunID, node)
				if !has(got, diagnostics.ContinueScheduled.ID, diagnostics.ContinueAccepted.ID, diagnostics.Recovered.ID) || has(got, diagnostics.RetryStarted.ID) {
					t.Errorf("codes %v: want continue, accepted, recovered and no retry", got)
				}
			})
		}
	}
}

// On a model that takes no prefill (Claude 4.6): one 400 to the prefill,
// continuation off for the run (NR112), the node retried; the output is
// byte-identical, and a later node's drop is retried without asking again.
func TestAnthropicPrefillRejected(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	const model = "claude-opus-4-6"
	srv := anthSim(t,
		sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 20},
		sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{4}, Kind: sim.FaultReset, AfterEvents: 20})
	j := openJournal(t)
	res := runGraph(t, anthGraph(t, srv.BaseURL(), model, "prefill", "first", "  - id: second\n    needs: [first]\n    prompt: write about second\n"), j)
	for i, node := range []string{"first", "second"} {
		if n := res.Nodes[i]; n.State != journal.NodeCompleted || n.Output != anthAnswer(model, node) {
			t.Fatalf("%s: %s (%v), output equal %v", node, n.State, n.Err, n.Output == anthAnswer(model, node))
		}
	}
	st := srv.Stats()
	if st.Requests[sim.EndpointMessages] != 5 || st.ContinuedRequests != 0 {
		t.Errorf("requests %d, continued %d: want 5 (drop, rejected prefill, retry; drop, retry) and 0", st.Requests[sim.EndpointMessages], st.ContinuedRequests)
	}
	first := codes(t, j, res.RunID, "first")
	if n := strings.Count(strings.Join(first, " "), diagnostics.ContinueRejected.ID); n != 1 || slices.Contains(first, diagnostics.DeterministicError.ID) {
		t.Errorf("first node: %v, want one NR112 and no deterministic failure", first)
	}
	if got := codes(t, j, res.RunID, "second"); slices.Contains(got, diagnostics.ContinueScheduled.ID) || !has(got, diagnostics.RetryStarted.ID) {
		t.Errorf("second node: %v, want a plain retry (prefill was rejected in this run)", got)
	}
}

// Thinking is journaled as reasoning events, apart from the output, with
// the block's signature as a raw event; a node with extended thinking is
// retried, not prefilled (the API forbids a prefill with thinking on).
func TestAnthropicThinkingApart(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	srv := anthSim(t, sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 25})
	j := openJournal(t)
	res := runGraph(t, anthGraph(t, srv.BaseURL(), "claude-sonnet-4-5", "prefill", "a", "    reasoning_effort: low\n"), j)
	n := res.Nodes[0]
	if want := anthAnswer("claude-sonnet-4-5", "a"); n.State != journal.NodeCompleted || n.Output != want {
		t.Fatalf("node %s (%v)\n got %q\nwant %q", n.State, n.Err, n.Output, want)
	}
	thinking := strings.Join(sim.Text("claude-sonnet-4-5", "thinking:write about a", 1, sim.ThinkingTokens), "")
	evs, err := j.Events(t.Context(), res.RunID, journal.EventFilter{Node: "a", Kinds: []string{"reasoning", "raw"}})
	if err != nil {
		t.Fatal(err)
	}
	var reasoning strings.Builder
	sigs := 0
	for _, e := range evs {
		if e.Attempt != 2 {
			continue // the final attempt
		}
		switch e.Kind {
		case "reasoning":
			reasoning.Write(e.Payload)
		case "raw":
			if strings.Contains(string(e.Payload), `"thinking_signature"`) {
				sigs++
			}
		}
	}
	if reasoning.String() != thinking || sigs != 1 {
		t.Errorf("reasoning %q (%d signatures), want %q and 1", reasoning.String(), sigs, thinking)
	}
	if strings.Contains(n.Output, thinking) {
		t.Error("the thinking text is in the output")
	}
	if st := srv.Stats(); st.ContinuedRequests != 0 {
		t.Errorf("%d continued requests: a node with thinking must be retried", st.ContinuedRequests)
	}
}

// Ctrl-C, then `noderun resume`: an interrupted anthropic answer with
// continuation: prefill is continued from its journaled output; with
// extended thinking on, it is retried (a prefill cannot follow thinking).
func TestAnthropicResumeContinuesInterruptedNode(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	for _, c := range []struct {
		name, extra string
		continued   int64
	}{{"prefilled", "", 1}, {"thinking", "    reasoning_effort: low\n", 0}} {
		t.Run(c.name, func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: anthTokens, TokensPerSecond: 40})
			g := anthGraph(t, srv.BaseURL(), "claude-sonnet-4-5", "prefill", "slow", c.extra)
			j := openJournal(t)
			// Interrupted mid-answer: once its first words are in (at
			// 40 tokens/s the answer takes seconds). A timer instead found
			// nothing journaled yet on a loaded machine.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var once sync.Once
			res, err := Run(ctx, g, Options{Journal: j, OnProgress: func(p Progress) {
				if p.State == ProgressData && p.Bytes > 0 {
					once.Do(cancel)
				}
			}})
			if !errors.Is(err, ErrInterrupted) || res.Status != journal.RunInterrupted {
				t.Fatalf("run %v %v", res, err)
			}
			if part, err := j.RebuildOutput(context.Background(), res.RunID, "slow", 1); err != nil || part == "" {
				t.Fatalf("journaled %q (%v): want a partial answer", part, err)
			}
			res, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j})
			if err != nil {
				t.Fatal(err)
			}
			if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != anthAnswer("claude-sonnet-4-5", "slow") {
				t.Fatalf("resumed node %s (%v)\n got %q", n.State, n.Err, n.Output)
			}
			if st := srv.Stats(); st.ContinuedRequests != c.continued || st.Requests[sim.EndpointMessages] != 2 {
				t.Errorf("%d requests, %d continued: want 2 and %d", st.Requests[sim.EndpointMessages], st.ContinuedRequests, c.continued)
			}
		})
	}
}
