package ledger

import (
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// vendorOf names the vendor of a built-in model by its name: every entry
// must belong to one, so that a typo ("gtp-4o") cannot hide in the table.
func vendorOf(model string) string {
	switch {
	case strings.HasPrefix(model, "gpt-"), regexp.MustCompile(`^o\d`).MatchString(model):
		return "openai"
	case strings.HasPrefix(model, "claude-"):
		return "anthropic"
	case strings.HasPrefix(model, "gemini-"):
		return "google"
	}
	return ""
}

// The shipped table parses, is dated and sourced, and every price in it is
// one a bill could have: finite, not negative, reasoning at the output
// price (the three vendors bill reasoning as output), a cached read no
// dearer than input and a cache write no cheaper.
func TestBuiltinPricesTable(t *testing.T) {
	bt := BuiltinPrices()
	if len(bt.Prices) < 20 {
		t.Errorf("%d models, want at least 20", len(bt.Prices))
	}
	perVendor := map[string]int{}
	for m, p := range bt.Prices {
		v := vendorOf(m)
		if v == "" {
			t.Errorf("%s: no vendor (OpenAI, Anthropic or Google) by its name", m)
		}
		perVendor[v]++
		fields := map[string]float64{"input": p.Input, "output": p.Output, "reasoning": p.Reasoning}
		if p.CacheRead != nil {
			fields["cache_read"] = *p.CacheRead
		}
		if p.CacheWrite != nil {
			fields["cache_write"] = *p.CacheWrite
		}
		for f, x := range fields {
			if !(x >= 0) || math.IsInf(x, 0) {
				t.Errorf("%s: %s %v, want finite and not negative", m, f, x)
			}
		}
		if p.Input <= 0 || p.Output <= 0 {
			t.Errorf("%s: input %v, output %v: a priced model costs something", m, p.Input, p.Output)
		}
		if p.Reasoning != p.Output {
			t.Errorf("%s: reasoning %v, output %v: reasoning is billed as output", m, p.Reasoning, p.Output)
		}
		if p.CacheRead != nil && *p.CacheRead > p.Input {
			t.Errorf("%s: cache_read %v above input %v", m, *p.CacheRead, p.Input)
		}
		if p.CacheWrite != nil && *p.CacheWrite < p.Input {
			t.Errorf("%s: cache_write %v below input %v", m, *p.CacheWrite, p.Input)
		}
		if p.CacheWrite != nil && v != "anthropic" {
			t.Errorf("%s: cache_write given, but only Anthropic prices cache writes apart", m)
		}
	}
	for _, v := range []string{"openai", "anthropic", "google"} {
		if perVendor[v] < 5 {
			t.Errorf("%s: %d models, want at least 5", v, perVendor[v])
		}
	}

	if bt.AsOf.IsZero() || bt.AsOf.After(time.Now()) || bt.AsOf.Before(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("as_of %v: want the day the prices were read", bt.AsOf)
	}
	sourced := map[string]bool{}
	for _, s := range bt.Sources {
		u, err := url.Parse(s.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			t.Errorf("source %q: want an https URL", s.URL)
		}
		sourced[s.Vendor] = true
	}
	for v := range perVendor {
		if !sourced[v] {
			t.Errorf("%s has models but no source", v)
		}
	}
}

// BuiltinPrices hands out copies: what one caller changes, the next one
// does not see.
func TestBuiltinPricesAreCopies(t *testing.T) {
	a := BuiltinPrices()
	*a.Prices["claude-sonnet-4-5"].CacheRead = 99
	a.Prices["gpt-4o"] = Price{Input: 99}
	delete(a.Prices, "o3")
	a.Sources[0].URL = "https://example.com"
	b := BuiltinPrices()
	if got := *b.Prices["claude-sonnet-4-5"].CacheRead; got != 0.30 {
		t.Errorf("claude-sonnet-4-5 cache_read %v after a caller changed its copy", got)
	}
	if b.Prices["gpt-4o"].Input != 2.50 || b.Prices["o3"].Input != 2 || b.Sources[0].URL == "https://example.com" {
		t.Errorf("the built-in table changed with a caller's copy")
	}
}

// Lookup finds a model by the names requests really send, and never a
// different model by a shared prefix.
func TestPricesLookup(t *testing.T) {
	builtin := BuiltinPrices().Prices
	small := Prices{"gpt-4o": {Input: 2.5}, "o3": {Input: 2}, "claude-sonnet-4-5": {Input: 3},
		"gemini-2.5-pro": {Input: 1.25}, "claude-3-5-haiku": {Input: 0.8}, "models/custom": {Input: 7}}
	cases := []struct {
		table Prices
		model string
		input float64 // 0: not found
	}{
		// exact, and the forms requests send
		{small, "gpt-4o", 2.5},
		{small, "gpt-4o-2024-08-06", 2.5},
		{small, "claude-sonnet-4-5-20250929", 3},
		{small, "models/gemini-2.5-pro", 1.25},
		{small, "claude-3-5-haiku-latest", 0.8},
		{small, "claude-3-5-haiku-20241022", 0.8},
		{small, "o3-2025-04-16", 2},
		{small, "models/custom", 7}, // an exact name is taken as it is
		// a different model, however its name starts
		{small, "gpt-4o-mini", 0},
		{small, "gpt-4o-mini-2024-07-18", 0},
		{small, "gpt-4o-audio-preview", 0},
		{small, "o3-pro", 0},
		{small, "o3-pro-2025-06-10", 0},
		{small, "o3-mini", 0},
		{small, "gpt-4", 0},
		{small, "claude-sonnet-4", 0},
		{small, "claude-sonnet-4-5-v2", 0},
		{small, "gemini-2.5-pro-preview-05-06", 0},
		{small, "openai/gpt-4o", 0},
		{small, "GPT-4o", 0},
		// not a snapshot date
		{small, "gpt-4o-2024-08", 0},
		{small, "gpt-4o-20240806x", 0},
		{small, "gpt-4o-0806", 0},
		// nothing to find
		{small, "", 0},
		{small, "models/", 0},
		{small, "-latest", 0},
		{nil, "gpt-4o", 0},
		// the built-in table, by real request names
		{builtin, "claude-sonnet-4-5-20250929", 3},
		{builtin, "claude-sonnet-4-20250514", 3},
		{builtin, "claude-sonnet-4-0", 3},
		{builtin, "claude-opus-4-1-20250805", 15},
		{builtin, "claude-opus-4-5-20251101", 5},
		{builtin, "claude-haiku-4-5-20251001", 1},
		{builtin, "claude-3-5-haiku-latest", 0.80},
		{builtin, "gpt-4o-2024-08-06", 2.50},
		{builtin, "gpt-4o-2024-11-20", 2.50},
		{builtin, "gpt-4o-2024-05-13", 5}, // priced apart from gpt-4o
		{builtin, "gpt-4o-mini-2024-07-18", 0.15},
		{builtin, "gpt-5-2025-08-07", 1.25},
		{builtin, "gpt-5-mini-2025-08-07", 0.25},
		{builtin, "gpt-4.1-nano-2025-04-14", 0.10},
		{builtin, "o4-mini-2025-04-16", 1.10},
		{builtin, "models/gemini-2.5-pro", 1.25},
		{builtin, "models/gemini-2.5-flash-lite", 0.10},
		{builtin, "o3-pro", 0},
		{builtin, "o1-pro", 0},
		{builtin, "o1-mini", 0},
		{builtin, "gpt-5-pro", 0},
		{builtin, "gpt-5-chat-latest", 0},
		{builtin, "claude-opus-4-7", 0},
		{builtin, "gemini-2.5-flash-image", 0},
		{builtin, "gemini-2.5-flash-preview-04-17", 0},
		{builtin, "sim", 0},
	}
	for _, c := range cases {
		p, ok := c.table.Lookup(c.model)
		if ok != (c.input != 0) || p.Input != c.input {
			t.Errorf("Lookup(%q) = %v, %v; want input %v (0: not found)", c.model, p.Input, ok, c.input)
		}
	}
}

// A given table wins over the built-in one model by model, and leaves the
// rest to it; neither input changes.
func TestPricesOver(t *testing.T) {
	read := 0.5
	base := Prices{"gpt-4o": {Input: 2.5, Output: 10}, "o3": {Input: 2, CacheRead: &read}, "gpt-4o-2024-05-13": {Input: 5}}
	mine := Prices{"gpt-4o": {Input: 1, Output: 4}, "sim": {Output: 10}}
	got := mine.Over(base)
	for _, c := range []struct {
		model string
		input float64
	}{{"gpt-4o", 1}, {"gpt-4o-2024-08-06", 1}, {"o3", 2}, {"sim", 0}, {"gpt-4o-2024-05-13", 5}} {
		if p, ok := got.Lookup(c.model); !ok || p.Input != c.input {
			t.Errorf("%s: input %v, %v; want %v", c.model, p.Input, ok, c.input)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d models, want 4: %v", len(got), got)
	}
	*got["o3"].CacheRead = 9
	got["gpt-4o"] = Price{}
	delete(got, "sim")
	if read != 0.5 || base["gpt-4o"].Input != 2.5 || mine["gpt-4o"].Input != 1 || len(mine) != 2 {
		t.Errorf("changing Over's result changed its inputs: base %v (cache_read %v), mine %v", base, read, mine)
	}
	if Prices(nil).Over(nil) != nil || (Prices{}).Over(Prices{}) != nil {
		t.Errorf("nothing over nothing: want nil (no cost), not an empty table")
	}
	if p, ok := Prices(nil).Over(base).Lookup("o3"); !ok || p.Input != 2 {
		t.Errorf("no table over base: want base")
	}
}

// The built-in prices, applied to a known usage, come to what a hand count
// of the vendor's rates gives: each want is written out from the rates,
// not computed by the code under test.
func TestBuiltinPricesCostByHand(t *testing.T) {
	builtin := BuiltinPrices().Prices
	cases := []struct {
		model string
		u     journal.Usage
		want  float64
	}{
		// 1M input at $2.50 + 500k output at $10
		{"gpt-4o-2024-08-06", journal.Usage{InputTokens: 1_000_000, OutputTokens: 500_000}, 2.50 + 5.00},
		// 200k input at $3, 1M cache reads at $0.30, 100k cache writes at
		// $3.75, 50k visible output and 20k reasoning at $15
		{"claude-sonnet-4-5-20250929", journal.Usage{InputTokens: 200_000, OutputTokens: 70_000, ReasoningTokens: 20_000,
			CacheReadTokens: 1_000_000, CacheWriteTokens: 100_000}, 0.60 + 0.30 + 0.375 + 0.75 + 0.30},
		// 100k input at $0.30, 1M cached at $0.03, 10k answer and 40k
		// thoughts at $2.50
		{"models/gemini-2.5-flash", journal.Usage{InputTokens: 100_000, OutputTokens: 50_000, ReasoningTokens: 40_000,
			CacheReadTokens: 1_000_000}, 0.03 + 0.03 + 0.025 + 0.10},
		// 2M input at $1.10, 1M cached at $0.275, 250k of which 200k
		// reasoning at $4.40
		{"o4-mini-2025-04-16", journal.Usage{InputTokens: 2_000_000, OutputTokens: 250_000, ReasoningTokens: 200_000,
			CacheReadTokens: 1_000_000}, 2.20 + 0.275 + 0.22 + 0.88},
		// no verified cached price: 1M cached tokens cost as input, $2
		{"gemini-3-pro-preview", journal.Usage{InputTokens: 500_000, OutputTokens: 100_000, CacheReadTokens: 1_000_000},
			1.00 + 2.00 + 1.20},
		// no separate write price at OpenAI: written tokens cost as input
		{"gpt-5-nano", journal.Usage{InputTokens: 1_000_000, CacheWriteTokens: 1_000_000, CacheReadTokens: 1_000_000,
			OutputTokens: 1_000_000}, 0.05 + 0.05 + 0.005 + 0.40},
	}
	for _, c := range cases {
		p, ok := builtin.Lookup(c.model)
		if !ok {
			t.Errorf("%s: no price", c.model)
			continue
		}
		if got := p.cost(c.u, c.u.Visible()); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: $%.6f, want $%.6f", c.model, got, c.want)
		}
	}
}

// An account priced by the built-in table prices nodes and cache hits by
// the names their requests sent, dated snapshots included.
func TestAccountPricesRequestNames(t *testing.T) {
	run := &Run{Run: journal.Run{ID: "r"}, Nodes: []*Node{
		{Node: journal.Node{ID: "a", State: journal.NodeCompleted}, Model: "claude-sonnet-4-5-20250929",
			Active:   []Span{{at(0), at(1)}},
			Attempts: []Attempt{att(1, journal.OutcomeOK, 0, 1, journal.Usage{InputTokens: 1_000_000, OutputTokens: 100_000})}},
		{Node: journal.Node{ID: "b", State: journal.NodeCompleted},
			Records: []Record{rec(diagnostics.CacheHit, 0, 0, diagnostics.KeyFromRun, "r0", diagnostics.KeyFromNode, "b",
				diagnostics.KeyModel, "gpt-4o-2024-08-06", diagnostics.KeySavedInput, 1_000_000, diagnostics.KeySavedOutput, 500_000)}},
		{Node: journal.Node{ID: "c", State: journal.NodeCompleted}, Model: "gpt-4o-mini-realtime",
			Active:   []Span{{at(0), at(1)}},
			Attempts: []Attempt{att(1, journal.OutcomeOK, 0, 1, journal.Usage{InputTokens: 10, OutputTokens: 10})}},
	}}
	a := AccountOf(run, BuiltinPrices().Prices)
	// a: 1M input at $3 + 100k output at $15; b saved 1M input at $2.50 +
	// 500k output at $10
	if c := a.Nodes[0].CostUSD; c == nil || math.Abs(*c-4.50) > 1e-9 {
		t.Errorf("claude-sonnet-4-5-20250929: cost %v, want $4.50", c)
	}
	if s := a.Nodes[1].Saved.CostUSD; s == nil || math.Abs(*s-7.50) > 1e-9 {
		t.Errorf("gpt-4o-2024-08-06 cache hit: saved %v, want $7.50", s)
	}
	if a.Nodes[2].CostUSD != nil || len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], `"gpt-4o-mini-realtime"`) {
		t.Errorf("a model not in the table: cost %v, warnings %q; want unpriced and warned of", a.Nodes[2].CostUSD, a.Warnings)
	}
}

// A table may say when and where its prices were read: as_of and sources
// beside the models, in a user's file as in the built-in one. Any other
// key is a model, so a misspelled one is an error, not a silent model.
func TestPriceTableMetadata(t *testing.T) {
	tb, err := ParsePriceTable([]byte("as_of: 2026-09-20\nsources:\n  - {vendor: openai, url: https://developers.openai.com/api/docs/pricing}\ngpt-5: {input: 1.25, output: 10, reasoning: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !tb.AsOf.Equal(time.Date(2026, 9, 20, 0, 0, 0, 0, time.UTC)) || len(tb.Sources) != 1 || tb.Sources[0].Vendor != "openai" ||
		len(tb.Prices) != 1 || tb.Prices["gpt-5"].Output != 10 {
		t.Errorf("parsed %+v", tb)
	}
	if p, err := ParsePrices([]byte("as_of: \"2026-01-02\"\nm: {input: 1}\n")); err != nil || len(p) != 1 {
		t.Errorf("ParsePrices with as_of: %v, %v", p, err)
	}
	if tb, err := ParsePriceTable([]byte("m: {input: 1}\n")); err != nil || !tb.AsOf.IsZero() || tb.Sources != nil {
		t.Errorf("no metadata: %+v, %v", tb, err)
	}
	cases := []struct{ in, want string }{
		{"as_of: yesterday\nm: {input: 1}\n", `p.yaml:1: as_of: "yesterday" is not a date (want YYYY-MM-DD`},
		{"as_of: 2026-13-01\nm: {input: 1}\n", `p.yaml:1: as_of: "2026-13-01" is not a date`},
		{"as_of: 2026-09-20T10:00:00Z\nm: {input: 1}\n", `p.yaml:1: as_of: "2026-09-20T10:00:00Z" is not a date`},
		{"as_of: [2026-09-20]\nm: {input: 1}\n", `p.yaml:1: as_of: a list is not a date`},
		{"as_of: 2026-09-20\nas_of: 2026-09-21\nm: {input: 1}\n", `p.yaml:2: as_of is given twice`},
		{"sources: https://x.example\nm: {input: 1}\n", `p.yaml:1: sources: want a list of {vendor: NAME, url: https://...}, not "https://x.example"`},
		{"sources:\n  - https://x.example\nm: {input: 1}\n", `p.yaml:2: sources: want a list of {vendor: NAME, url: https://...}, not "https://x.example"`},
		{"sources:\n  - {vendor: openai}\nm: {input: 1}\n", `p.yaml:2: sources: a source needs a vendor and a url`},
		{"sources:\n  - {vendor: openai, link: https://x.example}\nm: {input: 1}\n", `p.yaml:2: sources: unknown field "link" (known: vendor, url)`},
		{"sources:\n  - {vendor: openai, url: pricing page}\nm: {input: 1}\n", `p.yaml:2: sources: "pricing page" is not a web address`},
		{"sources:\n  - {vendor: [a], url: https://x.example}\nm: {input: 1}\n", `p.yaml:2: sources: vendor: want text, not a list`},
		{"as_of: 2026-09-20\nsources: []\n", `p.yaml: no prices`},
		// not metadata: models, whose value must be prices
		{"asof: 2026-09-20\nm: {input: 1}\n", `p.yaml:1: asof: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not "2026-09-20"`},
		{"source:\n  - {vendor: openai, url: https://x.example}\nm: {input: 1}\n", `p.yaml:2: source: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not a list`},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "p.yaml")
		if err := os.WriteFile(path, []byte(c.in), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPriceTable(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
		if _, err2 := LoadPrices(path); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%q: LoadPrices %v, LoadPriceTable %v: want the same error", c.in, err2, err)
		}
	}
}

// The built-in table prices a run only when it knows one of its models: a
// run on the simulator alone stays unpriced (no cost, no warnings), one
// that used a dated Claude model is priced out of the box, and a given
// table wins over the built-in one, model by model.
func TestPricesFor(t *testing.T) {
	run := func(models ...string) *Run {
		r := &Run{}
		for _, m := range models {
			r.Nodes = append(r.Nodes, &Node{Model: m})
		}
		return r
	}
	if p := PricesFor(run("sim", "sim"), nil); p != nil {
		t.Errorf("a simulator-only run is priced: %v", p)
	}
	p := PricesFor(run("sim", "claude-sonnet-4-5-20250929"), nil)
	if got, ok := p.Lookup("claude-sonnet-4-5-20250929"); !ok || got.Input != 3 || got.Output != 15 {
		t.Errorf("a dated Claude model: %+v %v, want 3/15 from the built-in table", got, ok)
	}
	mine := Prices{"sim": {Input: 1}, "gpt-4o": {Input: 9, Output: 9}}
	p = PricesFor(run("sim"), mine)
	if p["sim"].Input != 1 || p["gpt-4o"].Input != 9 {
		t.Errorf("a given table does not win: %+v", p)
	}
	if got, ok := p.Lookup("gpt-4o-mini"); !ok || got.Input != 0.15 {
		t.Errorf("a given table hides the built-in models it does not name: %+v %v", got, ok)
	}
}
