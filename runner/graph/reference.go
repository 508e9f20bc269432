package graph

import (
	"fmt"
	"strings"
)

// Reference returns docs/graph.md: every field of every block, from the
// same tables the parser and Schema use, so the reference cannot drift.
func Reference() []byte {
	var b strings.Builder
	b.WriteString(`# Graph files

<!-- Generated from runner/graph/fields.go by ` + "`go test ./runner/graph -update`" + `; do not edit. -->

A goal graph is a YAML file: a name, the inputs it takes, the providers its nodes call, and the nodes.
` + "`noderun validate GRAPH`" + ` reports every problem with its file:line; ` + "`noderun schema`" + ` prints the JSON
Schema of the format (a copy is [graph.schema.json](graph.schema.json)). For completion and checking in
editors that use the YAML language server (VS Code's YAML extension, Neovim, Helix), start a graph file with:

` + "```yaml" + `
# yaml-language-server: $schema=https://raw.githubusercontent.com/noderun/noderun/main/docs/graph.schema.json
` + "```" + `

(or a path relative to the file, like ` + "`$schema=../docs/graph.schema.json`" + `).

` + "```yaml" + `
name: study
inputs:
  goal: {description: What to study}          # required: noderun run study.yaml --input goal="..."
  depth: {type: int, default: 3}
providers:
  gpt: {kind: responses, model: gpt-5}
nodes:
  - id: plan
    prompt: 'Plan a study of {{ input "goal" }} in {{ input "depth" }} parts.'
    timeout: 30m
  - id: critique
    needs: [plan]
    continue_on_failure: true                  # optional: the report is written without it
    prompt: 'Find the weak points of: {{ output "plan" }}'
  - id: report
    needs: [plan, critique]
    prompt: |
      Plan: {{ output "plan" }}
      {{ if failed "critique" }}(no critique){{ else }}Critique: {{ output "critique" }}{{ end }}
` + "```" + `

## Templates

A node's ` + "`system`" + ` and ` + "`prompt`" + ` are Go [text/template](https://pkg.go.dev/text/template)s:

| expression | is |
|---|---|
| ` + "`{{ output \"plan\" }}`, `{{ .Outputs.plan }}`, `{{ index .Outputs \"plan\" }}`" + ` | the output of need ` + "`plan`" + ` (ids with ` + "`-`" + ` need the first form) |
| ` + "`{{ input \"goal\" }}`, `{{ .Inputs.goal }}`" + ` | the run's input ` + "`goal`" + ` (a file input: the file's content) |
| ` + "`{{ if failed \"lint\" }}…{{ end }}`" + ` | whether need ` + "`lint`" + ` failed under ` + "`continue_on_failure`" + ` (its output is then empty) |
| ` + "`{{ range $id, $out := .Outputs }}…{{ end }}`" + ` | every need's output |

Validation checks statically that a template reads only the outputs of the node's needs and only declared
inputs; a reference it cannot check (a computed id) is rejected.

## Inputs on the command line

` + "`noderun run GRAPH --input name=value`" + ` (repeatable); ` + "`--input name=@FILE`" + ` gives a file's content (for an
input of type file, its path). A missing required input, an unknown name or a value of the wrong type is
exit 2, naming the graph file and the line of the ` + "`inputs:`" + ` block, before anything is written. The
resolved values (a file input's content) are journaled with the run; ` + "`noderun resume`" + ` reuses them.
A file is read with a bound, ` + "`--max-input SIZE`" + ` (default 8 MiB; ` + "`runner.Options.MaxInputBytes`" + `), never
whole: a larger file (or ` + "`/dev/zero`" + `) is exit 2 naming the input and the bound. A FIFO or a process
substitution (` + "`--input spec=@<(cmd)`" + `) is read once, by the run; Ctrl-C ends a wait for its writer (exit 130).

## Rate limits and failover

**Pacing.** A run paces each provider's requests to the account's rate limits: those the rate-limit headers
of its responses announce (with no ` + "`limits:`" + ` declared, it learns them from the headers of the first
response), bounded further by the provider's ` + "`limits:`" + `, so a graph may use less than its account allows.
A request that would exceed what is left waits for the quota; waiting requests go in graph order, and
` + "`concurrency`" + ` bounds the requests in flight. A 429 parks the node until its Retry-After without spending
its retry budget. ` + "`noderun run --no-pacing`" + ` turns pacing off.

**Failover.** When a node's provider is unavailable (its circuit breaker open, an outage past the recovery
deadline, HTTP 404 model not found, or overloaded (529) past the retry budget), the node moves to the next
provider of its fallback list: the node's ` + "`fallback`" + `, else its provider's. Only that one list is
followed, never the fallbacks' own lists. The fallback starts the node again from scratch, or with
` + "`fallback_continue: true`" + ` continues its journaled partial answer where the fallback provider has a
continuation form. The move is journaled as NR603 ` + "`failed_over`" + `, and the node's verdict says which
provider completed it. An agent harness moves only to harnesses and a model API only to model APIs; a node
with ` + "`side_effects: unsafe`" + ` never fails over.

` + "```yaml\n" + failoverExample + "```" + `
`)
	for _, bl := range Blocks() {
		fmt.Fprintf(&b, "\n## The %s block\n\n%s.\n\n", bl.Name, upperFirst(bl.Where))
		b.WriteString("| field | type | default | what it does | example |\n|---|---|---|---|---|\n")
		for _, f := range bl.Fields {
			def := f.Default
			if f.Required {
				def = "**required**"
			} else if def == "" {
				def = "—"
			}
			if len(f.Kinds) > 0 {
				def += " (kinds: " + strings.Join(f.Kinds, ", ") + ")"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` |\n", f.Name, cell(f.Type), cell(def), cell(f.Doc), cell(f.Example))
		}
	}
	return []byte(b.String())
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// failoverExample is the example of "Rate limits and failover" (a test
// parses it).
const failoverExample = `name: report
providers:
  gpt:
    kind: openai
    model: gpt-5
    limits: {requests_per_minute: 500, tokens_per_minute: 200000}   # less than the account allows
    fallback: [claude]                # where gpt's nodes move when it is unavailable
  claude:
    kind: anthropic
    model: claude-sonnet-4-5
    continuation: prefill
nodes:
  - id: draft
    provider: gpt
    fallback_continue: true           # on claude, continue the partial answer (prefill)
    prompt: Draft the quarterly report.
  - id: check
    needs: [draft]
    provider: gpt
    fallback: []                      # this node waits for gpt rather than move
    prompt: 'Check the figures of: {{ output "draft" }}'
  - id: file
    needs: [draft, check]
    provider: gpt
    side_effects: unsafe              # files the report: never fails over
    prompt: 'File it: {{ output "draft" }}'
`
