package ledger

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func att(n int, outcome journal.Outcome, from, to float64, u journal.Usage) Attempt {
	return Attempt{Attempt: journal.Attempt{N: n, Outcome: outcome, Started: at(from), Ended: at(to)}, Usage: u, UsageRecorded: true}
}

// on is attempt a on provider p.
func on(p string, a Attempt) Attempt {
	a.Provider = p
	return a
}

// rec is a record at s seconds whose node's next data came at next (0: none).
func rec(c diagnostics.Code, s, next float64, attrs ...any) Record {
	r := Record{Record: diagnostics.New(c, c.Name), Time: at(s)}
	for i := 0; i+1 < len(attrs); i += 2 {
		switch k := attrs[i].(type) {
		case diagnostics.Key[int]:
			r.Attrs = append(r.Attrs, k.Attr(attrs[i+1].(int)))
		case diagnostics.Key[string]:
			r.Attrs = append(r.Attrs, k.Attr(attrs[i+1].(string)))
		case diagnostics.Key[diagnostics.Class]:
			r.Attrs = append(r.Attrs, k.Attr(attrs[i+1].(diagnostics.Class)))
		case diagnostics.Key[time.Duration]:
			r.Attrs = append(r.Attrs, k.Attr(attrs[i+1].(time.Duration)))
		}
	}
	if next > 0 {
		r.NextData = at(next)
	}
	return r
}

// The pure core of the accounting: what each kind of history amounts to.
func TestAccountNode(t *testing.T) {
	prices := Prices{"m": {Input: 1, Output: 10, Reasoning: 10}}
	ok, bad := journal.OutcomeOK, journal.OutcomeError
	cases := []struct {
		name                                  string
		state                                 journal.NodeState
		active                                []Span
		atts                                  []Attempt
		recs                                  []Record
		needed, regenerated, preserved, unfin int
		lostMS, wallMS, quotaMS               int64
		faults                                string
		cost                                  float64
		verdict                               string
	}{
		{name: "clean", state: journal.NodeCompleted, active: []Span{{at(0), at(1)}},
			atts:   []Attempt{att(1, ok, 0, 1, journal.Usage{InputTokens: 100, OutputTokens: 1000})},
			needed: 1000, wallMS: 1000, cost: 0.0101,
			verdict: "clean: 1,000 tokens, no recovery needed"},
		{name: "retried", state: journal.NodeCompleted, active: []Span{{at(0), at(5)}},
			atts: []Attempt{att(1, bad, 0, 2, journal.Usage{OutputTokens: 40, Estimated: true}),
				att(2, ok, 3, 5, journal.Usage{InputTokens: 100, OutputTokens: 1000})},
			recs:   []Record{rec(diagnostics.DisconnectDetected, 2, 3.5), rec(diagnostics.RetryStarted, 2, 3.5)},
			needed: 1000, regenerated: 40, lostMS: 3500, wallMS: 5000, faults: "disconnect_detected", cost: 0.0001*2 + 0.01 + 0.0004,
			verdict: "recovered from 1 disconnect by retry: 40 tokens regenerated, 0 preserved, 3.5 s lost"},
		{name: "re-attached", state: journal.NodeCompleted, active: []Span{{at(0), at(9)}},
			atts: []Attempt{att(1, ok, 0, 9, journal.Usage{InputTokens: 10, OutputTokens: 5200, ReasoningTokens: 1000, PreservedTokens: 4210})},
			recs: []Record{rec(diagnostics.DisconnectDetected, 2, 2.4), rec(diagnostics.ResponseCreated, 2, 2.4),
				rec(diagnostics.ReconnectScheduled, 2, 2.4), rec(diagnostics.Reattached, 2.2, 2.4)},
			needed: 4200, preserved: 4210, lostMS: 400, wallMS: 9000, faults: "disconnect_detected", cost: 0.00001 + 0.042 + 0.01,
			verdict: "recovered from 1 disconnect by re-attach: 0 tokens regenerated, 4,210 preserved, 0.4 s lost"},
		{name: "continued", state: journal.NodeCompleted, active: []Span{{at(0), at(3)}},
			atts: []Attempt{att(1, ok, 0, 3, journal.Usage{InputTokens: 10, OutputTokens: 120, PreservedTokens: 60})},
			recs: []Record{rec(diagnostics.DisconnectDetected, 1.5, 1.7), rec(diagnostics.ContinueScheduled, 1.5, 1.7),
				rec(diagnostics.ContinueAccepted, 1.6, 1.7)},
			needed: 120, preserved: 60, lostMS: 200, wallMS: 3000, faults: "disconnect_detected", cost: 0.00001 + 0.0012,
			verdict: "recovered from 1 disconnect by continue: 0 tokens regenerated, 60 preserved, 0.2 s lost"},
		{name: "failed", state: journal.NodeFailed, active: []Span{{at(0), at(1)}},
			atts: []Attempt{att(1, bad, 0, 1, journal.Usage{OutputTokens: 7, Estimated: true})},
			recs: []Record{rec(diagnostics.DisconnectDetected, 1, 0), rec(diagnostics.BudgetExhausted, 1, 0),
				rec(diagnostics.NodeFailed, 1, 0, diagnostics.KeyClass, diagnostics.ClassDisconnect)},
			unfin: 7, wallMS: 1000, faults: "disconnect_detected", cost: 0.00007,
			verdict: "failed: the retry budget is spent after 1 disconnect: 7 tokens generated, 0 tokens regenerated, 0 preserved, 0.0 s lost"},
		// A refused connection retried twice: each attempt's end includes the
		// backoff that followed it, which the fault's stretch covers too. It
		// is counted once: lost is the node's wall, not twice it.
		{name: "refused", state: journal.NodeFailed, active: []Span{{at(0), at(4.2)}},
			atts: []Attempt{att(1, bad, 0, 1.4, journal.Usage{Estimated: true}), att(2, bad, 1.4, 2.8, journal.Usage{Estimated: true}),
				att(3, bad, 2.8, 4.2, journal.Usage{Estimated: true})},
			recs: []Record{rec(diagnostics.ConnectFailed, 0.01, 0), rec(diagnostics.RetryStarted, 0.01, 0),
				rec(diagnostics.ConnectFailed, 1.41, 0), rec(diagnostics.RetryStarted, 1.41, 0),
				rec(diagnostics.ConnectFailed, 2.81, 0), rec(diagnostics.BudgetExhausted, 2.81, 0), rec(diagnostics.NodeFailed, 2.81, 0)},
			lostMS: 4200, wallMS: 4200, faults: "connect_failed",
			verdict: "failed: the retry budget is spent after 3 connect failures: 0 tokens generated, 0 tokens regenerated, 0 preserved, 4.2 s lost"},
		{name: "401", state: journal.NodeFailed, active: []Span{{at(0), at(0.1)}},
			atts: []Attempt{att(1, bad, 0, 0.1, journal.Usage{Estimated: true})},
			recs: []Record{rec(diagnostics.DeterministicError, 0.1, 0, diagnostics.KeyStatus, 401),
				rec(diagnostics.NodeFailed, 0.1, 0, diagnostics.KeyStatus, 401)},
			wallMS: 100, faults: "deterministic_error",
			verdict: "failed: rejected by the provider (401): 0 tokens generated, 0 tokens regenerated, 0 preserved, 0.0 s lost"},
		// Ctrl-C, then `noderun resume` an hour later: the gap is nobody's
		// time, and the verdict says what the node recovered from.
		{name: "interrupted then resumed", state: journal.NodeCompleted, active: []Span{{at(0), at(2)}, {at(3600), at(3603)}},
			atts: []Attempt{att(1, ok, 0, 3603, journal.Usage{InputTokens: 10, OutputTokens: 351, PreservedTokens: 100})},
			recs: []Record{rec(diagnostics.NodeCanceled, 2, 3600.5, diagnostics.KeyOutputBytes, 309),
				rec(diagnostics.NodeResumed, 3600, 3600.5, diagnostics.KeyAction, "check"), rec(diagnostics.StatusChecked, 3600.1, 3600.5),
				rec(diagnostics.Reattached, 3600.2, 3600.5)},
			needed: 351, preserved: 100, lostMS: 500, wallMS: 5000, faults: "node_resumed", cost: 0.00001 + 0.00351,
			verdict: "recovered from 1 interruption by re-attach: 0 tokens regenerated, 100 preserved, 0.5 s lost"},
		// Paced: the node waited 2 s for quota within its active time, then
		// streamed cleanly. Waiting is not lost, nor useful.
		{name: "paced", state: journal.NodeCompleted, active: []Span{{at(0), at(3)}},
			atts:   []Attempt{att(1, ok, 2, 3, journal.Usage{InputTokens: 10, OutputTokens: 100})},
			recs:   []Record{rec(diagnostics.QuotaWait, 2, 0, diagnostics.KeyWaited, 2*time.Second)},
			needed: 100, wallMS: 3000, quotaMS: 2000, cost: 0.00001 + 0.001,
			verdict: "clean: 100 tokens, no recovery needed; 2.0 s waiting for quota"},
		// A 429 parked the node 1.5 s (Retry-After), then the same request
		// went again when the pacer let it (0.5 s more): quota, not lost.
		{name: "parked", state: journal.NodeCompleted, active: []Span{{at(0), at(3)}},
			atts: []Attempt{att(1, ok, 0, 3, journal.Usage{InputTokens: 10, OutputTokens: 100})},
			recs: []Record{rec(diagnostics.RateLimitWait, 0.5, 2.5), rec(diagnostics.QuotaParked, 0.5, 2.5),
				rec(diagnostics.QuotaWait, 2.4, 2.5, diagnostics.KeyWaited, 500*time.Millisecond)},
			needed: 100, wallMS: 3000, quotaMS: 2000, faults: "rate_limit_wait", cost: 0.00001 + 0.001,
			verdict: "recovered from 1 rate limit by waiting for quota: 0 tokens regenerated, 0 preserved, 0.0 s lost; 2.0 s waiting for quota"},
		// Its provider refused connections until the breaker opened; the
		// node moved to its fallback and completed there from scratch.
		{name: "failed over", state: journal.NodeCompleted, active: []Span{{at(0), at(2)}},
			atts: []Attempt{on("primary", att(1, bad, 0, 0.5, journal.Usage{Estimated: true})),
				on("backup", att(2, ok, 0.5, 2, journal.Usage{InputTokens: 10, OutputTokens: 100}))},
			recs: []Record{rec(diagnostics.ConnectFailed, 0.1, 0.6),
				rec(diagnostics.FailedOver, 0.5, 0.6, diagnostics.KeyTo, "backup", diagnostics.KeyClass, diagnostics.ClassConnect)},
			needed: 100, lostMS: 600, wallMS: 2000, faults: "connect_failed", cost: 2*0.00001 + 0.001, // each attempt's input
			verdict: "recovered from 1 connect failure by failover (completed on fallback backup, moved by connect_failed; backup generated 100, primary generated 0): 0 tokens regenerated, 0 preserved, 0.6 s lost"},
		{name: "interrupted", state: journal.NodeCanceled, active: []Span{{at(0), at(2)}},
			atts: []Attempt{att(1, bad, 0, 2, journal.Usage{OutputTokens: 80, Estimated: true})},
			recs: []Record{rec(diagnostics.NodeCanceled, 2, 0, diagnostics.KeyOutputBytes, 309),
				rec(diagnostics.WorkDetached, 2, 0, diagnostics.KeyRef, "resp_1")},
			unfin: 80, wallMS: 2000, cost: 0.0008,
			verdict: "interrupted after 309 bytes; response resp_1 keeps running at the provider (detached): 0 tokens regenerated, 0 preserved, 0.0 s lost"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nd := &Node{Node: journal.Node{ID: "n", State: c.state}, Model: "m", Attempts: c.atts, Records: c.recs, Active: c.active}
			na := AccountNode(nd, prices)
			tk := na.Tokens
			if tk.Needed != c.needed || tk.Regenerated != c.regenerated || tk.Preserved != c.preserved || tk.Unfinished != c.unfin ||
				tk.Generated != c.needed+c.regenerated+c.unfin {
				t.Errorf("tokens %+v", tk)
			}
			if na.TimeLostMS != c.lostMS || na.WallMS != c.wallMS || na.QuotaWaitMS != c.quotaMS ||
				na.UsefulMS+na.TimeLostMS+na.QuotaWaitMS != na.WallMS {
				t.Errorf("time: lost %d ms, quota %d ms, wall %d ms, useful %d ms; want lost %d, quota %d, wall %d",
					na.TimeLostMS, na.QuotaWaitMS, na.WallMS, na.UsefulMS, c.lostMS, c.quotaMS, c.wallMS)
			}
			var faults []string
			for _, k := range sortedKeys(na.Faults) {
				faults = append(faults, string(k))
			}
			if got := strings.Join(faults, ","); got != c.faults {
				t.Errorf("faults %q, want %q", got, c.faults)
			}
			if na.CostUSD == nil || math.Abs(*na.CostUSD-c.cost) > 1e-9 {
				t.Errorf("cost %v, want %.6f", na.CostUSD, c.cost)
			}
			if na.Verdict.Text != c.verdict {
				t.Errorf("verdict\n got %q\nwant %q", na.Verdict.Text, c.verdict)
			}
			if p, ok := kindLead[na.Verdict.Kind]; !ok || !strings.HasPrefix(na.Verdict.Text, p) {
				t.Errorf("verdict kind %q (lead %q) does not fit %q", na.Verdict.Kind, p, na.Verdict.Text)
			}
		})
	}
}

// A price table prices the models it names and only those: the run's total
// leaves the others out and a warning names them and their nodes.
func TestMissingPriceIsAWarning(t *testing.T) {
	run := &Run{Run: journal.Run{ID: "r"}, Nodes: []*Node{
		{Node: journal.Node{ID: "a", State: journal.NodeCompleted}, Model: "sim",
			Attempts: []Attempt{att(1, journal.OutcomeOK, 0, 1, journal.Usage{OutputTokens: 100})}},
		{Node: journal.Node{ID: "b", State: journal.NodeCompleted}, Model: "gpt-x",
			Attempts: []Attempt{att(1, journal.OutcomeOK, 0, 1, journal.Usage{OutputTokens: 100})}},
		{Node: journal.Node{ID: "c", State: journal.NodeCompleted}, Model: "gpt-x",
			Attempts: []Attempt{att(1, journal.OutcomeOK, 0, 1, journal.Usage{OutputTokens: 100})}},
	}}
	a := AccountOf(run, Prices{"sim": {Output: 10}})
	if a.Nodes[0].CostUSD == nil || a.Nodes[1].CostUSD != nil || a.Totals.CostUSD == nil || *a.Totals.CostUSD != 0.001 {
		t.Errorf("costs: %v %v %v", a.Nodes[0].CostUSD, a.Nodes[1].CostUSD, a.Totals.CostUSD)
	}
	want := `no price for model "gpt-x" (2 nodes b, c): their cost is not in the total`
	if len(a.Warnings) != 1 || a.Warnings[0] != want {
		t.Errorf("warnings %q, want %q", a.Warnings, want)
	}
	if last := a.Summary[len(a.Summary)-1]; !strings.HasPrefix(last, "cost: $0.0010") || !strings.Contains(last, "priced models only") {
		t.Errorf("cost line %q", last)
	}
	if a := AccountOf(run, nil); a.Totals.CostUSD != nil || len(a.Warnings) != 0 || strings.HasPrefix(a.Summary[len(a.Summary)-1], "cost") {
		t.Errorf("without prices: %+v", a)
	}
}

func TestSummaryNamesRejections(t *testing.T) {
	run := &Run{Run: journal.Run{ID: "r"}, Nodes: []*Node{{Node: journal.Node{ID: "a", State: journal.NodeFailed},
		Attempts: []Attempt{att(1, journal.OutcomeError, 0, 0.1, journal.Usage{Estimated: true})},
		Records:  []Record{rec(diagnostics.DeterministicError, 0.1, 0, diagnostics.KeyStatus, 401), rec(diagnostics.NodeFailed, 0.1, 0)}}}}
	if s := AccountOf(run, nil).Summary[0]; !strings.HasPrefix(s, "recovery: 1 rejection, ") {
		t.Errorf("summary %q", s)
	}
}

func TestParsePrices(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{"gpt-5: {input: 1.25, output: 10, reasoning: 10}\n", true},
		{"m: {input: 1}\n", true},
		{"sim: {output: 1}\n", true},
		{"", false},
		{"m: {input: -1}\n", false},
		{"m: {inptu: 1}\n", false},
		{"m: {input: .inf}\n", false},
		{"[1, 2]\n", false},
		{"x: &a {input: 1}\ny: *a\n", true},
	}
	for _, c := range cases {
		p, err := ParsePrices([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("%q: %v, %v", c.in, p, err)
		}
	}
}

// A bad price table is reported with the file, the line, the model and the
// field, in noderun's words: no Go type name (issue 24: "main.price").
func TestPricesErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct{ in, want string }{
		{"gpt: [1, 2]\n", `p.yaml:1: gpt: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not a list`},
		{"- 1\n", `p.yaml:1: a price table is a mapping of model to prices, not a list`},
		{"a: {input: 1}\ngpt: {inptu: 1}\n", `p.yaml:2: gpt: unknown field "inptu" (known: input, output, reasoning, cache_read, cache_write)`},
		{"gpt:\n  input: 1\n  output: ten\n", `p.yaml:3: gpt: output: "ten" is not a number of USD per 1M tokens`},
		{"gpt: {output: -1}\n", `p.yaml:1: gpt: output: -1: prices must be finite and not negative`},
		{"a: {input: 1}\na: {input: 2}\n", `p.yaml:2: model "a" is given twice`},
		{"a: {input: 1\n", `p.yaml:1: not YAML:`},
		{"", `p.yaml: no prices`},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "p.yaml")
		if err := os.WriteFile(path, []byte(c.in), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPrices(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "ledger.") || strings.Contains(err.Error(), "unmarshal") || strings.Contains(err.Error(), "!!")) {
			t.Errorf("%q: Go's words leak: %v", c.in, err)
		}
	}
}

// FuzzParsePrices: a price table never panics, and an accepted one has
// finite, non-negative prices.
func FuzzParsePrices(f *testing.F) {
	f.Add([]byte("gpt-5: {input: 1.25, output: 10, reasoning: 10}\n"))
	f.Add([]byte("m: {input: .nan}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := ParsePrices(b)
		if err != nil {
			return
		}
		for m, p := range ps {
			for _, v := range []float64{p.Input, p.Output, p.Reasoning} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s: accepted price %v", m, v)
				}
			}
		}
	})
}

func TestWords(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{pluralWord(1, "disconnect"), "1 disconnect"}, {pluralWord(2, "thread mismatch"), "2 thread mismatches"},
		{pluralWord(3, "connect failure"), "3 connect failures"}, {Thousands(4210), "4,210"}, {Thousands(-1234567), "-1,234,567"},
		{Seconds(4284), "4.3 s"}, {fmt.Sprint(union([]Span{{at(0), at(2)}, {at(1), at(3)}, {at(5), at(6)}})), fmt.Sprint([]Span{{at(0), at(3)}, {at(5), at(6)}})},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// kindLead is how the sentence of each kind of verdict begins: the kind and
// the words cannot disagree.
var kindLead = map[VerdictKind]string{
	VerdictNotRun: "did not run", VerdictRunning: "running:", VerdictCached: "from the cache:",
	VerdictClean: "clean:", VerdictNoFault: "no fault,", VerdictRecovered: "recovered from ",
	VerdictSkipped: "skipped:", VerdictAttention: "needs attention:", VerdictInterrupted: "interrupted",
	VerdictStopped: "stopped:", VerdictFailed: "failed:",
}
