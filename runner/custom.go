package runner

import (
	"fmt"
	"maps"
	"slices"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/runner/graph"
)

// ProviderFunc builds the adapter of a graph provider whose kind was
// registered in Options.Kinds. The result may also implement
// provider.Resumer, provider.Checker and provider.Canceler, as its
// Capabilities say; the runner's recovery loop then re-attaches, checks and
// cancels through them exactly as it does for the built-in adapters. If it
// implements io.Closer, it is closed when the run ends.
type ProviderFunc func(spec *graph.ProviderSpec) (provider.Provider, error)

// ParseGraphWith parses a graph file's text that may use the provider kinds
// registered in opts.Kinds.
func ParseGraphWith(path string, src []byte, opts Options) (*Graph, error) {
	return graph.ParseWith(path, src, graph.Options{Kinds: kindNames(opts.Kinds)})
}

// checkKinds refuses a registered kind that shadows a built-in one.
func checkKinds(kinds map[string]ProviderFunc) error {
	for _, k := range kindNames(kinds) {
		switch k {
		case ProviderKindSim, ProviderKindOpenAI, ProviderKindResponses, ProviderKindHarness:
			return fmt.Errorf("runner: Options.Kinds: %q is a built-in provider kind", k)
		}
		if kinds[k] == nil {
			return fmt.Errorf("runner: Options.Kinds: %q has no ProviderFunc", k)
		}
	}
	return nil
}

func kindNames(kinds map[string]ProviderFunc) []string {
	return slices.Sorted(maps.Keys(kinds))
}

// buildCustom builds a provider of a registered kind.
func buildCustom(g *Graph, spec *ProviderSpec, f ProviderFunc) (builtProvider, error) {
	p, err := f(spec)
	if err == nil && p == nil {
		err = fmt.Errorf("kind %q built no provider", spec.Kind)
	}
	if err == nil {
		// The recovery loop relies on what the capabilities promise.
		caps := p.Capabilities()
		_, resumer := p.(provider.Resumer)
		_, checker := p.(provider.Checker)
		_, canceler := p.(provider.Canceler)
		switch {
		case caps.Resume && !resumer:
			err = fmt.Errorf("kind %q: Capabilities().Resume is set but %T is not a provider.Resumer", spec.Kind, p)
		case caps.Check && !checker:
			err = fmt.Errorf("kind %q: Capabilities().Check is set but %T is not a provider.Checker", spec.Kind, p)
		case caps.Cancel && !canceler:
			err = fmt.Errorf("kind %q: Capabilities().Cancel is set but %T is not a provider.Canceler", spec.Kind, p)
		}
	}
	if err != nil {
		return builtProvider{}, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, spec.Name, err)
	}
	return builtProvider{p: p, model: spec.Model}, nil
}

// KindNames lists the kinds registered in kinds, sorted: what graph.Options
// needs to parse or build a graph that uses them.
func KindNames(kinds map[string]ProviderFunc) []string { return kindNames(kinds) }
