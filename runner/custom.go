package runner

import (
	"fmt"
	"maps"
	"slices"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/runner/graph"
)

// ProviderFunc builds the adapter of a graph provider whose kind was
// registered in Options.Kinds. The result is a provider.Provider (Start
// streams a request's events; a stream that ends without terminal evidence
// must be reported as diagnostics.ErrDisconnected, which makes it
// recoverable). It may also implement the optional interfaces of package
// provider, each promised by a flag of its Capabilities (the runner refuses
// a provider whose Capabilities promise one it does not implement, see
// provider.CheckCapabilities):
//
//   - provider.Resumer (Capabilities.Resume): re-attach to the work by its
//     Ref from a Cursor after a drop, regenerating nothing;
//   - provider.Checker (Capabilities.Check): ask for the work's status by
//     Ref, before deciding to resume, wait or retry;
//   - provider.Canceler (Capabilities.Cancel): stop the work at the
//     provider (an interrupted run's `noderun cancel`, a stuck response);
//   - provider.Continuer (Capabilities.Continue): re-send a chat request with
//     the answer delivered so far as the last assistant message, and emit
//     only what follows it; provider.RequestContinuer narrows it to some
//     requests.
//
// The recovery loop then re-attaches, checks, cancels and continues through
// them exactly as it does for the built-in adapters. If it implements
// io.Closer, it is closed when the run ends.
//
// A provider that speaks HTTP should send its requests with provider.Send
// (provider.MarkNode alone only marks them): the request then carries the
// node's header, which the simulator's per-node faults and a gateway's logs
// match on, and its response's status and headers reach the context's
// provider.ResponseObserver, through which the runner learns the account's
// rate limits and paces the run (Options.Quota).
type ProviderFunc func(spec *graph.ProviderSpec) (provider.Provider, error)

// ParseGraphWith parses a graph file's text that may use the provider kinds
// registered in opts.Kinds.
func ParseGraphWith(path string, src []byte, opts Options) (*Graph, error) {
	return graph.ParseWith(path, src, graph.Options{Kinds: kindNames(opts.Kinds)})
}

// checkKinds refuses a registered kind that shadows a built-in one.
func checkKinds(kinds map[string]ProviderFunc) error {
	for _, k := range kindNames(kinds) {
		if slices.Contains(graph.BuiltinKinds(), k) {
			return fmt.Errorf("runner: Options.Kinds: %q is %w", k, ErrBuiltinKind)
		}
		if kinds[k] == nil {
			return fmt.Errorf("runner: Options.Kinds: %q has %w", k, ErrNoProviderFunc)
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
