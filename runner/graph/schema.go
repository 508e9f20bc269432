package graph

import (
	"encoding/json"
	"maps"
	"slices"
)

// SchemaID is where the JSON Schema of graph files is published in the
// repository (docs/graph.schema.json, a copy of Schema()).
const SchemaID = "https://github.com/noderun/noderun/blob/main/docs/graph.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of graph files, made from
// the same field tables as the parser. Editors use it for completion and
// checking (the YAML language server: `# yaml-language-server: $schema=...`).
// It checks each field's type and form; what needs the whole graph (needs
// that name no node, cycles, templates that read undeclared outputs or
// inputs) only the parser can check, so `noderun validate` remains the
// authority.
func Schema() []byte {
	kinds := map[string][]string{}
	for _, k := range graphProviderKinds {
		kinds[k] = nil
	}
	for _, f := range fieldsProvider {
		for _, k := range graphProviderKinds {
			if f.Kinds == nil || slices.Contains(f.Kinds, k) {
				kinds[k] = append(kinds[k], f.Name)
			}
		}
	}
	var perKind []any
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		perKind = append(perKind, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"kind": map[string]any{"const": k}}, "required": []any{"kind"}},
			"then": map[string]any{"propertyNames": map[string]any{"enum": toAny(kinds[k])}},
		})
	}
	provider := object("A model endpoint or agent harness.", fieldsProvider)
	provider["allOf"] = perKind
	input := object("A value a run takes: `noderun run --input name=value`.", fieldsInput)
	// A required input has no default.
	input["not"] = map[string]any{"properties": map[string]any{"required": map[string]any{"const": true}}, "required": []any{"required", "default"}}
	limits := object("An account's rate limits as the graph declares them; at least one.", fieldsLimits)
	limits["minProperties"] = 1
	node := object("One model call or agent turn.", fieldsNode)
	// An unsafe node never fails over: a list of its own would do nothing.
	// (A harness node is unsafe by default too, which only the parser,
	// knowing the node's provider, can see.)
	node["if"] = map[string]any{"properties": map[string]any{"side_effects": map[string]any{"const": string(SideUnsafe)}}, "required": []any{"side_effects"}}
	node["then"] = map[string]any{"properties": map[string]any{"fallback": map[string]any{"maxItems": 0}}}
	s := object("A noderun goal graph: docs/graph.md.", fieldsGraph)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "noderun goal graph"
	s["$defs"] = map[string]any{
		"input":    map[string]any{"anyOf": []any{map[string]any{"type": "null"}, input}},
		"provider": provider,
		"node":     node,
		"sim":      object("The embedded simulator: how it generates and fails.", fieldsSim),
		"fault":    object("A scripted failure of the simulator.", fieldsFault),
		"limits":   limits,
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // the schema is built from literals
	}
	return append(b, '\n')
}

// object is the schema of a block: its fields, closed to others.
func object(doc string, fields []Field) map[string]any {
	props := map[string]any{}
	var required []any
	for _, f := range fields {
		p := maps.Clone(f.schema)
		if p == nil {
			p = map[string]any{}
		}
		p["description"] = fieldDescription(f)
		props[f.Name] = p
		if f.Required {
			required = append(required, f.Name)
		}
	}
	o := map[string]any{"type": "object", "description": doc, "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func fieldDescription(f Field) string {
	d := f.Doc
	if f.Default != "" {
		d += " Default: " + f.Default + "."
	}
	return d
}
