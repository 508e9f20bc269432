package graph

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// schemaInexpressible are the invalid graph files whose one malformation
// needs the whole graph to see (references between nodes, templates, which
// provider a node uses) or is not YAML at all: the schema accepts them, and
// only the parser rejects them. Every other invalid file must fail the schema.
var schemaInexpressible = []string{
	"cycle.yaml", "duplicate-id.yaml", "env-not-harness.yaml", "input-not-declared.yaml", "missing-need.yaml",
	"self-need.yaml", "template-dynamic.yaml", "template-not-in-needs.yaml", "template-syntax.yaml",
	"unknown-provider.yaml", "yaml-syntax.yaml", "unknown-fallback.yaml",
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlToJSON decodes a YAML file into the JSON value a YAML-aware editor
// would check (merge keys applied, anchors expanded).
func yamlToJSON(src []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// Every valid graph (and every graph in testdata/graphs) passes the JSON
// Schema; every invalid one it can express fails it, and the ones it cannot
// are exactly those listed.
func TestSchemaAgainstTestdata(t *testing.T) {
	s := compileSchema(t)
	valid, _ := filepath.Glob(filepath.Join(graphTestdata, "valid", "*.yaml"))
	top, _ := filepath.Glob(filepath.Join(graphTestdata, "*.yaml"))
	for _, path := range append(valid, top...) {
		if filepath.Base(path) == "profiles.yaml" { // a profiles file, not a graph
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		v, err := yamlToJSON(src)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s fails the schema:\n%v", path, err)
		}
	}
	invalid, _ := filepath.Glob(filepath.Join(graphTestdata, "invalid", "*.yaml"))
	failed := 0
	for _, path := range invalid {
		name := filepath.Base(path)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		v, err := yamlToJSON(src)
		if err != nil {
			if name != "yaml-syntax.yaml" {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		err = s.Validate(v)
		switch {
		case err == nil && !slices.Contains(schemaInexpressible, name):
			t.Errorf("%s passes the schema", name)
		case err != nil && slices.Contains(schemaInexpressible, name):
			t.Errorf("%s is listed as inexpressible but fails the schema: %v", name, err)
		case err != nil:
			failed++
		}
	}
	if failed < 15 {
		t.Errorf("only %d invalid files fail the schema", failed)
	}
}

// The schema's closed blocks list exactly the parser's fields, and the
// kind-specific provider fields exactly fieldsProvider' kinds.
func TestSchemaCoversEveryField(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	keys := func(m any) []string {
		var out []string
		for k := range m.(map[string]any)["properties"].(map[string]any) {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	defs := s["$defs"].(map[string]any)
	for _, c := range []struct {
		block  any
		fields []Field
	}{
		{s, fieldsGraph}, {defs["node"], fieldsNode}, {defs["provider"], fieldsProvider},
		{defs["input"].(map[string]any)["anyOf"].([]any)[1], fieldsInput}, {defs["sim"], fieldsSim}, {defs["fault"], fieldsFault},
		{defs["limits"], fieldsLimits},
	} {
		want := fieldNames(c.fields)
		slices.Sort(want)
		if got := keys(c.block); !slices.Equal(got, want) {
			t.Errorf("schema block has %v, want %v", got, want)
		}
	}
	if !slices.Equal(graphRootFields, fieldNames(fieldsGraph)) || !slices.Equal(graphNodeFields, fieldNames(fieldsNode)) {
		t.Error("the parser's field lists are not the tables'")
	}
}

// docs/graph.schema.json is Schema(); regenerate with: go test ./runner/graph -update
func TestSchemaFileUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "graph.schema.json")
	if *update {
		if err := os.WriteFile(path, Schema(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with: go test ./runner/graph -update)", err)
	}
	if !bytes.Equal(got, Schema()) {
		t.Errorf("%s is out of date; regenerate with: go test ./runner/graph -update", path)
	}
	if !strings.Contains(string(got), `"$schema": "https://json-schema.org/draft/2020-12/schema"`) {
		t.Error("not a 2020-12 schema")
	}
}

// testdata/graphs/valid/every-field.yaml, which must parse, sets every field
// of the graph, input, provider, node and limits tables: a table row the
// parser does not know fails here.
func TestEveryFieldFileSetsEveryField(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(graphTestdata, "valid", "every-field.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("every-field.yaml", src); err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 0 {
				keys[c.Value] = true
			}
			walk(c)
		}
	}
	walk(&doc)
	for _, fs := range [][]Field{fieldsGraph, fieldsInput, fieldsProvider, fieldsNode, fieldsLimits} {
		for _, f := range fs {
			if !keys[f.Name] {
				t.Errorf("every-field.yaml does not set %q", f.Name)
			}
		}
	}
}
