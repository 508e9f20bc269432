package ledger

import (
	"bytes"
	"errors"
	"testing"
)

// diagnose's text: the run, the table, a verdict per node with its steps,
// the summary and the warnings; the table alone when asked; prose folded
// to the width, the table's rows never.
func TestWriteText(t *testing.T) {
	cost := 0.0123
	acct := &Account{RunID: "run-1", Graph: "g", Status: "completed", Profile: "default",
		Nodes: []NodeAccount{
			{ID: "plan", State: "completed", Verdict: Verdict{VerdictClean, "completed on its first attempt"},
				Figures: Figures{Attempts: 1, Tokens: Tokens{Generated: 1200}, CostUSD: &cost}},
			{ID: "report", State: "completed", Verdict: Verdict{VerdictRecovered, "re-attached after a dropped stream; nothing regenerated"},
				Figures: Figures{Attempts: 1, TimeLostMS: 2500, QuotaWaitMS: 100, RecoverySteps: map[CodeName]int{"reattach": 2, "backoff": 1},
					Tokens: Tokens{Generated: 4210, Preserved: 2000}}},
		},
		Summary:  []string{"2 nodes completed"},
		Warnings: []string{"model x has no price"},
	}
	table := "NODE    STATE      ATTEMPTS  STEPS  LOST   QUOTA WAIT  GENERATED  REGENERATED  PRESERVED  COST\n" +
		"plan    completed  1         0      0.0 s  0.0 s       1,200      0            0          $0.0123\n" +
		"report  completed  1         3      2.5 s  0.1 s       4,210      0            2,000      -\n"
	cases := []struct {
		name string
		opts TextOptions
		want string
	}{
		{"whole", TextOptions{}, "run run-1 (g) completed, profile default\n" + table + "\n" +
			"plan: completed on its first attempt\n" +
			"report: re-attached after a dropped stream; nothing regenerated\n  steps: backoff×1, reattach×2\n\n" +
			"2 nodes completed\nwarning: model x has no price\n"},
		{"table only", TextOptions{TableOnly: true}, table + "warning: model x has no price\n"},
		{"folded", TextOptions{Width: 40}, "run run-1 (g) completed, profile default\n" + table + "\n" +
			"plan: completed on its first attempt\n" +
			"report: re-attached after a dropped\n  stream; nothing regenerated\n  steps: backoff×1, reattach×2\n\n" +
			"2 nodes completed\nwarning: model x has no price\n"},
	}
	for _, c := range cases {
		var b bytes.Buffer
		if err := WriteText(&b, acct, c.opts); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, b.String(), c.want)
		}
	}
	if err := WriteText(failingWriter{}, acct, TextOptions{}); err == nil {
		t.Error("a failed write is not returned")
	}
}

// Issue 46: a column every row of which says nothing (no quota waited, for
// a graph without limits; no price known) is left out.
func TestWriteTextDropsEmptyColumns(t *testing.T) {
	acct := &Account{RunID: "run-1", Graph: "g", Status: "completed", Profile: "default",
		Nodes: []NodeAccount{
			{ID: "plan", State: "completed", Figures: Figures{Attempts: 1, Tokens: Tokens{Generated: 1200}}},
			{ID: "report", State: "completed", Figures: Figures{Attempts: 2, TimeLostMS: 2500, QuotaWaitMS: 3, Tokens: Tokens{Generated: 4210}}},
		},
	}
	var b bytes.Buffer
	if err := WriteText(&b, acct, TextOptions{TableOnly: true}); err != nil {
		t.Fatal(err)
	}
	want := "NODE    STATE      ATTEMPTS  STEPS  LOST   GENERATED  REGENERATED  PRESERVED\n" +
		"plan    completed  1         0      0.0 s  1,200      0            0\n" +
		"report  completed  2         0      2.5 s  4,210      0            0\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
