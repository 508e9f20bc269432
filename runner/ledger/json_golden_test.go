package ledger

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/account.json from the code")

// goldenAccount sets every field of an Account, so that the typed fields
// (status, state, verdict, counts by code name, cache provenance) are all
// marshalled.
func goldenAccount() *Account {
	cost, wasted, saved := 0.0123, 0.004, 0.5
	tcost, twasted, tsaved := 0.0123, 0.004, 0.5
	return &Account{RunID: "run-1", Graph: "g", Status: "failed", Profile: "default", WallMS: 9000,
		Nodes: []NodeAccount{
			{ID: "plan", State: "completed", Model: "gpt-x",
				Figures: Figures{Attempts: 1, RecoverySteps: map[CodeName]int{}, Faults: map[CodeName]int{},
					WallMS: 100, UsefulMS: 100, Cached: 1,
					Saved: Saved{Output: 10, Input: 20, Reasoning: 3, CacheRead: 4, CacheWrite: 5, CostUSD: &saved}},
				CachedFrom: CacheSource{Run: "run-0", Node: "plan"},
				Verdict:    Verdict{VerdictCached, "completed from the cache of run run-0 (node plan)"}},
			{ID: "report", State: "failed", Model: "gpt-x",
				Figures: Figures{Attempts: 3, RecoverySteps: map[CodeName]int{"retried": 1, "reattached": 1}, Faults: map[CodeName]int{"disconnect": 2},
					WallMS: 8000, UsefulMS: 5000, TimeLostMS: 2500, QuotaWaitMS: 500,
					Tokens: Tokens{Generated: 100, Needed: 0, Regenerated: 60, Preserved: 7, Unfinished: 40, Input: 50, Reasoning: 9,
						CacheRead: 1, CacheWrite: 2, Estimated: true, Hidden: true},
					CostUSD: &cost, WastedUSD: &wasted},
				GeneratedBy: map[string]int{"openai": 60, "anthropic": 40},
				Verdict:     Verdict{VerdictFailed, "failed: the retry budget is spent"}},
		},
		Totals: Figures{Attempts: 4, RecoverySteps: map[CodeName]int{"retried": 1, "reattached": 1}, Faults: map[CodeName]int{"disconnect": 2},
			WallMS: 8100, UsefulMS: 5100, TimeLostMS: 2500, QuotaWaitMS: 500,
			Tokens:  Tokens{Generated: 100, Regenerated: 60, Preserved: 7, Unfinished: 40, Input: 50, Reasoning: 9, CacheRead: 1, CacheWrite: 2, Estimated: true, Hidden: true},
			CostUSD: &tcost, WastedUSD: &twasted, Cached: 1,
			Saved: Saved{Output: 10, Input: 20, Reasoning: 3, CacheRead: 4, CacheWrite: 5, CostUSD: &tsaved}},
		Summary:  []string{"recovery: 2 disconnects"},
		Warnings: []string{"no price for model \"x\""},
	}
}

// The typed ledger marshals to the JSON the stringly typed one did
// (testdata/account.json was written by the code before the types came, and
// docs/json.md documents it): an embedder's parser keeps working.
func TestAccountJSONGolden(t *testing.T) {
	got, err := json.MarshalIndent(goldenAccount(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *updateGolden {
		if err := os.WriteFile("testdata/account.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("JSON changed:\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// A program that reads `diagnose --json` into an Account gets the cache
// provenance as a struct and the sentences back, and writes the same JSON.
func TestAccountJSONRoundTrip(t *testing.T) {
	want, err := os.ReadFile("testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	var a Account
	if err := json.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if got := a.Nodes[0].CachedFrom; got != (CacheSource{Run: "run-0", Node: "plan"}) {
		t.Errorf("cached_from read as %+v", got)
	}
	if !a.Nodes[1].CachedFrom.IsZero() || a.Nodes[1].Verdict.Text != "failed: the retry budget is spent" {
		t.Errorf("node 2 read as %+v", a.Nodes[1])
	}
	if c, ok := CodeName("reattached").Code(); !ok || c.Name != "reattached" || a.Totals.RecoverySteps["reattached"] != 1 {
		t.Errorf("steps %v, code %+v %v", a.Totals.RecoverySteps, c, ok)
	}
	got, err := json.MarshalIndent(&a, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got = append(got, '\n'); !bytes.Equal(got, want) {
		t.Errorf("round trip changed the JSON:\n%s", got)
	}
	var cs CacheSource
	if err := json.Unmarshal([]byte(`"no-slash"`), &cs); err == nil {
		t.Errorf("cached_from without a slash read as %+v", cs)
	}
}
