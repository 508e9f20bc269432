// Package graph is noderun's goal graph language: the types of a graph, the
// parser and validator of graph files (every problem reported with its
// file:line), and the Go templates of node prompts. It imports nothing from
// the runner, the journal or the provider adapters: a graph is data, and
// package runner executes it.
package graph
