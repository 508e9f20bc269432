package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// graphHead is a graph's first four lines; the first node is on line 5.
const graphHead = "name: t\nproviders:\n  p: {kind: sim}\nnodes:\n"

// graphTwoNodes: node a on line 5, node b's entry on line 6.
func graphTwo(b string) string { return graphHead + "  - {id: a, prompt: x}\n" + b }

func TestParseGraphRejects(t *testing.T) {
	cases := []struct {
		name string
		src  string
		line int
		want string
	}{
		// YAML itself
		{"yaml syntax", "name: t\nnodes: [\n", 2, "invalid YAML: did not find expected node content"},
		{"yaml tab", "name: t\n\tnodes: x\n", 2, "invalid YAML"},
		{"empty file", "", 0, "the file is empty"},
		{"only comments", "# nothing here\n", 0, "the file is empty"},
		{"not a mapping", "- a\n- b\n", 1, "a graph file must be a YAML mapping"},
		{"two documents", graphHead + "  - {id: a, prompt: x}\n---\nname: u\n", 7, "a graph file holds one YAML document"},
		{"non-string key", graphHead + "  - {id: a, prompt: x, [k]: v}\n", 5, "field names must be plain strings"},
		{"billion laughs", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n", 0, "the file uses too much aliasing"},
		{"merge of a scalar", graphHead + "  - {id: a, prompt: x, <<: 3}\n", 5, "merge key (<<) must merge a mapping"},

		// top level
		{"unknown top field", "name: t\ndescr: x\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 2, `unknown field "descr" (known fields: name, profile, profiles, inputs, providers, nodes, cache, cache_ttl)`},
		{"misspelt name", "nmae: t\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 1, `unknown field "nmae" (did you mean "name"?)`},
		{"duplicate top field", "name: t\nname: u\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 2, `field "name" appears twice (first at line 1)`},
		{"missing name", "providers:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 1, "missing name"},
		{"empty name", "name: ' '\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 1, "name is empty"},
		{"name not a string", "name: [a]\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 1, "name must be a string"},
		{"empty profile", "name: t\nprofile: ''\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 2, "profile is empty"},
		{"empty profiles", "name: t\nprofiles: ''\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 2, "profiles is empty"},
		{"no nodes field", "name: t\nproviders:\n  p: {kind: sim}\n", 1, "no nodes"},
		{"empty nodes", "name: t\nproviders:\n  p: {kind: sim}\nnodes: []\n", 4, "no nodes"},
		{"null nodes", "name: t\nproviders:\n  p: {kind: sim}\nnodes:\n", 4, "no nodes"},
		{"nodes not a list", "name: t\nproviders:\n  p: {kind: sim}\nnodes: x\n", 4, "nodes must be a list"},
		{"no providers", "name: t\nnodes:\n  - {id: a, prompt: x}\n", 1, "no providers defined"},
		{"null providers", "name: t\nproviders:\nnodes:\n  - {id: a, prompt: x}\n", 2, "no providers defined"},
		{"providers not a mapping", "name: t\nproviders: [a]\nnodes:\n  - {id: a, prompt: x}\n", 2, "providers must be a mapping"},

		// providers
		{"unknown kind", "name: t\nproviders:\n  p: {kind: bedrock}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": unknown kind "bedrock" (want one of sim, openai, responses, harness, anthropic, gemini)`},
		{"missing kind", "name: t\nproviders:\n  p: {model: x}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": missing kind`},
		{"unknown continuation", "name: t\nproviders:\n  p: {kind: openai, model: m, continuation: prefil}\nnodes:\n  - {id: a, prompt: x}\n", 3, `continuation must be one of none, prefix, continue_final_message, assistant_last, not "prefil"`},
		{"prefill on openai", "name: t\nproviders:\n  p: {kind: openai, model: m, continuation: prefill}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": continuation prefill is for kind anthropic (a prefilled assistant turn of the Messages API), not kind "openai"`},
		{"chat form on anthropic", "name: t\nproviders:\n  p: {kind: anthropic, model: m, continuation: prefix}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": kind anthropic continues a partial answer only by prefill: continuation must be none or prefill, not "prefix"`},
		{"anthropic without model", "name: t\nproviders:\n  p: {kind: anthropic}\nnodes:\n  - {id: a, prompt: x}\n", 5, `node "a": no model: set model on the node or on provider "p"`},
		{"continuation of a harness", "name: t\nproviders:\n  p: {kind: harness, continuation: prefix}\nnodes:\n  - {id: a, prompt: x}\n", 3, `field "continuation" is not valid for kind "harness"`},
		{"continuation of a sim responses", "name: t\nproviders:\n  p: {kind: sim, api: responses, continuation: prefix}\nnodes:\n  - {id: a, prompt: x}\n", 3, "continuation is for chat servers"},
		{"null provider", "name: t\nproviders:\n  p:\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": missing kind`},
		{"misspelt kind", "name: t\nproviders:\n  p: {knd: sim}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": unknown field "knd" (did you mean "kind"?)`},
		{"unknown provider field", "name: t\nproviders:\n  p: {kind: sim, colour: red}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": unknown field "colour" (known fields: api, continuation, fallback, kind, limits, max_output_bytes, model, sim)`},
		{"sim on openai", "name: t\nproviders:\n  p:\n    kind: openai\n    model: m\n    sim: {}\nnodes:\n  - {id: a, prompt: x}\n", 6, `provider "p": field "sim" is not valid for kind "openai" (it is for sim)`},
		{"base_url on sim", "name: t\nproviders:\n  p: {kind: sim, base_url: 'http://x'}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": field "base_url" is not valid for kind "sim" (it is for openai, responses, anthropic, gemini)`},
		{"command on openai", "name: t\nproviders:\n  p: {kind: openai, model: m, command: codex}\nnodes:\n  - {id: a, prompt: x}\n", 3, `field "command" is not valid for kind "openai" (it is for harness)`},
		{"api on responses", "name: t\nproviders:\n  p: {kind: responses, model: m, api: chat}\nnodes:\n  - {id: a, prompt: x}\n", 3, `field "api" is not valid for kind "responses"`},
		{"bad base_url", "name: t\nproviders:\n  p: {kind: openai, model: m, base_url: 'localhost:8080'}\nnodes:\n  - {id: a, prompt: x}\n", 3, "base_url must be an http:// or https:// URL with a host"},
		{"api key in api_key_env", "name: t\nproviders:\n  p: {kind: openai, model: m, api_key_env: sk-abc123}\nnodes:\n  - {id: a, prompt: x}\n", 3, "api_key_env must name an environment variable (like OPENAI_API_KEY), not hold the key itself"},
		{"bad sim api", "name: t\nproviders:\n  p: {kind: sim, api: grpc}\nnodes:\n  - {id: a, prompt: x}\n", 3, `api must be one of chat, responses, not "grpc"`},
		{"sim not a mapping", "name: t\nproviders:\n  p: {kind: sim, sim: fast}\nnodes:\n  - {id: a, prompt: x}\n", 3, "sim must be a mapping"},
		{"bad env name", "name: t\nproviders:\n  p: {kind: harness, harness: codex, env: {'A-B': x}}\nnodes:\n  - {id: a, prompt: x}\n", 3, `env: "A-B" is not a valid environment variable name`},
		{"env value not a string", "name: t\nproviders:\n  p: {kind: harness, env: {A: [x]}}\nnodes:\n  - {id: a, prompt: x}\n", 3, "env.A must be a string"},
		{"args not a list", "name: t\nproviders:\n  p: {kind: harness, args: -x}\nnodes:\n  - {id: a, prompt: x}\n", 3, "args must be a list"},
		{"empty harness", "name: t\nproviders:\n  p: {kind: harness, harness: ''}\nnodes:\n  - {id: a, prompt: x}\n", 3, "harness is empty"},
		{"empty command", "name: t\nproviders:\n  p: {kind: harness, command: ' '}\nnodes:\n  - {id: a, prompt: x}\n", 3, "command is empty"},
		{"empty workdir", "name: t\nproviders:\n  p: {kind: harness, workdir: ''}\nnodes:\n  - {id: a, prompt: x}\n", 3, "workdir is empty (omit it to run in the graph file's directory)"},
		{"empty state_dir", "name: t\nproviders:\n  p: {kind: harness, state_dir: ''}\nnodes:\n  - {id: a, prompt: x}\n", 3, "state_dir is empty (omit it for the default"},
		{"bad provider name", "name: t\nproviders:\n  'my provider': {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "my provider": bad provider name`},
		{"duplicate provider", "name: t\nproviders:\n  p: {kind: sim}\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 4, `provider "p" appears twice (first at line 3)`},
		{"provider not a mapping", "name: t\nproviders:\n  p: sim\nnodes:\n  - {id: a, prompt: x}\n", 3, `provider "p": a provider must be a mapping`},

		// nodes: fields
		{"node not a mapping", graphHead + "  - just a string\n", 5, "node #1: a node must be a mapping"},
		{"unknown node field", graphHead + "  - id: a\n    prompt: x\n    colour: red\n", 7, `node "a": unknown field "colour" (known fields: id, needs,`},
		{"misspelt prompt", graphHead + "  - id: a\n    promt: hi\n", 6, `node "a": unknown field "promt" (did you mean "prompt"?)`},
		{"duplicate node field", graphHead + "  - id: a\n    prompt: x\n    prompt: y\n", 7, `node "a": field "prompt" appears twice (first at line 6)`},
		{"missing id", graphHead + "  - prompt: x\n", 5, "node #1: missing id"},
		{"empty id", graphHead + "  - {id: '', prompt: x}\n", 5, "node #1: id is empty"},
		{"bad id", graphTwo("  - {id: 'b c', prompt: x}\n"), 6, `node #2: bad id "b c": use letters, digits, "_" and "-"`},
		{"duplicate id", graphHead + "  - {id: a, prompt: x}\n  - {id: b, prompt: x}\n  - {id: a, prompt: y}\n", 7, `node "a": duplicate node id "a" (lines 5 and 7)`},
		{"missing prompt", graphHead + "  - id: a\n", 5, `node "a": missing prompt`},
		{"empty prompt", graphHead + "  - {id: a, prompt: ''}\n", 5, `node "a": prompt is empty`},
		{"whitespace prompt", graphHead + "  - id: a\n    prompt: |\n      \n\n", 6, `node "a": prompt is empty`},
		{"null prompt", graphHead + "  - id: a\n    prompt:\n", 6, `node "a": prompt is empty`},
		{"prompt not a string", graphHead + "  - {id: a, prompt: [x]}\n", 5, "prompt must be a string"},
		{"bad side_effects", graphHead + "  - {id: a, prompt: x, side_effects: maybe}\n", 5, `side_effects must be one of none, idempotent, unsafe, not "maybe"`},
		{"bad reasoning_effort", graphHead + "  - {id: a, prompt: x, reasoning_effort: extreme}\n", 5, `reasoning_effort must be one of none, minimal, low, medium, high, not "extreme"`},
		{"negative retries", graphHead + "  - {id: a, prompt: x, retries: -1}\n", 5, "retries must be >= 0, got -1"},
		{"retries not a number", graphHead + "  - {id: a, prompt: x, retries: two}\n", 5, "retries must be a whole number"},
		{"retries fractional", graphHead + "  - {id: a, prompt: x, retries: 1.5}\n", 5, "retries must be a whole number"},
		{"zero max_output_tokens", graphHead + "  - {id: a, prompt: x, max_output_tokens: 0}\n", 5, "max_output_tokens must be > 0, got 0"},
		{"negative max_output_tokens", graphHead + "  - {id: a, prompt: x, max_output_tokens: -5}\n", 5, "max_output_tokens must be > 0, got -5"},
		{"zero max_output_bytes", graphHead + "  - {id: a, prompt: x, max_output_bytes: 0}\n", 5, "max_output_bytes must be > 0 (omit it for the profile's), got 0"},
		{"a size that is not one", graphHead + "  - {id: a, prompt: x, max_output_bytes: lots}\n", 5, `max_output_bytes must be a size like 32MiB or a number of bytes, not "lots"`},
		{"a list for a size", graphHead + "  - {id: a, prompt: x, max_output_bytes: [1]}\n", 5, "max_output_bytes must be a size like 32MiB or a number of bytes"},
		{"huge max_output_tokens", graphHead + "  - {id: a, prompt: x, max_output_tokens: 99999999999999999999}\n", 5, "max_output_tokens is out of range"},
		{"openai without model", "name: t\nproviders:\n  p: {kind: openai}\nnodes:\n  - {id: a, prompt: x}\n", 5, `node "a": no model: set model on the node or on provider "p"`},

		// nodes: providers
		{"unknown provider", graphHead + "  - {id: a, provider: local, prompt: x}\n", 5, `node "a": unknown provider "local" (defined: p)`},
		{"misspelt provider", "name: t\nproviders:\n  local: {kind: sim}\nnodes:\n  - {id: a, provider: loacl, prompt: x}\n", 5, `unknown provider "loacl" (defined: local) (did you mean "local"?)`},
		{"provider needed", "name: t\nproviders:\n  p: {kind: sim}\n  q: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n", 6, `node "a": no provider: the graph defines several (p, q), so the node must name one`},
		{"empty provider", graphHead + "  - {id: a, provider: '', prompt: x}\n", 5, `node "a": provider is empty`},

		// needs and cycles
		{"missing need", graphTwo("  - id: b\n    needs: [x]\n    prompt: y\n"), 7, `node "b": needs "x", which is not defined`},
		{"misspelt need", graphHead + "  - {id: plan, prompt: x}\n  - {id: b, needs: [plna], prompt: y}\n", 6, `needs "plna", which is not defined (did you mean "plan"?)`},
		{"self need", graphHead + "  - id: a\n    needs:\n      - a\n    prompt: x\n", 7, `node "a": needs itself`},
		{"need twice", graphTwo("  - {id: b, needs: [a, a], prompt: y}\n"), 6, `node "b": needs "a" more than once`},
		{"needs not a list", graphTwo("  - {id: b, needs: a, prompt: y}\n"), 6, "needs must be a list, like [a, b]"},
		{"need not a string", graphTwo("  - id: b\n    needs:\n      - [a]\n    prompt: y\n"), 8, "needs: every entry must be a string"},
		{"cycle of two", graphHead + "  - {id: a, needs: [b], prompt: x}\n  - {id: b, needs: [a], prompt: y}\n", 5, "cycle: a -> b -> a (each node needs the next)"},
		{"cycle of three", graphHead + "  - {id: c, needs: [a], prompt: x}\n  - {id: a, needs: [b], prompt: x}\n  - {id: b, needs: [c], prompt: x}\n", 5, "cycle: c -> a -> b -> c"},
		{"cycle line is the need", graphHead + "  - id: a\n    needs:\n      - b\n    prompt: x\n  - {id: b, needs: [a], prompt: y}\n", 7, "cycle: a -> b -> a"},
		{"cycle with a dependent", graphHead + "  - {id: a, needs: [b], prompt: x}\n  - {id: b, needs: [a], prompt: y}\n  - {id: d, needs: [a], prompt: z}\n", 5, "cycle: a -> b -> a"},
		{"knot of cycles", graphHead + "  - {id: a, needs: [b, c], prompt: x}\n  - {id: b, needs: [a], prompt: x}\n  - {id: c, needs: [a], prompt: x}\n", 5, "cycle: a -> b -> a (each node needs the next; also caught in it: c)"},

		// templates
		{"template syntax", graphHead + "  - id: a\n    prompt: |\n      line one\n      {{ if }}\n", 8, `node "a": prompt is not a valid template: missing value for if`},
		{"template unclosed", graphHead + "  - id: a\n    prompt: |\n      line one\n      {{ .Outputs.x\n", 8, "prompt is not a valid template"},
		{"misspelt output func", graphHead + "  - {id: a, prompt: '{{ ouput \"x\" }}'}\n", 5, `function "ouput" not defined (did you mean "output"?)`},
		{"hyphen id after .Outputs", graphHead + "  - {id: my-plan, prompt: x}\n  - {id: b, needs: [my-plan], prompt: '{{ .Outputs.my-plan }}'}\n", 6, `write {{ output "my-id" }}`},
		{"output not in needs", graphTwo("  - {id: b, prompt: '{{ output \"a\" }}'}\n"), 6, `node "b": prompt uses the output of "a", which is not in needs (add it to needs)`},
		{"field not in needs", graphTwo("  - {id: b, prompt: '{{ .Outputs.a }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"index not in needs", graphTwo("  - {id: b, prompt: '{{ index .Outputs \"a\" }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"root var not in needs", graphTwo("  - {id: b, prompt: '{{ $.Outputs.a }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"chain not in needs", graphTwo("  - {id: b, prompt: '{{ (.Outputs).a }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"nested not in needs", graphTwo("  - {id: b, prompt: '{{ if true }}{{ with \"z\" }}{{ printf \"%s\" (output \"a\") }}{{ end }}{{ end }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"else-with not in needs", graphTwo("  - {id: b, prompt: '{{ with \"z\" }}{{ . }}{{ else with .Outputs.a }}{{ . }}{{ end }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"define not in needs", graphTwo("  - {id: b, prompt: '{{ define \"t\" }}{{ .Outputs.a }}{{ end }}{{ template \"t\" . }}'}\n"), 6, `prompt uses the output of "a", which is not in needs`},
		{"undefined node in template", graphHead + "  - {id: a, prompt: '{{ output \"ghost\" }}'}\n", 5, `prompt uses the output of "ghost", which is not in needs`},
		{"system not in needs", graphTwo("  - {id: b, system: '{{ .Outputs.a }}', prompt: y}\n"), 6, `node "b": system uses the output of "a", which is not in needs`},
		{"template line in block", graphTwo("  - id: b\n    prompt: |\n      first\n      second {{ output \"a\" }}\n"), 9, `prompt uses the output of "a"`},
		{"computed output id", graphTwo("  - {id: b, needs: [a], prompt: '{{ $x := \"a\" }}{{ output $x }}'}\n"), 6, "prompt: output needs a node id in quotes, like {{ output \"plan\" }}: a computed id cannot be checked against needs"},
		{"computed index id", graphTwo("  - {id: b, needs: [a], prompt: '{{ index .Outputs (printf \"%s\" \"a\") }}'}\n"), 6, "index .Outputs needs a node id in quotes"},
		{"outputs as a whole", graphTwo("  - {id: b, needs: [a], prompt: '{{ .Outputs }}'}\n"), 6, ".Outputs used as a whole cannot be checked against needs"},
		{"with outputs", graphTwo("  - {id: b, needs: [a], prompt: '{{ with .Outputs }}{{ .a }}{{ end }}'}\n"), 6, ".Outputs used as a whole"},
		{"outputs into variable", graphTwo("  - {id: b, needs: [a], prompt: '{{ $o := .Outputs }}{{ $o.a }}'}\n"), 6, ".Outputs used as a whole"},
		{"outputs into template", graphTwo("  - {id: b, needs: [a], prompt: '{{ define \"t\" }}{{ .a }}{{ end }}{{ template \"t\" .Outputs }}'}\n"), 6, ".Outputs used as a whole"},
		{"piped output", graphTwo("  - {id: b, needs: [a], prompt: '{{ \"a\" | output }}'}\n"), 6, `output takes one node id in quotes`},
		{"output without id", graphTwo("  - {id: b, needs: [a], prompt: '{{ output }}'}\n"), 6, `output takes one node id in quotes`},
		{"output as a value", graphTwo("  - {id: b, needs: [a], prompt: '{{ printf \"%s\" output }}'}\n"), 6, `output must be called with a node id in quotes`},
		{"unknown data field", graphHead + "  - {id: a, prompt: '{{ .Output.a }}'}\n", 5, `prompt: unknown field .Output (a template can use .Outputs.<id>, output "id", .Inputs.<name>, input "name" and failed "id")`},
		{"unknown root field", graphHead + "  - {id: a, prompt: '{{ with \"s\" }}{{ $.Inptus }}{{ end }}'}\n", 5, "unknown field .Inptus"},
		{"undefined template", graphHead + "  - {id: a, prompt: '{{ template \"nope\" . }}'}\n", 5, `prompt: template "nope" is not defined`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse("t.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			if g != nil {
				t.Errorf("a graph was returned with the error")
			}
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			if len(ge.Problems) != 1 {
				t.Errorf("want exactly one problem, got %d:\n%v", len(ge.Problems), err)
			}
			loc := "t.yaml: "
			if tc.line > 0 {
				loc = fmt.Sprintf("t.yaml:%d: ", tc.line)
			}
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, loc) && strings.Contains(line, tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("want a line %q...%q, got:\n%v", loc, tc.want, err)
			}
		})
	}
}

func TestParseGraphCollectsEveryProblem(t *testing.T) {
	src := `name: t
providers:
  p: {kind: sim}
  q: {kind: nope}
nodes:
  - id: a
    promt: x
  - id: b
    needs: [ghost, a]
    prompt: "{{ output \"c\" }}"
    retries: -2
  - id: a
    prompt: y
`
	_, err := Parse("g.yaml", []byte(src))
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("want *Error, got %v", err)
	}
	want := []string{
		`g.yaml:4: provider "q": unknown kind "nope" (want one of sim, openai, responses, harness, anthropic, gemini)`,
		`g.yaml:6: node "a": no provider: the graph defines several (p, q), so the node must name one`,
		`g.yaml:7: node "a": unknown field "promt" (did you mean "prompt"?)`,
		`g.yaml:8: node "b": no provider: the graph defines several (p, q), so the node must name one`,
		`g.yaml:9: node "b": needs "ghost", which is not defined`,
		`g.yaml:10: node "b": prompt uses the output of "c", which is not in needs (add it to needs)`,
		`g.yaml:11: node "b": retries must be >= 0, got -2`,
		`g.yaml:12: node "a": no provider: the graph defines several (p, q), so the node must name one`,
		`g.yaml:12: node "a": duplicate node id "a" (lines 6 and 12)`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range ge.Problems {
		if p.Msg == "" {
			t.Errorf("problem without message: %+v", p)
		}
	}
	if ge.Problems[2].Node != "a" || ge.Problems[2].Field != "promt" {
		t.Errorf("problem fields: %+v", ge.Problems[2])
	}
}

func TestParseGraphCyclesReportedOnce(t *testing.T) {
	src := graphHead + `  - {id: a, needs: [b], prompt: x}
  - {id: b, needs: [c], prompt: x}
  - {id: c, needs: [a, b], prompt: x}
  - {id: d, needs: [c], prompt: x}
  - {id: e, needs: [f], prompt: x}
  - {id: f, needs: [e, d], prompt: x}
  - {id: g, needs: [f], prompt: x}
`
	_, err := Parse("c.yaml", []byte(src))
	want := "c.yaml:5: cycle: a -> b -> c -> a (each node needs the next)\n" +
		"c.yaml:9: cycle: e -> f -> e (each node needs the next)"
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestParseGraphNoSecretsInMessages(t *testing.T) {
	src := "name: t\nproviders:\n  p: {kind: openai, model: m, api_key_env: sk-SECRET123, base_url: 'ftp://u:hunter2@x'}\nnodes:\n  - {id: a, prompt: x}\n"
	_, err := Parse("t.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	if strings.Contains(err.Error(), "SECRET123") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("message echoes a secret: %v", err)
	}
}

func TestParseGraphFields(t *testing.T) {
	src := `name: demo
profile: ci
profiles: conf/profiles.yaml
providers:
  local:
    kind: sim
    model: sim-1
    sim: {seed: 7}
  remote:
    kind: openai
    base_url: http://127.0.0.1:8080/v1
    api_key_env: MY_KEY
    model: gpt-x
    continuation: continue_final_message
  bg:
    kind: responses
    model: gpt-y
    api_key_env: OTHER_KEY
  agent:
    kind: harness
    harness: codex
    command: bin/codex
    args: ["-c", "x=y"]
    env: {SIM_KEY: x}
    workdir: work
  agent2:
    kind: harness
    harness: ./descriptors/h.yaml
    command: codex
nodes:
  - id: plan
    provider: local
    system: You plan.
    prompt: Plan it.
    reasoning_effort: high
    max_output_tokens: 400
    retries: 0
  - id: write
    needs: [plan]
    provider: remote
    model: gpt-z
    prompt: "Write {{ .Outputs.plan }}"
    side_effects: idempotent
  - id: act
    needs: [write, plan]
    provider: agent
    prompt: "{{ output \"write\" }}"
  - id: act2
    provider: agent2
    prompt: go
    side_effects: none
  - id: bgn
    provider: bg
    prompt: go
`
	path := filepath.Join("some", "dir", "demo.yaml")
	g, err := Parse(path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs(filepath.Join("some", "dir"))
	sum := sha256.Sum256([]byte(src))
	if g.Name != "demo" || g.Profile != "ci" || g.Path != path || string(g.Source) != src || g.Hash != hex.EncodeToString(sum[:]) {
		t.Errorf("graph header: %+v", g)
	}
	if want := filepath.Join(dir, "conf", "profiles.yaml"); g.ProfilesPath != want {
		t.Errorf("ProfilesPath = %q, want %q", g.ProfilesPath, want)
	}
	if len(g.Providers) != 5 {
		t.Fatalf("providers: %v", g.Providers)
	}
	local := g.Providers["local"]
	if local.Name != "local" || local.Kind != ProviderKindSim || local.API != SimAPIChat || local.Model != "sim-1" || local.Line != 5 {
		t.Errorf("local: %+v", local)
	}
	if local.Sim == nil || local.Sim.Seed != 7 || len(local.Sim.Faults) != 0 {
		t.Errorf("local.Sim: %+v", local.Sim)
	}
	remote := g.Providers["remote"]
	if remote.Kind != ProviderKindOpenAI || remote.BaseURL != "http://127.0.0.1:8080/v1" || remote.APIKeyEnv != "MY_KEY" || remote.API != "" ||
		remote.Continuation != "continue_final_message" {
		t.Errorf("remote: %+v", remote)
	}
	agent := g.Providers["agent"]
	if agent.Harness != "codex" || agent.Command != filepath.Join(dir, "bin", "codex") ||
		!slices.Equal(agent.Args, []string{"-c", "x=y"}) || !reflect.DeepEqual(agent.Env, map[string]string{"SIM_KEY": "x"}) ||
		agent.WorkDir != filepath.Join(dir, "work") {
		t.Errorf("agent: %+v", agent)
	}
	if a2 := g.Providers["agent2"]; a2.Harness != filepath.Join(dir, "descriptors", "h.yaml") || a2.Command != "codex" || a2.WorkDir != "" {
		t.Errorf("agent2: %+v", a2)
	}

	plan := g.Node("plan")
	if plan == nil || plan.Line != 31 || plan.Provider != "local" || plan.Model != "sim-1" || plan.System != "You plan." ||
		plan.ReasoningEffort != "high" || plan.MaxOutputTokens != 400 || plan.Retries == nil || *plan.Retries != 0 ||
		plan.SideEffects != SideNone || len(plan.Needs) != 0 {
		t.Errorf("plan: %+v", plan)
	}
	write := g.Node("write")
	if write.Model != "gpt-z" || write.SideEffects != SideIdempotent || write.Retries != nil || !slices.Equal(write.Needs, []string{"plan"}) {
		t.Errorf("write: %+v", write)
	}
	if act := g.Node("act"); act.SideEffects != SideUnsafe || act.Model != "" || !slices.Equal(act.Needs, []string{"write", "plan"}) {
		t.Errorf("act: %+v", act)
	}
	if act2 := g.Node("act2"); act2.SideEffects != SideNone {
		t.Errorf("act2: %+v", act2)
	}
	if bgn := g.Node("bgn"); bgn.Model != "gpt-y" {
		t.Errorf("bgn: %+v", bgn)
	}
	if g.Node("nope") != nil {
		t.Error("Node(nope) != nil")
	}
	var ids []string
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
	}
	if !slices.Equal(ids, []string{"plan", "write", "act", "act2", "bgn"}) {
		t.Errorf("Nodes order: %v", ids)
	}
}

func TestParseGraphSingleProviderIsDefault(t *testing.T) {
	g, err := Parse("t.yaml", []byte("name: t\nproviders:\n  only: {kind: harness}\nnodes:\n  - {id: a, prompt: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := g.Node("a"); n.Provider != "only" || n.SideEffects != SideUnsafe {
		t.Errorf("a: %+v", n)
	}
}

func TestParseGraphAnchorsAndMerge(t *testing.T) {
	src := `name: t
providers:
  p: {kind: sim, model: base-model}
nodes:
  - &base
    id: a
    model: m1
    system: &sys "be terse"
    retries: 1
    prompt: x
  - <<: *base
    id: b
    needs: [a]
    prompt: "{{ .Outputs.a }}"
  - id: c
    system: *sys
    prompt: y
`
	g, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b := g.Node("b")
	if b.Model != "m1" || b.System != "be terse" || b.Retries == nil || *b.Retries != 1 || b.Prompt != "{{ .Outputs.a }}" {
		t.Errorf("b: %+v", b)
	}
	if c := g.Node("c"); c.System != "be terse" || c.Model != "base-model" {
		t.Errorf("c: %+v", c)
	}
}

func TestParseGraphAcceptsTemplateForms(t *testing.T) {
	prompts := []string{
		`{{ .Outputs.a }}`,
		`{{ $.Outputs.a }}`,
		`{{ output "my-b" }}`,
		`{{ index .Outputs "my-b" }}`,
		`{{ (.Outputs).a }}`,
		`{{ range $id, $out := .Outputs }}{{ $id }}: {{ $out }}{{ end }}`,
		`{{ range .Outputs }}{{ . }}{{ end }}`,
		`{{ with .Outputs.a }}{{ . }}{{ else }}{{ output "my-b" }}{{ end }}`,
		`{{ if eq (output "a") "x" }}yes{{ else if true }}{{ .Outputs.a | printf "%q" }}{{ end }}`,
		`{{ define "t" }}[{{ . }}]{{ end }}{{ template "t" .Outputs.a }}`,
		`{{ block "t" . }}{{ .Outputs.a }}{{ end }}`,
		`{{/* a comment */}}plain text with {{ "{{" }} braces`,
		`{{ len (output "a") }} {{ slice (output "a") 0 1 }}`,
	}
	for _, p := range prompts {
		src := graphHead + "  - {id: a, prompt: x}\n  - {id: my-b, prompt: y}\n  - id: c\n    needs: [a, my-b]\n    prompt: '" + strings.ReplaceAll(p, "'", "''") + "'\n"
		if _, err := Parse("t.yaml", []byte(src)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestGraphOrderAndDependents(t *testing.T) {
	src := graphHead + `  - {id: report, needs: [left, right], prompt: x}
  - {id: right, needs: [root], prompt: x}
  - {id: left, needs: [root], prompt: x}
  - {id: lone, prompt: x}
  - {id: root, prompt: x}
  - {id: tail, needs: [report, lone], prompt: x}
`
	g, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// Ready at start: lone (3), root (4): lone first by file order. Then
	// root; then right (1) and left (2); then report; then tail.
	want := []string{"lone", "root", "right", "left", "report", "tail"}
	if got := g.Order(); !slices.Equal(got, want) {
		t.Errorf("Order = %v, want %v", got, want)
	}
	o := g.Order()
	o[0] = "mutated"
	if g.Order()[0] != "lone" {
		t.Error("Order returns the graph's own slice")
	}
	deps := map[string][]string{
		"root": {"right", "left"}, "left": {"report"}, "right": {"report"},
		"report": {"tail"}, "lone": {"tail"}, "tail": nil, "nope": nil,
	}
	for id, want := range deps {
		if got := g.Dependents(id); !slices.Equal(got, want) {
			t.Errorf("Dependents(%s) = %v, want %v", id, got, want)
		}
	}
	// Every node after its needs.
	pos := map[string]int{}
	for i, id := range g.Order() {
		pos[id] = i
	}
	for _, n := range g.Nodes {
		for _, need := range n.Needs {
			if pos[need] >= pos[n.ID] {
				t.Errorf("%s before its need %s", n.ID, need)
			}
		}
	}
}

func TestGraphOrderFileOrderWhenIndependent(t *testing.T) {
	g, err := Parse("t.yaml", []byte(graphHead+"  - {id: z, prompt: x}\n  - {id: y, prompt: x}\n  - {id: x, prompt: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Order(); !slices.Equal(got, []string{"z", "y", "x"}) {
		t.Errorf("Order = %v", got)
	}
}

func TestGraphNodeRender(t *testing.T) {
	src := graphHead + `  - {id: a, prompt: x}
  - {id: my-b, prompt: y}
  - id: c
    needs: [a, my-b]
    system: "You are {{ output \"a\" }}."
    prompt: |
      A={{ .Outputs.a }} B={{ output "my-b" }} I={{ index .Outputs "a" }}
      {{- range $k, $v := .Outputs }} {{ $k }}:{{ $v }}{{ end }}
`
	g, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := g.Node("c")
	outs := map[string]string{"a": "<alpha & co>", "my-b": "beta", "unrelated": "zzz"}
	got, err := c.RenderPrompt(outs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "A=<alpha & co> B=beta I=<alpha & co> a:<alpha & co> my-b:beta\n"; got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
	sys, err := c.RenderSystem(outs)
	if err != nil || sys != "You are <alpha & co>." {
		t.Errorf("system = %q, %v", sys, err)
	}
	if s, err := g.Node("a").RenderSystem(nil); s != "" || err != nil {
		t.Errorf("empty system = %q, %v", s, err)
	}
	if p, err := g.Node("a").RenderPrompt(nil); p != "x" || err != nil {
		t.Errorf("a = %q, %v", p, err)
	}

	// A need without output is an error, not "".
	if _, err := c.RenderPrompt(map[string]string{"a": "x"}); err == nil || !strings.Contains(err.Error(), `no output given for "my-b"`) {
		t.Errorf("missing need: %v", err)
	}
}

func TestGraphNodeRenderBuiltInCode(t *testing.T) {
	// Nodes made in code (not parsed) render too, with the same rules.
	n := &Node{ID: "x", Needs: []string{"a"}, Prompt: `{{ .Outputs.a }}`}
	if got, err := n.RenderPrompt(map[string]string{"a": "1"}); err != nil || got != "1" {
		t.Errorf("got %q, %v", got, err)
	}
	n = &Node{ID: "x", Needs: []string{"a"}, Prompt: `{{ .Outputs.c }}`}
	if _, err := n.RenderPrompt(map[string]string{"a": "1", "c": "2"}); err == nil || !strings.Contains(err.Error(), `no entry for key "c"`) {
		t.Errorf("missing key: %v", err)
	}
	n = &Node{ID: "x", Needs: []string{"a"}, Prompt: `{{ output "c" }}`}
	if _, err := n.RenderPrompt(map[string]string{"a": "1", "c": "2"}); err == nil || !strings.Contains(err.Error(), `not one of the node's needs`) {
		t.Errorf("output of a non-need: %v", err)
	}
	n = &Node{ID: "x", Prompt: `{{ if }}`}
	if _, err := n.RenderPrompt(nil); err == nil {
		t.Error("bad template rendered")
	}
}

func TestGraphNodeRenderConcurrent(t *testing.T) {
	g, err := Parse("t.yaml", []byte(graphTwo("  - {id: b, needs: [a], prompt: '{{ output \"a\" }}/{{ .Outputs.a }}'}\n")))
	if err != nil {
		t.Fatal(err)
	}
	b := g.Node("b")
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := fmt.Sprint(i)
			got, err := b.RenderPrompt(map[string]string{"a": v})
			if err != nil || got != v+"/"+v {
				t.Errorf("render %d: %q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
}

func TestLoadGraph(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file loaded")
	} else if errors.As(err, new(*Error)) {
		t.Errorf("missing file is a Error: %v", err)
	}
}

func TestGraphErrorFormat(t *testing.T) {
	e := &Error{Path: "x.yaml", Problems: []Problem{
		{Line: 3, Node: "a", Field: "promt", Msg: `unknown field "promt"`},
		{Msg: "the file is empty"},
	}}
	want := "x.yaml:3: node \"a\": unknown field \"promt\"\nx.yaml: the file is empty"
	if e.Error() != want {
		t.Errorf("got %q", e.Error())
	}
	if got := (&Error{Problems: []Problem{{Line: 1, Msg: "m"}}}).Error(); got != "<graph>:1: m" {
		t.Errorf("no path: %q", got)
	}
}

func TestGraphEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"promt", "prompt", 1}, {"pormpt", "prompt", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}} {
		if d := graphEditDistance(c.a, c.b); d != c.d {
			t.Errorf("%q %q: %d, want %d", c.a, c.b, d, c.d)
		}
	}
}

// TestParseGraphMaxDials: max_dials is a provider's bound on connects in
// flight; it must be a positive integer, and only HTTP providers take it.
func TestParseGraphMaxDials(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
		err  string
	}{
		{"  p: {kind: openai, model: m, base_url: http://127.0.0.1:1/v1, max_dials: 8}\n", 8, ""},
		{"  p: {kind: openai, model: m, base_url: http://127.0.0.1:1/v1}\n", 0, ""},
		{"  p: {kind: openai, model: m, base_url: http://127.0.0.1:1/v1, max_dials: 0}\n", 0, "max_dials must be > 0"},
		{"  p: {kind: openai, model: m, base_url: http://127.0.0.1:1/v1, max_dials: lots}\n", 0, "max_dials"},
		{"  p: {kind: harness, model: m, max_dials: 8}\n", 0, "max_dials"},
	} {
		src := "name: g\nproviders:\n" + tc.yaml + "nodes:\n  - id: n\n    provider: p\n    prompt: hi\n"
		g, err := Parse("g.yaml", []byte(src))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "g.yaml:3") {
				t.Errorf("%q: error %v, want one at g.yaml:3 with %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := g.Providers["p"].MaxDials; got != tc.want {
			t.Errorf("%q: MaxDials %d, want %d", tc.yaml, got, tc.want)
		}
	}
}
