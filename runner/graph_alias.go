package runner

import (
	"context"

	"github.com/noderun/noderun/runner/graph"
)

// The graph language lives in package graph; these names keep the runner's
// API (and its callers) as they were.
type (
	// Graph is a validated goal graph: see graph.Graph.
	Graph = graph.Graph
	// Node is one node of a graph: see graph.Node.
	Node = graph.Node
	// ProviderSpec is one provider of a graph: see graph.ProviderSpec.
	ProviderSpec = graph.ProviderSpec
	// SideEffects says what sending a node's request again can do: see graph.SideEffects.
	SideEffects = graph.SideEffects
	// GraphError is a graph file that is not valid: see graph.Error.
	GraphError = graph.Error
	// Problem is one thing wrong with a graph file: see graph.Problem.
	Problem = graph.Problem
	// MissingEnvError is a resume that cannot find a harness env value the
	// journal does not keep: see graph.MissingEnvError.
	MissingEnvError = graph.MissingEnvError
)

// Provider kinds, side effect classes and simulator APIs: see package graph.
const (
	ProviderKindSim       = graph.ProviderKindSim
	ProviderKindOpenAI    = graph.ProviderKindOpenAI
	ProviderKindResponses = graph.ProviderKindResponses
	ProviderKindHarness   = graph.ProviderKindHarness
	ProviderKindAnthropic = graph.ProviderKindAnthropic
	ProviderKindGemini    = graph.ProviderKindGemini
	SimAPIChat            = graph.SimAPIChat
	SimAPIResponses       = graph.SimAPIResponses
	SideNone              = graph.SideNone
	SideIdempotent        = graph.SideIdempotent
	SideUnsafe            = graph.SideUnsafe
)

// LoadGraph reads and validates a graph file (graph.Load).
func LoadGraph(path string) (*Graph, error) { return graph.Load(path) }

// LoadGraphContext is LoadGraph, giving up when ctx ends (graph.LoadContext).
func LoadGraphContext(ctx context.Context, path string) (*Graph, error) {
	return graph.LoadContext(ctx, path)
}

// ParseGraph parses and validates a graph file's text (graph.Parse).
func ParseGraph(path string, src []byte) (*Graph, error) { return graph.Parse(path, src) }
