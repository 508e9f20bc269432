package graph_test

import (
	"errors"
	"fmt"

	"github.com/noderun/noderun/runner/graph"
)

// A graph built in code, with the template functions of node prompts: output
// "id" reads a need's output, input "name" a run input, failed "id" whether a
// need failed under continue_on_failure.
func ExampleBuild() {
	g, err := graph.Build(&graph.Graph{
		Name:      "demo",
		Inputs:    []*graph.Input{{Name: "topic", Required: true}},
		Providers: map[string]*graph.ProviderSpec{"sim": {Kind: graph.ProviderKindSim}},
		Nodes: []*graph.Node{
			{ID: "plan", Prompt: `Plan a talk on {{ input "topic" }}.`, ContinueOnFailure: true},
			{ID: "my-notes", Prompt: "Notes."},
			{ID: "talk", Needs: []string{"plan", "my-notes"},
				Prompt: `{{ if failed "plan" }}No plan.{{ else }}Follow: {{ .Outputs.plan }}{{ end }} With {{ output "my-notes" }}`},
		},
	}, graph.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	in, _ := g.ResolveInputs(map[string]string{"topic": "streams"})
	_, prompt, _ := g.Node("plan").Render(graph.Values{Inputs: in})
	fmt.Println(prompt)
	_, prompt, _ = g.Node("talk").Render(graph.Values{Outputs: map[string]string{"plan": "1. 2. 3.", "my-notes": "n"}})
	fmt.Println(prompt)
	_, prompt, _ = g.Node("talk").Render(graph.Values{Outputs: map[string]string{"plan": "", "my-notes": "n"}, Failed: map[string]bool{"plan": true}})
	fmt.Println(prompt)

	// Errors of a graph built in code name the node and the field.
	_, err = graph.Build(&graph.Graph{
		Name:      "demo",
		Providers: map[string]*graph.ProviderSpec{"sim": {Kind: graph.ProviderKindSim}},
		Nodes: []*graph.Node{
			{ID: "a", Prompt: "hi", ReasoningEffort: "huge"},
			{ID: "b", Needs: []string{"a"}, Prompt: `{{ output "c" }}`},
		},
	}, graph.Options{})
	var ge *graph.Error
	if errors.As(err, &ge) {
		fmt.Println(ge)
		fmt.Printf("%s %s\n", ge.Problems[1].Node, ge.Problems[1].Field)
	}
	// Output:
	// Plan a talk on streams.
	// Follow: 1. 2. 3. With n
	// No plan. With n
	// graph "demo": node "a": reasoning_effort must be one of none, minimal, low, medium, high, not "huge"
	// graph "demo": node "b": prompt uses the output of "c", which is not in needs (add it to needs)
	// b prompt
}
