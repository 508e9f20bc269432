package yamlnode

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"
)

func doc(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var d yaml.Node
	if err := yaml.Unmarshal([]byte(src), &d); err != nil {
		t.Fatal(err)
	}
	return d.Content[0]
}

func TestPairsApplyMergeKeysOwnKeysWin(t *testing.T) {
	root := doc(t, "base: &b {a: 1, b: 2}\nother: &o {c: 3}\nm: {<<: [*b, *o], b: 9}\n")
	m := Resolve(root.Content[5])
	got := map[string]string{}
	var order []string
	for _, kv := range Pairs(m) {
		got[kv[0].Value] = kv[1].Value
		order = append(order, kv[0].Value)
	}
	if len(got) != 3 || got["a"] != "1" || got["b"] != "9" || got["c"] != "3" || order[0] != "b" {
		t.Errorf("pairs %v (order %v): want own b=9 first, then merged a=1, c=3", got, order)
	}
}

func TestGotNamesValuesAsAPersonWould(t *testing.T) {
	root := doc(t, "s: many\nn: ~\ne:\nl: [1]\nm: {a: 1}\na: &x 1\nr: *x\n")
	want := map[string]string{"s": `"many"`, "n": "nothing", "e": "nothing", "l": "a list", "m": "a mapping", "a": `"1"`}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i].Value, root.Content[i+1]
		if k == "r" {
			if Got(v) != "an alias" || Got(Resolve(v)) != `"1"` {
				t.Errorf("alias: %s, resolved %s", Got(v), Got(Resolve(v)))
			}
			continue
		}
		if g := Got(v); g != want[k] {
			t.Errorf("%s: Got = %s, want %s", k, g, want[k])
		}
	}
}

func TestResolveStopsAtItsBound(t *testing.T) {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: "end"}
	for range maxAliases + 3 {
		n = &yaml.Node{Kind: yaml.AliasNode, Alias: n}
	}
	if r := Resolve(n); r.Kind != yaml.AliasNode {
		t.Errorf("Resolve followed %d aliases; it should stop at %d", maxAliases+3, maxAliases)
	}
}

type lineProblem struct{ line int }

func (p *lineProblem) Error() string { return "f.yaml:" + string(rune('0'+p.line)) + ": bad" }

// A list of problems says each on a line, and errors.As finds each.
func TestLinesAndErrors(t *testing.T) {
	ps := []*lineProblem{{2}, {5}}
	if got, want := Lines(ps), "f.yaml:2: bad\nf.yaml:5: bad"; got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
	if Lines([]*lineProblem{}) != "" || len(Errors([]*lineProblem(nil))) != 0 {
		t.Error("no problems are not an empty message and an empty list")
	}
	err := error(joined(ps))
	for _, p := range ps {
		if !errors.Is(err, p) {
			t.Errorf("errors.Is does not find line %d's problem", p.line)
		}
	}
	var first *lineProblem
	if !errors.As(err, &first) || first.line != 2 {
		t.Errorf("errors.As found %v, want the first problem", first)
	}
}

type joined []*lineProblem

func (j joined) Error() string   { return Lines(j) }
func (j joined) Unwrap() []error { return Errors(j) }
