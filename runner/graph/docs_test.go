package graph

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/graph.md and docs/graph.schema.json from the field tables")

// docs/graph.md is Reference(); regenerate with: go test ./runner/graph -update
func TestReferenceUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "graph.md")
	if *update {
		if err := os.WriteFile(path, Reference(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with: go test ./runner/graph -update)", err)
	}
	if string(got) != string(Reference()) {
		t.Errorf("%s is out of date; regenerate with: go test ./runner/graph -update", path)
	}
}
