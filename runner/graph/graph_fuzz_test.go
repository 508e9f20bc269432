package graph

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseGraph feeds Parse untrusted text: it must never panic, a
// rejection is a *Error whose every line names the file, and an accepted
// graph is acyclic with every need and provider defined.
func FuzzParseGraph(f *testing.F) {
	for _, pattern := range []string{"*.yaml", "valid/*.yaml", "invalid/*.yaml"} {
		paths, _ := filepath.Glob(filepath.Join(graphTestdata, pattern))
		for _, p := range paths {
			if src, err := os.ReadFile(p); err == nil {
				f.Add(src)
			}
		}
	}
	for _, s := range []string{
		"",
		"name: t\n",
		graphHead + "  - {id: a, prompt: x}\n",
		graphHead + "  - {id: a, needs: [b], prompt: x}\n  - {id: b, needs: [a], prompt: y}\n",
		graphHead + "  - {id: a, prompt: x}\n  - {id: b, needs: [a], prompt: '{{ output \"a\" }}{{ .Outputs.a }}{{ index .Outputs \"a\" }}'}\n",
		graphHead + "  - &n {id: a, prompt: x}\n  - {<<: *n, id: b}\n  - {<<: [*n, *n], id: c}\n",
		"name: &a [*a]\n",
		"name: t\ninputs:\n  goal: {description: x}\n  n: {type: int, default: 2}\n  f: {type: file, required: false}\n" +
			"providers:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: '{{ input \"goal\" }}{{ .Inputs.n }}', timeout: 1m, continue_on_failure: true}\n" +
			"  - {id: b, needs: [a], prompt: '{{ if failed \"a\" }}x{{ end }}'}\n",
		"a: &a\n  b: *a\nname: t\nnodes: *a\n",
		graphHead + "  - {id: a, prompt: '{{ define \"t\" }}{{ template \"t\" . }}{{ end }}x'}\n",
		graphHead + "  - {id: a, prompt: '{{ with $x := 1 }}{{ $.Outputs }}{{ end }}'}\n",
		// limits, fallback and fallback_continue, valid and not
		"name: t\nproviders:\n  p: {kind: sim, limits: {requests_per_minute: 600, tokens_per_minute: 9000, concurrency: 2}, fallback: [q]}\n" +
			"  q: {kind: sim, continuation: prefix, fallback: [p]}\nnodes:\n  - {id: a, provider: p, fallback_continue: true, prompt: x}\n" +
			"  - {id: b, provider: q, fallback: [], prompt: y}\n  - {id: c, provider: p, side_effects: unsafe, prompt: z}\n",
		"name: t\nproviders:\n  p: {kind: harness, limits: {concurrency: 0, rpm: 1, concurrency: 2}, fallback: [p, q, q, r]}\n" +
			"  q: {kind: openai, model: m, limits: {}}\nnodes:\n  - {id: a, provider: p, fallback: [q, p], fallback_continue: true, side_effects: unsafe, prompt: x}\n",
		"name: t\nproviders:\n  p: &p {kind: sim, limits: &l {requests_per_minute: 1}, fallback: &f [q]}\n  q: {<<: *p, fallback: ~, limits: *l}\n" +
			"nodes:\n  - {id: a, provider: q, fallback: *f, fallback_continue: yes, prompt: x}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := Parse("f.yaml", src)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error is %T: %v", err, err)
			}
			if g != nil {
				t.Fatal("graph returned with an error")
			}
			if len(ge.Problems) == 0 {
				t.Fatal("Error without problems")
			}
			for _, p := range ge.Problems {
				if p.Line < 0 || p.Msg == "" {
					t.Fatalf("bad problem %+v", p)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("message line without the file: %q", line)
				}
			}
			return
		}
		graphCheckInvariants(t, g)
		// What parses can be rebuilt from its fields (graphs made in code and
		// journaled as YAML take that path).
		if _, err := Build(g, Options{}); err != nil {
			t.Fatalf("an accepted graph does not rebuild: %v", err)
		}
		outs := map[string]string{}
		for _, id := range g.Order() {
			outs[id] = "out-" + id
		}
		for _, n := range g.Nodes {
			// Rendering runs the template: skip the ones that can loop or
			// recurse for a long time; the rest must not panic.
			if strings.Contains(n.Prompt+n.System, "range") || strings.Contains(n.Prompt+n.System, "template") || strings.Contains(n.Prompt+n.System, "block") {
				continue
			}
			_, _ = n.RenderPrompt(outs)
			_, _ = n.RenderSystem(outs)
		}
	})
}
