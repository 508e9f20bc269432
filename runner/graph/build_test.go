package graph

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// nodeView is what a node means, for comparing graphs.
type nodeView struct {
	ID, Provider, Model, System, Prompt, Reasoning string
	Needs                                          []string
	MaxOut                                         int
	Retries                                        *int
	Side                                           SideEffects
	Timeout                                        time.Duration
	Continue                                       bool
	Env                                            map[string]string
	Fallback                                       []string // nil and [] differ
	FallbackContinue                               bool
}

func viewOf(g *Graph) []nodeView {
	var out []nodeView
	for _, n := range g.Nodes {
		out = append(out, nodeView{n.ID, n.Provider, n.Model, n.System, n.Prompt, n.ReasoningEffort, n.Needs, n.MaxOutputTokens,
			n.Retries, n.SideEffects, n.Timeout, n.ContinueOnFailure, n.Env, n.Fallback, n.FallbackContinue})
	}
	return out
}

// Every graph file survives MarshalYAML: parsing the result gives the same
// nodes, providers and inputs, and marshalling again gives the same text.
func TestMarshalYAMLRoundTrip(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(graphTestdata, "valid", "*.yaml"))
	top, _ := filepath.Glob(filepath.Join(graphTestdata, "*.yaml"))
	for _, path := range append(paths, top...) {
		if filepath.Base(path) == "profiles.yaml" {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			g, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Build(g, Options{})
			if err != nil {
				t.Fatalf("%v\n%s", err, mustMarshal(t, g))
			}
			if !reflect.DeepEqual(viewOf(b), viewOf(g)) {
				t.Errorf("nodes differ:\n%+v\n%+v", viewOf(b), viewOf(g))
			}
			if !reflect.DeepEqual(b.Inputs, g.Inputs) && len(g.Inputs) > 0 {
				for i := range g.Inputs {
					bi, gi := *b.Inputs[i], *g.Inputs[i]
					bi.Line, gi.Line = 0, 0
					if bi != gi {
						t.Errorf("input %d: %+v, want %+v", i, bi, gi)
					}
				}
			}
			for name, p := range g.Providers {
				q := b.Providers[name]
				if q == nil || (p.Sim == nil) != (q.Sim == nil) {
					t.Errorf("provider %s: %+v, want %+v", name, q, p)
					continue
				}
				// Every field but where it is in the file.
				pv, qv := *p, *q
				pv.Line, qv.Line = 0, 0
				if !reflect.DeepEqual(qv, pv) {
					t.Errorf("provider %s: %+v, want %+v", name, qv, pv)
				}
			}
			if again := mustMarshal(t, b); string(again) != string(b.Source) {
				t.Errorf("not a fixpoint:\n%s\n---\n%s", b.Source, again)
			}
		})
	}
}

func mustMarshal(t *testing.T, g *Graph) []byte {
	t.Helper()
	b, err := g.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A graph built in code is checked like a file: every problem, by node and field.
func TestBuildInCode(t *testing.T) {
	three := 3
	g, err := Build(&Graph{
		Name:      "code",
		Inputs:    []*Input{{Name: "topic", Default: "true", HasDefault: true}, {Name: "n", Type: InputInt, Required: true}},
		Providers: map[string]*ProviderSpec{"p": {Kind: ProviderKindSim}},
		Nodes: []*Node{
			{ID: "a", Prompt: "123"},
			{ID: "b", Needs: []string{"a"}, Prompt: `{{ output "a" }} on {{ input "topic" }} x{{ input "n" }}`, Retries: &three, Timeout: 90 * time.Second},
		},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := g.ResolveInputs(map[string]string{"n": "2"})
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := g.Node("b").Render(Values{Outputs: map[string]string{"a": "out"}, Inputs: in})
	if want := "out on true x2"; err != nil || p != want {
		t.Errorf("rendered %q, %v; want %q", p, err, want)
	}
	if g.Node("a").Prompt != "123" || g.Node("b").Provider != "p" || *g.Node("b").Retries != 3 || g.Order()[1] != "b" {
		t.Errorf("built graph: %+v", viewOf(g))
	}

	_, err = Build(&Graph{Name: "bad", Providers: map[string]*ProviderSpec{"p": {Kind: "nope"}},
		Nodes: []*Node{{ID: "a", Needs: []string{"b"}, Prompt: "{{ .Outputs.c }}"}}}, Options{})
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v", err)
	}
	// No line of the generated file: the Go values are the place to look.
	if !ge.InCode || strings.Contains(err.Error(), "graph.yaml") || !strings.HasPrefix(err.Error(), `graph "bad": `) {
		t.Errorf("a graph built in code reports a generated file:\n%v", err)
	}
	for _, want := range []string{`provider "p": unknown kind "nope"`, `node "a": needs "b", which is not defined`, `node "a": prompt uses the output of "c"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := Build(&Graph{Name: "x", Providers: map[string]*ProviderSpec{"p": {Kind: "mine"}}, Nodes: []*Node{{ID: "a", Prompt: "x"}}},
		Options{Kinds: []string{"mine"}}); err != nil {
		t.Errorf("a registered kind: %v", err)
	}
}
