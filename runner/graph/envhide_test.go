package graph

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Journaled hides every harness env value, wherever the file puts it
// (inline, block, through an anchor or a merge key), keeps the names, the
// rest of the graph and, when it can, the file's layout and comments; a
// graph without env values is journaled byte for byte.
func TestJournaledHidesEnvValues(t *testing.T) {
	const secret = "tok-4b1f9e7c2a5d8f03"
	cases := []struct {
		name, src string
		keeps     string // a line of the file kept as it was; "" when the equivalent file is expected
	}{
		{"no env", "name: t\nproviders:\n  s: {kind: sim}\nnodes:\n  - {id: a, provider: s, prompt: x}\n", ""},
		{"provider env", "name: t\n# the agent\nproviders:\n  h:\n    kind: harness\n    env: {GH_TOKEN: " + secret + ", EMPTY: \"\"}\nnodes:\n  - {id: a, provider: h, prompt: x}\n", "# the agent"},
		{"node env, block", "name: t\nproviders:\n  h: {kind: harness}\nnodes:\n  - id: a\n    provider: h\n    prompt: x # why\n    env:\n      GH_TOKEN: " + secret + "\n", "# why"},
		{"env through an anchor", "name: t\nproviders:\n  h: {kind: harness, env: &e {GH_TOKEN: " + secret + "}}\nnodes:\n  - {id: a, provider: h, prompt: x, env: *e}\n", "&e"},
		{"env through a merge key", "name: t\nproviders:\n  base: &b {kind: harness, env: {GH_TOKEN: " + secret + "}}\n  h: {<<: *b, model: m}\nnodes:\n  - {id: a, provider: h, prompt: x}\n", "<<: *b"},
		{"a value shared with another field", "name: t\nproviders:\n  h: {kind: harness, model: &m " + secret + ", env: {GH_TOKEN: *m}}\nnodes:\n  - {id: a, provider: h, prompt: x}\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse("g.yaml", []byte(c.src))
			if err != nil {
				t.Fatal(err)
			}
			text, err := g.Journaled(Options{})
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "no env" {
				if !bytes.Equal(text, g.Source) {
					t.Fatalf("a graph without env is journaled as\n%s", text)
				}
				return
			}
			if c.name != "a value shared with another field" && strings.Contains(string(text), secret[:8]) {
				t.Fatalf("the journaled text holds the value:\n%s", text)
			}
			back, err := Parse("g.yaml", text)
			if err != nil {
				t.Fatalf("the journaled text does not parse: %v\n%s", err, text)
			}
			if refs := back.HiddenEnv(func(v string) bool { return v == EnvHidden }); len(refs) == 0 || len(back.HiddenEnv(func(v string) bool { return v != EnvHidden && v != "" })) != 0 {
				t.Fatalf("hidden %v; the journaled text:\n%s", refs, text)
			}
			want, _ := g.hidden().MarshalYAML()
			if got, _ := back.MarshalYAML(); !bytes.Equal(got, want) {
				t.Errorf("the journaled graph differs from the graph run beyond its env values:\n%s\nwant\n%s", got, want)
			}
			if c.keeps != "" && !strings.Contains(string(text), c.keeps) {
				t.Errorf("the file's layout was not kept (%q is gone):\n%s", c.keeps, text)
			}
			if c.name == "a value shared with another field" && back.Providers["h"].Model != secret {
				t.Errorf("the model shared with an env value was hidden too: %q", back.Providers["h"].Model)
			}

			// FillEnv: from the file as it was run; from the environment
			// when the file changed; else an error naming what is missing.
			fill := func(orig *Graph, env map[string]string) (*Graph, error) {
				back, _ := Parse("g.yaml", text)
				return back, back.FillEnv(text, orig, Options{}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			}
			if got, err := fill(g, nil); err != nil || !sameEnv(got, g) {
				t.Errorf("filled from the file: %v", err)
			}
			changed, _ := Parse("g.yaml", []byte(strings.Replace(c.src, "prompt: x", "prompt: y", 1)))
			if got, err := fill(changed, map[string]string{"GH_TOKEN": secret}); err != nil || !sameEnv(got, g) {
				t.Errorf("filled from the environment: %v", err)
			}
			_, err = fill(changed, nil)
			var missing *MissingEnvError
			if !errors.As(err, &missing) || !strings.Contains(err.Error(), "GH_TOKEN (env of") {
				t.Errorf("nothing to fill from: %v", err)
			}
		})
	}
}

func sameEnv(a, b *Graph) bool {
	for name, p := range a.Providers {
		for k, v := range p.Env {
			if b.Providers[name].Env[k] != v {
				return false
			}
		}
	}
	for i, n := range a.Nodes {
		for k, v := range n.Env {
			if b.Nodes[i].Env[k] != v {
				return false
			}
		}
	}
	return true
}
