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
// provider.Resumer, provider.Checker, provider.Canceler and
// provider.Continuer, as its Capabilities say (the runner refuses a
// provider whose Capabilities promise one it does not implement, see
// provider.CheckCapabilities); the recovery loop then re-attaches, checks,
// cancels and continues through them exactly as it does for the built-in
// adapters. If it implements io.Closer, it is closed when the run ends.
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
		case ProviderKindSim, ProviderKindOpenAI, ProviderKindResponses, ProviderKindHarness, ProviderKindGemini:
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

// KindNames lists the kinds registered in kinds, sorted: what graph.Options
// needs to parse or build a graph that uses them.
func KindNames(kinds map[string]ProviderFunc) []string { return kindNames(kinds) }
