package graph

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvHidden stands, in a graph's journaled text, for a harness env value
// that was not journaled (Journaled).
const EnvHidden = "<not journaled>"

// Journaled is the graph's Source as a journal keeps it: every non-empty
// harness env value (provider and node env) replaced by EnvHidden, its
// name kept. Those values are what a CLI needs to log in (tokens), and the
// journal, the reports and every command that prints a run's graph would
// otherwise hold them verbatim. A graph without env values is its Source,
// byte for byte; otherwise the file keeps its layout and comments, unless
// its env values share YAML nodes with other fields (anchors), when it is
// the equivalent graph file (MarshalYAML). opts are those g was parsed
// with. Resume gives the values back (FillEnv).
func (g *Graph) Journaled(opts Options) ([]byte, error) {
	if len(g.HiddenEnv(func(v string) bool { return v != "" })) == 0 {
		return g.Source, nil
	}
	want, err := g.hidden().MarshalYAML()
	if err != nil {
		return nil, err
	}
	if text, err := hideInText(g.Source); err == nil {
		// The text hid exactly the env values if it parses to the graph
		// with them hidden.
		if back, err := ParseWith(g.Path, text, opts); err == nil {
			if got, err := back.MarshalYAML(); err == nil && bytes.Equal(got, want) {
				return text, nil
			}
		}
	}
	return want, nil
}

// hidden is a copy of g whose non-empty env values are EnvHidden.
func (g *Graph) hidden() *Graph {
	c := *g
	hide := func(env map[string]string) map[string]string {
		out := make(map[string]string, len(env))
		for k, v := range env {
			if v != "" {
				v = EnvHidden
			}
			out[k] = v
		}
		return out
	}
	c.Providers = make(map[string]*ProviderSpec, len(g.Providers))
	for name, p := range g.Providers {
		pc := *p
		pc.Env = hide(p.Env)
		c.Providers[name] = &pc
	}
	c.Nodes = make([]*Node, len(g.Nodes))
	for i, n := range g.Nodes {
		nc := *n
		nc.Env = hide(n.Env)
		c.Nodes[i] = &nc
	}
	return &c
}

// hideInText replaces, in a graph file's text, the non-empty values of
// every provider's and node's env (merge keys followed) by EnvHidden.
func hideInText(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	p := &graphParser{mergeBudget: graphMergeBudget, inputs: map[string]*Input{}}
	env := func(m *yaml.Node) {
		m = graphResolve(m)
		if m == nil || m.Kind != yaml.MappingNode {
			return
		}
		for _, f := range p.pairs(graphScope{}, m, "field") {
			if f.key.Value != "env" {
				continue
			}
			if e := graphResolve(f.val); e != nil && e.Kind == yaml.MappingNode {
				for _, kv := range p.pairs(graphScope{}, e, "env") {
					if v := graphResolve(kv.val); v.Kind == yaml.ScalarNode && v.Value != "" {
						v.Value, v.Style, v.Tag = EnvHidden, yaml.DoubleQuotedStyle, "!!str"
					}
				}
			}
		}
	}
	root := graphResolve(graphDocRoot(&doc))
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a mapping")
	}
	for _, f := range p.pairs(graphScope{}, root, "field") {
		switch v := graphResolve(f.val); {
		case f.key.Value == "providers" && v != nil && v.Kind == yaml.MappingNode:
			for _, pv := range p.pairs(graphScope{}, v, "provider") {
				env(pv.val)
			}
		case f.key.Value == "nodes" && v != nil && v.Kind == yaml.SequenceNode:
			for _, n := range v.Content {
				env(n)
			}
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EnvRef names one harness env value of a graph: of a provider (Node
// empty) or of a node.
type EnvRef struct {
	Provider, Node, Name string
}

func (r EnvRef) String() string {
	if r.Node != "" {
		return fmt.Sprintf("%s (env of node %s)", r.Name, r.Node)
	}
	return fmt.Sprintf("%s (env of provider %s)", r.Name, r.Provider)
}

// HiddenEnv lists the env values of g for which is(value) holds, in the
// graph's order (providers by name, then nodes).
func (g *Graph) HiddenEnv(is func(string) bool) []EnvRef {
	var out []EnvRef
	for _, name := range graphSortedKeys(g.Providers) {
		for _, k := range graphSortedKeys(g.Providers[name].Env) {
			if is(g.Providers[name].Env[k]) {
				out = append(out, EnvRef{Provider: name, Name: k})
			}
		}
	}
	for _, n := range g.Nodes {
		if len(n.Env) == 0 {
			// Most nodes have none, and a Temporal worker asks once per
			// node it runs: at 10,000 nodes, sorting 10,000 empty key sets
			// per node was a tenth of the workers' CPU.
			continue
		}
		for _, k := range graphSortedKeys(n.Env) {
			if is(n.Env[k]) {
				out = append(out, EnvRef{Provider: n.Provider, Node: n.ID, Name: k})
			}
		}
	}
	return out
}

// MissingEnvError: a journaled graph's hidden env values could be found
// neither in its graph file nor in the environment.
type MissingEnvError struct {
	Path    string
	Missing []EnvRef
}

func (e *MissingEnvError) Error() string {
	names := make([]string, len(e.Missing))
	for i, r := range e.Missing {
		names[i] = r.String()
	}
	return fmt.Sprintf("the journal keeps the names of harness env values, never the values, and %s cannot be found: "+
		"restore the graph file %s as it was run, or set them in the environment", strings.Join(names, ", "), e.Path)
}

// FillEnv gives a graph parsed from its journaled text its hidden env
// values back: from orig (the graph file as it reads now, nil if it is
// gone) when orig hides to the same journaled text, so that no value of a
// changed file is taken for the run's (opts are those both were parsed
// with); else each from lookup (the
// environment) by its name. It returns a *MissingEnvError naming those it
// could find nowhere.
func (g *Graph) FillEnv(journaled []byte, orig *Graph, opts Options, lookup func(string) (string, bool)) error {
	hidden := g.HiddenEnv(func(v string) bool { return v == EnvHidden })
	if len(hidden) == 0 {
		return nil
	}
	if orig != nil {
		if text, err := orig.Journaled(opts); err != nil || !bytes.Equal(text, journaled) {
			orig = nil
		}
	}
	var missing []EnvRef
	for _, r := range hidden {
		env := g.Providers[r.Provider].Env
		if r.Node != "" {
			env = g.Node(r.Node).Env
		}
		switch {
		case orig != nil && r.Node != "":
			env[r.Name] = orig.Node(r.Node).Env[r.Name]
		case orig != nil:
			env[r.Name] = orig.Providers[r.Provider].Env[r.Name]
		default:
			v, ok := lookup(r.Name)
			if !ok {
				missing = append(missing, r)
				continue
			}
			env[r.Name] = v
		}
	}
	if len(missing) > 0 {
		return &MissingEnvError{Path: g.Path, Missing: missing}
	}
	return nil
}
