// Package graph is noderun's goal graph language: the types of a graph, the
// parser and validator of graph files (every problem reported with its
// file:line), and the Go templates of node prompts. It imports nothing from
// the runner, the journal or the provider adapters: a graph is data, and
// package runner executes it. (It imports provider/sim/simconfig for one
// type: a sim provider's configuration, ProviderSpec.Sim, is a
// simconfig.Config, which provider/sim aliases as sim.Config; the leaf keeps
// the simulator's HTTP server out of programs that only parse graphs.)
//
// # Templates
//
// A node's System and Prompt are Go text/templates (package text/template)
// executed when the node starts, with the outputs of its needs and the
// run's inputs. On top of Go's built-in functions (index, printf, len, eq,
// and, or, not, ...) they have three functions:
//
//   - output "id": the output of need "id" (a string). {{ .Outputs.id }}
//     and {{ index .Outputs "id" }} are the same; output also takes ids
//     that are not Go identifiers, like "my-plan".
//   - input "name": the run's input "name" (a string); {{ .Inputs.name }} is
//     the same.
//   - failed "id": true when need "id" failed and the node runs anyway
//     because that need says continue_on_failure (its output is then "").
//
// Dot holds two maps: .Outputs (the outputs of the node's needs, by id) and
// .Inputs (the run's inputs, by name); {{ range $id, $out := .Outputs }}
// walks the outputs. Only the node's needs are there, and a missing output
// or input is an error, never "". Parse and Build check every template
// statically: a reference to a node that is not a need, a computed id
// (output $x), an unknown field of dot, .Outputs used as a whole other than
// in range, and call are errors, each reported at the node and field (and,
// in a file, the line). Node.Render executes a node's
// templates with Values.
//
// # Graphs built in code
//
// Build checks a Graph made in code exactly as Parse checks a file. Its
// errors are an *Error with InCode set, whose Problems name the node
// (Problem.Node) or provider and the field (Problem.Field) they are about:
// `graph "demo": node "b": prompt uses the output of "c", which is not in
// needs (add it to needs)`, never a line of a generated file (see
// ExampleBuild).
package graph

// docs/graph.md (Reference) and docs/graph.schema.json (Schema) are made
// from the field tables in fields.go, whose fault kinds and endpoints are
// package simconfig's own lists; `go generate ./runner/graph` rewrites them,
// and the tests fail when they, or the hand-written docs the drift tests
// read, lag behind the code.
//
//go:generate go test -run ^(TestReferenceUpToDate|TestSchemaFileUpToDate)$ -update .
