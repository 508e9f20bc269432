package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// documentedSchema finds each schema docs/json.md documents: a JSON block
// after a `<!-- schema: NAME -->` line.
var documentedSchema = regexp.MustCompile("(?s)<!-- schema: ([a-z-]+) -->\n```json\n(.*?)\n```")

// Schemas compiles the JSON schemas docs/json.md documents, by name: the
// contract of every --json output and of the HTTP API's bodies.
func Schemas(tb testing.TB) map[string]*jsonschema.Schema {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "json.md"))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := map[string]*jsonschema.Schema{}
	for _, m := range documentedSchema.FindAllSubmatch(doc, -1) {
		name := string(m[1])
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(m[2]))
		if err != nil {
			tb.Fatalf("docs/json.md schema %s: %v", name, err)
		}
		url := "https://noderun.invalid/" + name + ".json"
		if err := c.AddResource(url, v); err != nil {
			tb.Fatal(err)
		}
		if out[name], err = c.Compile(url); err != nil {
			tb.Fatalf("docs/json.md schema %s: %v", name, err)
		}
	}
	return out
}

// ValidJSON checks text against a schema of Schemas; what says whose
// output it is.
func ValidJSON(tb testing.TB, sch *jsonschema.Schema, what, text string) {
	tb.Helper()
	if sch == nil {
		tb.Fatalf("%s: docs/json.md has no schema for it", what)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		tb.Errorf("%s: not JSON: %v\n%s", what, err, text)
		return
	}
	if err := sch.Validate(v); err != nil {
		tb.Errorf("%s: does not match docs/json.md: %v\n%s", what, err, text)
	}
}
