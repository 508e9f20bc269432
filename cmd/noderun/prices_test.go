package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `noderun prices`: the built-in table (at least 20 models of the three
// vendors, dated, with its sources), in text and JSON, and a --prices file
// over it.
func TestPricesCommand(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, "prices")
	if code != 0 || !strings.Contains(out, "claude-sonnet-4-5") || !strings.Contains(out, "gpt-4o-mini") ||
		!strings.Contains(out, "gemini-2.5-pro") || !strings.Contains(out, "As of 20") || !strings.Contains(out, "0.15 ") {
		t.Fatalf("prices: %d\n%s\n%s", code, out, errs)
	}
	mine := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(mine, []byte("gpt-4o: {input: 9, output: 9, reasoning: 9}\nsim: {input: 1, output: 2, reasoning: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "prices", "--json", "--prices", mine)
	var doc struct {
		AsOf    string `json:"as_of"`
		Sources []struct{ Vendor, URL string }
		Prices  map[string]struct{ Input, Output float64 }
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("prices --json: %d\n%s\n%s", code, out, errs)
	}
	vendors := map[string]bool{}
	for _, s := range doc.Sources {
		vendors[s.Vendor] = strings.HasPrefix(s.URL, "https://")
	}
	if len(doc.Prices) < 20 || doc.AsOf == "" || !vendors["openai"] || !vendors["anthropic"] || !vendors["google"] {
		t.Errorf("prices --json: %d models, as_of %q, sources %v", len(doc.Prices), doc.AsOf, vendors)
	}
	if doc.Prices["gpt-4o"].Input != 9 || doc.Prices["sim"].Output != 2 || doc.Prices["gpt-4o-mini"].Input != 0.15 {
		t.Errorf("--prices over the built-in table: %+v %+v %+v", doc.Prices["gpt-4o"], doc.Prices["sim"], doc.Prices["gpt-4o-mini"])
	}
}
