package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/graph"
)

// A node's timeout bounds its wall time while it streams healthily: the
// node fails with NR907, not as interrupted, and keeps its partial output.
func TestNodeTimeoutDuringHealthyStream(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 5000, TokensPerSecond: 500}) // 10 s of output
	g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n"+
		"  - {id: long, prompt: go on, timeout: 700ms}\n  - {id: after, needs: [long], prompt: x}\n", srv.BaseURL()))
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, g, j)
	took := time.Since(start)
	n := res.Nodes[0]
	var ne *NodeError
	if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) || ne.Code != diagnostics.NodeTimeout || !errors.Is(n.Err, ErrNodeTimeout) {
		t.Fatalf("long: %s, %v", n.State, n.Err)
	}
	if !strings.Contains(n.Err.Error(), "timeout (700ms) passed while streaming") {
		t.Errorf("error does not say what the node was doing: %v", n.Err)
	}
	if took > 5*time.Second {
		t.Errorf("the run took %s: the timeout did not stop the stream", took)
	}
	if res.Status != journal.RunFailed || res.Nodes[1].State != journal.NodeSkipped {
		t.Errorf("run %s, after %s", res.Status, res.Nodes[1].State)
	}
	cs := codes(t, j, res.RunID, "long")
	if i := slices.Index(cs, diagnostics.NodeTimeout.ID); i < 0 || slices.Contains(cs, diagnostics.NodeCanceled.ID) ||
		slices.Contains(cs, diagnostics.DisconnectDetected.ID) || cs[len(cs)-1] != diagnostics.NodeFailed.ID {
		t.Errorf("codes %v: want NR907 then NR901, no NR101 or NR906", cs)
	}
	partial, err := j.RebuildOutput(context.Background(), res.RunID, "long", 1)
	if err != nil || len(partial) == 0 {
		t.Errorf("partial output: %d bytes, %v", len(partial), err)
	}
}

// A node's timeout also bounds a long recovery (here a provider answering
// 503 to every request, under a profile that would keep retrying for long).
func TestNodeTimeoutDuringRecovery(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: sim.FaultStatus, Status: 503}}})
	g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: slow\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n"+
		"  - {id: n, prompt: go on, timeout: 800ms}\n", srv.BaseURL()))
	slow := profile.Builtins()["ci"]
	slow.Name, slow.Retries, slow.Deadline = "slow", 1000, profile.D(time.Minute)
	slow.Backoff = profile.Backoff{Base: profile.D(100 * time.Millisecond), Factor: 1, Cap: profile.D(100 * time.Millisecond)}
	slow.Breaker = 0
	j := openJournal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, g, Options{Journal: j, Profiles: profile.Set{"slow": slow}})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	n := res.Nodes[0]
	var ne *NodeError
	if n.State != journal.NodeFailed || !errors.As(n.Err, &ne) || ne.Code != diagnostics.NodeTimeout {
		t.Fatalf("n: %s, %v", n.State, n.Err)
	}
	if !strings.Contains(n.Err.Error(), "passed during recovery (last: transport_disconnect)") {
		t.Errorf("error does not say the node was recovering: %v", n.Err)
	}
	if took < 700*time.Millisecond || took > 5*time.Second {
		t.Errorf("failed after %s, want about 800ms", took)
	}
	cs := codes(t, j, res.RunID, "n")
	if strings.Count(strings.Join(cs, " "), diagnostics.RetryStarted.ID) < 2 || !slices.Contains(cs, diagnostics.NodeTimeout.ID) {
		t.Errorf("codes %v: want retries (NR103), then NR907", cs)
	}
}

// echoProvider is a custom provider kind for tests: it streams the rendered
// prompt back as the output, and rejects a prompt containing "FAIL" as a
// deterministic error, the way an API rejects a bad request (400).
type echoProvider struct {
	mu      sync.Mutex
	prompts map[string]string
	env     map[string]map[string]string
}

func (p *echoProvider) Capabilities() provider.Capabilities { return provider.Capabilities{} }

func (p *echoProvider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	p.mu.Lock()
	p.prompts[req.Node] = req.Prompt
	p.env[req.Node] = req.Env
	p.mu.Unlock()
	if strings.Contains(req.Prompt, "FAIL") {
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Status: 400, Err: errors.New("the request was rejected")}
	}
	if err := emit(provider.Event{Kind: provider.KindDelta, Text: req.Prompt, Seq: -1}); err != nil {
		return err
	}
	return emit(provider.Event{Kind: provider.KindDone, Seq: -1})
}

// continue_on_failure: a failed node's dependents run, see an empty output
// and failed "id" true; a failure without it skips its dependents; the run
// ends failed. The prompts show what the templates saw, inputs included.
func TestContinueOnFailureAndCustomKind(t *testing.T) {
	echo := &echoProvider{prompts: map[string]string{}, env: map[string]map[string]string{}}
	opts := Options{Kinds: map[string]ProviderFunc{"echo": func(spec *graph.ProviderSpec) (provider.Provider, error) { return echo, nil }}}
	src := `name: t
profile: ci
inputs:
  goal: {default: sockets}
providers:
  e: {kind: echo, model: m}
nodes:
  - {id: lint, prompt: 'FAIL on {{ input "goal" }}', continue_on_failure: true}
  - {id: report, needs: [lint], prompt: '{{ if failed "lint" }}lint failed: [{{ output "lint" }}]{{ else }}ok{{ end }} about {{ .Inputs.goal }}'}
  - {id: hard, prompt: FAIL hard}
  - {id: after, needs: [hard], prompt: never}
`
	if _, err := ParseGraph("g.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), `unknown kind "echo"`) {
		t.Fatalf("a custom kind without registration: %v", err)
	}
	g, err := ParseGraphWith("g.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	j := openJournal(t)
	opts.Journal = j
	res, err := Run(context.Background(), g, opts)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]journal.NodeState{}
	for _, n := range res.Nodes {
		states[n.ID] = n.State
	}
	want := map[string]journal.NodeState{"lint": journal.NodeFailed, "report": journal.NodeCompleted, "hard": journal.NodeFailed, "after": journal.NodeSkipped}
	for id, st := range want {
		if states[id] != st {
			t.Errorf("%s: %s, want %s", id, states[id], st)
		}
	}
	if res.Status != journal.RunFailed {
		t.Errorf("run %s, want failed", res.Status)
	}
	if got := res.Nodes[1].Output; got != "lint failed: [] about sockets" {
		t.Errorf("report saw %q", got)
	}
	if _, ran := echo.prompts["after"]; ran {
		t.Error("after ran although hard failed without continue_on_failure")
	}
	run, err := j.Run(context.Background(), res.RunID)
	if err != nil || run.Inputs["goal"] != "sockets" {
		t.Errorf("journaled inputs %q, %v", run.Inputs, err)
	}

	// Resume reuses the journaled inputs and the registered kinds.
	res, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j, Kinds: opts.Kinds})
	if err != nil {
		t.Fatal(err)
	}
	if echo.prompts["lint"] != "FAIL on sockets" || res.Status != journal.RunFailed {
		t.Errorf("resumed: lint prompt %q, run %s", echo.prompts["lint"], res.Status)
	}
	if _, err := Resume(context.Background(), res.RunID, nil, Options{Journal: j}); err == nil || !strings.Contains(err.Error(), `unknown kind "echo"`) {
		t.Errorf("resume without the kind: %v", err)
	}
}

// Options.Kinds may not shadow a built-in kind, and a provider must
// implement what its capabilities promise.
func TestCustomKindChecks(t *testing.T) {
	g := parseTestGraph(t, "name: t\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n")
	f := func(*graph.ProviderSpec) (provider.Provider, error) { return &echoProvider{}, nil }
	_, err := Run(context.Background(), g, Options{Journal: openJournal(t), Kinds: map[string]ProviderFunc{"sim": f}})
	if err == nil || !strings.Contains(err.Error(), `"sim" is a built-in provider kind`) {
		t.Errorf("shadowing sim: %v", err)
	}
	opts := Options{Kinds: map[string]ProviderFunc{"liar": func(*graph.ProviderSpec) (provider.Provider, error) { return &liar{}, nil }}}
	g, err = ParseGraphWith("g.yaml", []byte("name: t\nproviders:\n  p: {kind: liar}\nnodes:\n  - {id: a, prompt: x}\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Journal = openJournal(t)
	if _, err := Run(context.Background(), g, opts); err == nil || !strings.Contains(err.Error(), `g.yaml:3: provider "p": kind "liar": Capabilities().Resume is set but *runner.liar is not a provider.Resumer`) {
		t.Errorf("a provider that cannot resume but says so: %v", err)
	}
}

type liar struct{ *echoProvider }

func (*liar) Capabilities() provider.Capabilities { return provider.Capabilities{Resume: true} }
