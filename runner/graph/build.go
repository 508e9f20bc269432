package graph

import (
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Build checks a graph made in code (the exported fields of g: Name,
// Profile, ProfilesPath, Inputs, Providers, Nodes, and Path for relative
// paths) exactly as Parse checks a file, and returns it parsed: indexed,
// templates compiled, defaults filled in. Its Source is the equivalent graph
// file, which is what a run journals and a resume parses again. Its errors
// are an *Error with InCode set: each problem names the node (or provider)
// and the field it is about, never a line of a file that does not exist.
// g itself is not modified.
func Build(g *Graph, opts Options) (*Graph, error) {
	src, err := g.MarshalYAML()
	if err != nil {
		return nil, err
	}
	path := g.Path
	if path == "" {
		path = "graph.yaml"
	}
	built, err := ParseWith(path, src, opts)
	if ge, ok := errors.AsType[*Error](err); ok {
		// The lines are in src, which the caller never saw: name the Go
		// values instead (every Problem has its node and field).
		ge.InCode = true
		if g.Path == "" {
			ge.Path = fmt.Sprintf("graph %q", g.Name)
		}
	}
	return built, err
}

// MarshalYAML returns g as a graph file: Parse of the result gives back an
// equivalent graph (with defaults filled in).
func (g *Graph) MarshalYAML() ([]byte, error) {
	root := ymap()
	ykv(root, "name", yscalar(g.Name))
	if g.Profile != "" {
		ykv(root, "profile", yscalar(g.Profile))
	}
	if g.ProfilesPath != "" {
		ykv(root, "profiles", yscalar(g.ProfilesPath))
	}
	if len(g.Inputs) > 0 {
		ins := ymap()
		for _, in := range g.Inputs {
			if in == nil {
				return nil, fmt.Errorf("graph %q: a nil input", g.Name)
			}
			m := ymap()
			if in.Description != "" {
				ykv(m, "description", yscalar(in.Description))
			}
			if in.Type != "" && in.Type != InputString {
				ykv(m, "type", yscalar(in.Type))
			}
			if in.HasDefault {
				ykv(m, "default", yscalar(in.Default))
			}
			if !in.HasDefault || in.Required {
				ykv(m, "required", ybool(in.Required))
			}
			ykv(ins, in.Name, m)
		}
		ykv(root, "inputs", ins)
	}
	if g.Cache != nil {
		ykv(root, "cache", ybool(*g.Cache))
	}
	if g.CacheTTL != 0 {
		ykv(root, "cache_ttl", yscalar(g.CacheTTL.String()))
	}
	provs := ymap()
	for _, name := range graphSortedKeys(g.Providers) {
		p := g.Providers[name]
		if p == nil {
			return nil, fmt.Errorf("graph %q: provider %q is nil", g.Name, name)
		}
		m := ymap()
		ykv(m, "kind", yscalar(p.Kind))
		for _, kv := range [][2]string{{"model", p.Model}, {"agent", p.Agent}, {"base_url", p.BaseURL}, {"api_key_env", p.APIKeyEnv}, {"api", p.API},
			{"harness", p.Harness}, {"command", p.Command}, {"workdir", p.WorkDir}, {"state_dir", p.StateDir}, {"continuation", p.Continuation}} {
			if kv[1] != "" {
				ykv(m, kv[0], yscalar(kv[1]))
			}
		}
		if p.MaxDials != 0 {
			ykv(m, "max_dials", yint(p.MaxDials))
		}
		if p.Sim != nil {
			sv, err := p.Sim.MarshalYAML()
			if err != nil {
				return nil, fmt.Errorf("graph %q: provider %q: sim: %w", g.Name, name, err)
			}
			ykv(m, "sim", sv.(*yaml.Node))
		}
		if len(p.Args) > 0 {
			ykv(m, "args", ylist(p.Args))
		}
		if len(p.Env) > 0 {
			ykv(m, "env", ystrmap(p.Env))
		}
		if p.Limits != (Limits{}) {
			// A zero field is not declared; a negative one is written,
			// for the parser to report.
			l := ymap()
			for _, kv := range []struct {
				k string
				v int
			}{{"requests_per_minute", p.Limits.RequestsPerMinute}, {"tokens_per_minute", p.Limits.TokensPerMinute}, {"concurrency", p.Limits.Concurrency}} {
				if kv.v != 0 {
					ykv(l, kv.k, yint(kv.v))
				}
			}
			ykv(m, "limits", l)
		}
		if p.MaxOutputBytes > 0 {
			ykv(m, "max_output_bytes", yint(int(p.MaxOutputBytes)))
		}
		if len(p.Fallback) > 0 {
			ykv(m, "fallback", ylist(p.Fallback))
		}
		ykv(provs, name, m)
	}
	ykv(root, "providers", provs)
	nodes := &yaml.Node{Kind: yaml.SequenceNode}
	for _, n := range g.Nodes {
		if n == nil {
			return nil, fmt.Errorf("graph %q: a nil node", g.Name)
		}
		m := ymap()
		ykv(m, "id", yscalar(n.ID))
		if len(n.Needs) > 0 {
			ykv(m, "needs", ylist(n.Needs))
		}
		for _, kv := range [][2]string{{"provider", n.Provider}, {"model", n.Model}, {"agent", n.Agent}, {"system", n.System}, {"prompt", n.Prompt},
			{"reasoning_effort", n.ReasoningEffort}, {"side_effects", string(n.SideEffects)}} {
			if kv[1] != "" || kv[0] == "prompt" {
				ykv(m, kv[0], yscalar(kv[1]))
			}
		}
		if n.MaxOutputTokens != 0 {
			ykv(m, "max_output_tokens", yint(n.MaxOutputTokens))
		}
		if n.Retries != nil {
			ykv(m, "retries", yint(*n.Retries))
		}
		if n.Timeout != 0 {
			ykv(m, "timeout", yscalar(n.Timeout.String()))
		}
		if n.ContinueOnFailure {
			ykv(m, "continue_on_failure", ybool(true))
		}
		if len(n.Env) > 0 {
			ykv(m, "env", ystrmap(n.Env))
		}
		if n.Cache != nil {
			ykv(m, "cache", ybool(*n.Cache))
		}
		if n.CacheTTL != 0 {
			ykv(m, "cache_ttl", yscalar(n.CacheTTL.String()))
		}
		if n.MaxOutputBytes > 0 {
			ykv(m, "max_output_bytes", yint(int(n.MaxOutputBytes)))
		}
		if n.Fallback != nil { // [] too: it turns the provider's list off
			ykv(m, "fallback", ylist(n.Fallback))
		}
		if n.FallbackContinue {
			ykv(m, "fallback_continue", ybool(true))
		}
		nodes.Content = append(nodes.Content, m)
	}
	ykv(root, "nodes", nodes)
	return yaml.Marshal(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}})
}

func ymap() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func ykv(m *yaml.Node, k string, v *yaml.Node) {
	m.Content = append(m.Content, yscalar(k), v)
}

// yscalar is a string that reads back as the same string (quoted when YAML
// would take it for a number, a boolean or null).
func yscalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func yint(i int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(i)}
}
func ybool(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func ylist(vals []string) *yaml.Node {
	l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range vals {
		l.Content = append(l.Content, yscalar(v))
	}
	return l
}

func ystrmap(m map[string]string) *yaml.Node {
	out := ymap()
	for _, k := range graphSortedKeys(m) {
		ykv(out, k, yscalar(m[k]))
	}
	return out
}
