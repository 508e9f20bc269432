package graph

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/provider/sim"
)

// Issue 31, point 1: the simulator is configured with a typed sim.Config,
// in code or from a file's `sim:` block, and the graph source round trip
// keeps it.
func TestSimConfigIsTyped(t *testing.T) {
	cfg := &sim.Config{Seed: 3, Tokens: 50, Silence: 2 * time.Second,
		Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Node: "a", Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 4}}}
	g, err := Build(&Graph{Name: "s", Providers: map[string]*ProviderSpec{"s": {Kind: ProviderKindSim, Sim: cfg}},
		Nodes: []*Node{{ID: "a", Prompt: "x"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Providers["s"].Sim; got == nil || !reflect.DeepEqual(*got, *cfg) {
		t.Errorf("built: %+v, want %+v", got, cfg)
	}
	again, err := Parse("again.yaml", g.Source) // what a resume does with the journaled source
	if err != nil {
		t.Fatalf("%v\n%s", err, g.Source)
	}
	if got := again.Providers["s"].Sim; got == nil || !reflect.DeepEqual(*got, *cfg) {
		t.Errorf("source round trip: %+v, want %+v\n%s", got, cfg, g.Source)
	}

	// A bad value set in code: the provider and the field, no line.
	bad := *cfg
	bad.Faults = []sim.Fault{{Kind: "nap"}}
	_, err = Build(&Graph{Name: "s", Providers: map[string]*ProviderSpec{"s": {Kind: ProviderKindSim, Sim: &bad}},
		Nodes: []*Node{{ID: "a", Prompt: "x"}}}, Options{})
	ge, ok := errors.AsType[*Error](err)
	if !ok || len(ge.Problems) != 1 || ge.Problems[0].Field != "sim" || !strings.Contains(err.Error(), `provider "s": sim: `) ||
		!strings.Contains(err.Error(), `kind: want one of close, reset, cut, silence, status, queued, refuse, outage, error_event, got "nap"`) || strings.Contains(err.Error(), "graph.yaml") {
		t.Errorf("bad fault in code: %v", err)
	}

	// In a file, the same problem at its line.
	src := "name: s\nproviders:\n  s:\n    kind: sim\n    sim:\n      seed: 1\n      faults:\n        - {kind: nap}\nnodes:\n  - {id: a, prompt: x}\n"
	_, err = Parse("g.yaml", []byte(src))
	if err == nil || !strings.HasPrefix(err.Error(), `g.yaml:8: provider "s": sim: `) {
		t.Errorf("bad fault in a file: %v", err)
	}
}
