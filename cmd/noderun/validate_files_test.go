package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 46: validate checks profiles, price and fault files too, each in
// full (every problem, at its line), beside graphs or alone; --json
// documents them (docs/json.md) and the exit code is 2 when any is invalid.
func TestValidateProfilesPricesAndFaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badProfiles := write("profiles.yaml", "ci:\n  retries: many\n  idle_timeout: 0s\n")
	badPrices := write("prices.yaml", "gpt-5:\n  input: ten\n  outptu: 1\n")
	badFaults := write("sim.yaml", "tokens: many\nseeds: 3\n")
	good := write("good.yaml", "ci: {retries: 2}\n")

	code, out, stderr := runCLI(t, "validate", "--profiles", badProfiles, "--profiles", good, "--prices", badPrices, "--faults", badFaults)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitUsage, out, stderr)
	}
	for _, want := range []string{
		badProfiles + ":2:", badProfiles + ":3:", // both problems, at their lines
		badPrices + ":2:", badPrices + ":3:",
		badFaults + ":1:", badFaults + ":2:",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks a problem at %s:\n%s", want, stderr)
		}
	}
	if !strings.Contains(out, good+": ok (profiles)") {
		t.Errorf("stdout does not say the good file is ok:\n%s", out)
	}
	for _, goName := range []string{"int64", "float64", "time.Duration", "cannot unmarshal"} {
		if strings.Contains(stderr, goName) {
			t.Errorf("the problems speak Go (%q):\n%s", goName, stderr)
		}
	}

	code, out, _ = runCLI(t, "validate", "--json", "--prices", badPrices, "--faults", good)
	if code != exitUsage {
		t.Fatalf("--json: exit %d, want %d", code, exitUsage)
	}
	validJSON(t, schemas(t)["validate"], "validate --json --prices --faults", out)
	var v struct {
		Graphs []any `json:"graphs"`
		Files  []struct {
			Path, Kind string
			OK         bool
			Errors     []string
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Graphs) != 0 || len(v.Files) != 2 || v.Files[0].Kind != "prices" || v.Files[0].OK || len(v.Files[0].Errors) < 2 {
		t.Errorf("validate --json: %s", out)
	}

	if code, _, stderr := runCLI(t, "validate"); code != exitUsage || !strings.Contains(stderr, "--profiles") {
		t.Errorf("validate with nothing to check: exit %d, %s", code, stderr)
	}
}
