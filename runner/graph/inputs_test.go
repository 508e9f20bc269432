package graph

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// graphInputs declares goal (required, line 4), depth (int with a default,
// line 5), strict (bool, line 6) and spec (a file, line 7).
const graphInputs = "name: t\n" +
	"inputs:\n" +
	"  # the inputs block is on line 2\n" +
	"  goal: {description: What to study}\n" +
	"  depth: {type: int, default: 3}\n" +
	"  strict: {type: bool, required: false}\n" +
	"  spec: {type: file, required: false}\n" +
	"providers:\n  p: {kind: sim}\nnodes:\n" +
	"  - {id: a, prompt: 'Study {{ input \"goal\" }} to depth {{ .Inputs.depth }}{{ with .Inputs.strict }}, strictly {{ . }}{{ end }}'}\n"

func TestResolveInputs(t *testing.T) {
	g, err := Parse("g.yaml", []byte(graphInputs))
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "spec.md")
	if err := os.WriteFile(spec, []byte("the spec\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		given map[string]string
		want  map[string]string
		err   string // "" = no error; else every line must be in the message
	}{
		{"defaults", map[string]string{"goal": "x"}, map[string]string{"goal": "x", "depth": "3"}, ""},
		{"canonical forms", map[string]string{"goal": "x", "depth": " 07 ", "strict": "T"}, map[string]string{"goal": "x", "depth": "7", "strict": "true"}, ""},
		{"file content", map[string]string{"goal": "x", "spec": spec}, map[string]string{"goal": "x", "depth": "3", "spec": "the spec\n"}, ""},
		{"missing", map[string]string{}, nil, `g.yaml:4: missing input "goal" (What to study)`},
		{"unknown", map[string]string{"goal": "x", "gaol": "y"}, nil, `g.yaml:2: unknown input "gaol" (declared: goal, depth, strict, spec) (did you mean "goal"?)`},
		{"bad int", map[string]string{"goal": "x", "depth": "deep"}, nil, `g.yaml:5: input "depth": "deep" is not a whole number`},
		{"bad bool", map[string]string{"goal": "x", "strict": "sure"}, nil, `g.yaml:6: input "strict": "sure" is not true or false`},
		{"no file", map[string]string{"goal": "x", "spec": spec + ".gone"}, nil, `g.yaml:7: input "spec": stat ` + spec + ".gone: no such file"},
		{"every problem", map[string]string{"depth": "x", "nope": "y"}, nil, "g.yaml:2: unknown input \"nope\"\ng.yaml:4: missing input \"goal\"\ng.yaml:5: input \"depth\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := g.ResolveInputs(c.given)
			if c.err != "" {
				var ge *Error
				if !errors.As(err, &ge) {
					t.Fatalf("err = %v (%T), want *Error", err, err)
				}
				for _, line := range strings.Split(c.err, "\n") {
					if !strings.Contains(err.Error(), line) {
						t.Errorf("error:\n%v\nlacks %q", err, line)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
	if _, err := mustParse(t, "name: t\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n").ResolveInputs(map[string]string{"goal": "x"}); err == nil ||
		!strings.Contains(err.Error(), `g.yaml:1: unknown input "goal": the graph declares no inputs`) {
		t.Errorf("no inputs block: %v", err)
	}
}

func mustParse(t *testing.T, src string) *Graph {
	t.Helper()
	g, err := Parse("g.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRenderInputsAndFailed(t *testing.T) {
	g := mustParse(t, graphInputs+
		"  - {id: b, needs: [a], continue_on_failure: true, timeout: 90s, prompt: x}\n"+
		"  - {id: c, needs: [b], prompt: '{{ if failed \"b\" }}b failed: [{{ output \"b\" }}]{{ else }}b: {{ .Outputs.b }}{{ end }} for {{ input \"goal\" }}'}\n")
	in, err := g.ResolveInputs(map[string]string{"goal": "sockets", "strict": "1"})
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := g.Node("a").Render(Values{Inputs: in})
	if want := "Study sockets to depth 3, strictly true"; err != nil || p != want {
		t.Errorf("a: %q, %v; want %q", p, err, want)
	}
	if b := g.Node("b"); b.Timeout != 90*time.Second || !b.ContinueOnFailure {
		t.Errorf("b: timeout %v, continue_on_failure %v", b.Timeout, b.ContinueOnFailure)
	}
	c := g.Node("c")
	_, p, err = c.Render(Values{Outputs: map[string]string{"b": ""}, Failed: map[string]bool{"b": true}, Inputs: in})
	if want := "b failed: [] for sockets"; err != nil || p != want {
		t.Errorf("c after b failed: %q, %v; want %q", p, err, want)
	}
	_, p, err = c.Render(Values{Outputs: map[string]string{"b": "fine"}, Inputs: in})
	if want := "b: fine for sockets"; err != nil || p != want {
		t.Errorf("c after b: %q, %v; want %q", p, err, want)
	}
	if _, _, err := c.Render(Values{Outputs: map[string]string{"b": "fine"}}); err == nil || !strings.Contains(err.Error(), `no input "goal" was given`) {
		t.Errorf("render without inputs: %v", err)
	}
}

func TestParseInputsAndNodeControlsRejects(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		want      string
	}{
		{"inputs not a mapping", "name: t\ninputs: [goal]\n" + graphProvNodes, 2, "inputs must be a mapping"},
		{"bad input name", "name: t\ninputs:\n  my-goal: {}\n" + graphProvNodes, 3, `input "my-goal": bad input name`},
		{"input not a mapping", "name: t\ninputs:\n  goal: [x]\n" + graphProvNodes, 3, "an input must be a mapping"},
		{"unknown input field", "name: t\ninputs:\n  goal: {descripton: x}\n" + graphProvNodes, 3, `unknown field "descripton" (did you mean "description"?)`},
		{"required with default", "name: t\ninputs:\n  goal:\n    required: true\n    default: x\n" + graphProvNodes, 5, "a required input has no default"},
		{"bad int default", "name: t\ninputs:\n  n: {type: int, default: lots}\n" + graphProvNodes, 3, `default: "lots" is not a whole number`},
		{"required not a bool", "name: t\ninputs:\n  n: {required: yes please}\n" + graphProvNodes, 3, "required must be true or false"},
		{"input used, none declared", graphHead + "  - {id: a, prompt: '{{ input \"goal\" }}'}\n", 5, `prompt reads input "goal", which is not declared under inputs:`},
		{".Inputs not declared", "name: t\ninputs:\n  goal:\n" + graphProvNodesPrompt("{{ .Inputs.gaol }}"), 7, `reads input "gaol", which is not declared under inputs: (did you mean "goal"?)`},
		{"computed input", "name: t\ninputs:\n  goal:\n" + graphProvNodesPrompt("{{ input .Inputs.goal }}"), 7, "input needs a name in quotes"},
		{"failed of a non-need", graphHead + "  - {id: a, prompt: x}\n  - {id: b, prompt: '{{ failed \"a\" }}'}\n", 6, `uses the output of "a", which is not in needs`},
		{"zero timeout", graphHead + "  - {id: a, prompt: x, timeout: 0s}\n", 5, "timeout must be > 0"},
		{"bad env name", "name: t\nproviders:\n  h: {kind: harness}\nnodes:\n  - {id: a, prompt: x, env: {1X: y}}\n", 5, `env: "1X" is not a valid environment variable name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(c.src))
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("accepted or not an *Error: %v", err)
			}
			want := "t.yaml:" + itoa(c.line) + ": "
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				found = found || strings.HasPrefix(line, want) && strings.Contains(line, c.want)
			}
			if !found {
				t.Errorf("want a line %q...%q, got:\n%v", want, c.want, err)
			}
		})
	}
}

const graphProvNodes = "providers:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n"

func graphProvNodesPrompt(prompt string) string {
	return "providers:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: '" + prompt + "'}\n"
}

func itoa(n int) string { return strconv.Itoa(n) }
