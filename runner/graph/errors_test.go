package graph

import (
	"errors"
	"strings"
	"testing"
)

// Issue 44: each kind of problem a program may want to tell apart is a
// sentinel errors.Is finds through the *Error, from a file and from a graph
// built in code alike; the others of the same graph are not.
func TestProblemSentinels(t *testing.T) {
	sentinels := []error{ErrUnknownKind, ErrUnknownField, ErrUnknownProvider, ErrUnknownNode, ErrDuplicateNode, ErrCycle, ErrMissingField}
	const providers = "providers:\n  s: {kind: sim}\n"
	for _, tc := range []struct {
		name, src string
		want      error
	}{
		{"unknown kind", "name: g\nproviders:\n  s: {kind: simm}\nnodes:\n  - {id: a, provider: s, prompt: p}\n", ErrUnknownKind},
		{"field of another kind", "name: g\nproviders:\n  s: {kind: sim, binary: x}\nnodes:\n  - {id: a, provider: s, prompt: p}\n", ErrUnknownField},
		{"unknown field", "name: g\n" + providers + "nodes:\n  - {id: a, provider: s, promt: p}\n", ErrUnknownField},
		{"unknown provider", "name: g\n" + providers + "nodes:\n  - {id: a, provider: t, prompt: p}\n", ErrUnknownProvider},
		{"unknown fallback", "name: g\n" + providers + "nodes:\n  - {id: a, provider: s, fallback: [t], prompt: p}\n", ErrUnknownProvider},
		{"unknown need", "name: g\n" + providers + "nodes:\n  - {id: a, provider: s, prompt: p, needs: [b]}\n", ErrUnknownNode},
		{"duplicate", "name: g\n" + providers + "nodes:\n  - {id: a, provider: s, prompt: p}\n  - {id: a, provider: s, prompt: q}\n", ErrDuplicateNode},
		{"cycle", "name: g\n" + providers + "nodes:\n  - {id: a, provider: s, prompt: p, needs: [b]}\n  - {id: b, provider: s, prompt: q, needs: [a]}\n", ErrCycle},
		{"missing prompt", "name: g\n" + providers + "nodes:\n  - {id: a, provider: s}\n", ErrMissingField},
		{"missing kind", "name: g\nproviders:\n  s: {model: m}\nnodes:\n  - {id: a, provider: s, prompt: p}\n", ErrMissingField},
		{"missing name", providers + "nodes:\n  - {id: a, provider: s, prompt: p}\n", ErrMissingField},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("g.yaml", []byte(tc.src))
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v: not %v", err, tc.want)
			}
			for _, s := range sentinels {
				if s != tc.want && errors.Is(err, s) {
					t.Errorf("%v: also %v", err, s)
				}
			}
		})
	}

	// Built in code: the same sentinel, and the message names the node and
	// field, never a line of a file the caller never saw.
	g := &Graph{Name: "coded", Providers: map[string]*ProviderSpec{"s": {Name: "s", Kind: "mine"}},
		Nodes: []*Node{{ID: "a", Provider: "s", Prompt: "p", Needs: []string{"zz"}}}}
	_, err := Build(g, Options{})
	if !errors.Is(err, ErrUnknownKind) || !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("built in code: %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "graph.yaml") || !strings.Contains(msg, `node "a"`) || !strings.Contains(msg, "needs") {
		t.Errorf("built in code: %q, want the node and field, no file", msg)
	}
	if _, err := Build(g, Options{Kinds: []string{"mine"}}); errors.Is(err, ErrUnknownKind) {
		t.Errorf("a registered kind: %v", err)
	}
}

// AnyKind reads a graph whatever its kinds (a journaled graph, in a program
// that only reads it); a built-in kind's fields are still checked.
func TestAnyKind(t *testing.T) {
	src := "name: g\nproviders:\n  s: {kind: mine, model: m}\nnodes:\n  - {id: a, provider: s, prompt: p}\n"
	if _, err := Parse("g.yaml", []byte(src)); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("without AnyKind: %v", err)
	}
	g, err := ParseWith("g.yaml", []byte(src), Options{AnyKind: true})
	if err != nil || g.Providers["s"].Kind != "mine" {
		t.Fatalf("AnyKind: %v", err)
	}
	bad := "name: g\nproviders:\n  s: {kind: mine, binary: x}\nnodes:\n  - {id: a, provider: s, prompt: p}\n"
	if _, err := ParseWith("g.yaml", []byte(bad), Options{AnyKind: true}); !errors.Is(err, ErrUnknownField) {
		t.Errorf("AnyKind with a harness field on a custom kind: %v", err)
	}
}

// A missing required input is a *MissingInputError that names the input and
// not how to pass it: that is the caller's (a CLI flag, an API field).
func TestMissingInputError(t *testing.T) {
	g, err := Parse("g.yaml", []byte("name: g\ninputs:\n  goal: {required: true, description: What to study}\nproviders:\n  s: {kind: sim}\nnodes:\n  - {id: a, provider: s, prompt: p}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = g.CheckInputs(nil, 1<<20)
	mi, ok := errors.AsType[*MissingInputError](err)
	if !ok || mi.Name != "goal" || mi.Description != "What to study" {
		t.Fatalf("%v: no *MissingInputError for goal", err)
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("%q names a flag", err)
	}
}
