package ledger

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// Account is what recovery did in a run and what it cost and saved, per node
// and in total: what `noderun diagnose --json` prints (docs/json.md).
type Account struct {
	RunID   string `json:"run_id"`
	Graph   string `json:"graph"`
	Status  string `json:"status"`
	Profile string `json:"profile"`
	// WallMS is how long runners ran the run (its sessions; the time between
	// an interruption and its resume is nobody's).
	WallMS int64         `json:"wall_ms"`
	Nodes  []NodeAccount `json:"nodes"`
	// Totals sum the nodes' figures.
	Totals  Figures  `json:"totals"`
	Summary []string `json:"summary"`
	// Warnings say what the figures leave out: a model without a price.
	Warnings []string `json:"warnings"`
}

// NodeAccount is one node's figures and verdict.
type NodeAccount struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Model is what the node was priced by ("" when unknown).
	Model string `json:"model"`
	Figures
	// CachedFrom is "run/node" whose output a cache hit reused (NR407);
	// empty for a node that called its provider.
	CachedFrom string `json:"cached_from,omitempty"`
	// Verdict says in one line what happened to the node and what it cost.
	Verdict string `json:"verdict"`
}

// Figures are a node's, or the run's summed. They add up:
// UsefulMS + TimeLostMS + QuotaWaitMS = WallMS, and Tokens.Generated = Needed +
// Regenerated + Unfinished.
type Figures struct {
	Attempts int `json:"attempts"`
	// RecoverySteps count the steps taken, by diagnostic name.
	RecoverySteps map[string]int `json:"recovery_steps"`
	// Faults count what went wrong, by diagnostic name: every record whose
	// code has a noun (Code.IsFault): transport faults, interruptions, lost
	// workers, rejections.
	Faults map[string]int `json:"faults"`
	// WallMS is how long a runner worked on the node; TimeLostMS the part
	// of it lost to faults (attempts thrown away, and every stretch from a
	// fault to the node's next data, backoff included, each instant counted
	// once); UsefulMS the rest.
	WallMS     int64 `json:"wall_ms"`
	UsefulMS   int64 `json:"useful_ms"`
	TimeLostMS int64 `json:"time_lost_ms"`
	// QuotaWaitMS is the part spent waiting for the provider's quota: the
	// waits of pacing (NR601) and the parks after a 429 (NR602), which are
	// not lost to faults. UsefulMS + TimeLostMS + QuotaWaitMS = WallMS.
	QuotaWaitMS int64  `json:"quota_wait_ms"`
	Tokens      Tokens `json:"tokens"`
	// CostUSD and WastedUSD (the part thrown away) are null without a price
	// for the node's model; a run's totals sum its priced nodes.
	CostUSD   *float64 `json:"cost_usd"`
	WastedUSD *float64 `json:"wasted_usd"`
	// Cached counts the nodes completed from the cache, and Saved what
	// their outputs cost when first produced: what this run did not pay.
	Cached int   `json:"cached"`
	Saved  Saved `json:"saved"`
}

// Saved is what cache hits did not pay again: the tokens of the provider
// calls that first produced their outputs (output without reasoning, as in
// Tokens), and their price by the same table (null without a price).
type Saved struct {
	Output     int      `json:"output"`
	Input      int      `json:"input"`
	Reasoning  int      `json:"reasoning"`
	CacheRead  int      `json:"cache_read"`
	CacheWrite int      `json:"cache_write"`
	CostUSD    *float64 `json:"cost_usd"`
}

// Tokens: Generated = Needed + Regenerated + Unfinished. They count output
// tokens without reasoning tokens, which Reasoning counts.
type Tokens struct {
	Generated   int `json:"generated"`   // output tokens the provider produced, every attempt
	Needed      int `json:"needed"`      // produced by the attempts that completed
	Regenerated int `json:"regenerated"` // produced by attempts thrown away by a retry from scratch
	// Preserved were kept by a re-attach, a thread resume or a continue:
	// what a re-send would have produced again.
	Preserved  int `json:"preserved"`
	Unfinished int `json:"unfinished"` // produced by the last attempt of a node that did not complete
	Input      int `json:"input"`
	Reasoning  int `json:"reasoning"`
	// CacheRead and CacheWrite are input tokens the provider counted apart,
	// as read from and written to its prompt cache (not in Input).
	CacheRead  int  `json:"cache_read"`
	CacheWrite int  `json:"cache_write"`
	Estimated  bool `json:"estimated"` // some figure was counted from the stream, not reported by the provider
	// Hidden: an agent harness failed or retried a turn by itself, and what
	// that turn generated never reached noderun (a CLI reports usage only
	// for the turns it completes): Generated and Regenerated are lower bounds.
	Hidden bool `json:"hidden"`
}

// AccountOf accounts for a loaded run, pricing it by prices (nil: no cost).
func AccountOf(run *Run, prices Prices) *Account {
	a := &Account{RunID: run.ID, Graph: run.Run.Graph, Status: string(run.Standing()), Profile: run.Profile,
		Nodes: []NodeAccount{}, Totals: newFigures(), Warnings: []string{}}
	for _, s := range run.Sessions {
		a.WallMS += s.D().Milliseconds()
	}
	if prices != nil {
		a.Totals.CostUSD, a.Totals.WastedUSD, a.Totals.Saved.CostUSD = new(float64), new(float64), new(float64)
	}
	unpriced := map[string][]string{} // model → nodes
	for _, nd := range run.Nodes {
		na := AccountNode(nd, prices)
		if prices != nil && (na.CostUSD == nil || na.Cached > 0 && na.Saved.CostUSD == nil) {
			unpriced[na.Model] = append(unpriced[na.Model], nd.ID)
		}
		a.Nodes = append(a.Nodes, na)
		a.Totals.add(na.Figures)
	}
	for _, m := range slices.Sorted(maps.Keys(unpriced)) {
		what := fmt.Sprintf("no price for model %q", m)
		if m == "" {
			what = "no model is known"
		}
		a.Warnings = append(a.Warnings, fmt.Sprintf("%s (%s %s): their cost is not in the total",
			what, pluralWord(len(unpriced[m]), "node"), strings.Join(unpriced[m], ", ")))
	}
	a.Summary = a.summary()
	return a
}

func newFigures() Figures {
	return Figures{RecoverySteps: map[string]int{}, Faults: map[string]int{}}
}

// AccountNode is the account of one node, priced by prices (nil: no cost).
// It is a pure function of what Load read.
func AccountNode(nd *Node, prices Prices) NodeAccount {
	na := NodeAccount{ID: nd.ID, State: string(nd.State), Model: nd.Model, Figures: newFigures()}
	na.Attempts = len(nd.Attempts)
	for _, r := range nd.Records {
		switch {
		case r.Code.IsFault():
			na.Faults[r.Code.Name]++
		case r.Code.Role == diagnostics.RoleStep:
			na.RecoverySteps[r.Code.Name]++
		}
	}
	na.tokens(nd, prices)
	na.saved(nd, prices)
	na.times(nd)
	na.Verdict = verdictOf(nd, na)
	return na
}

// tokens adds up the attempts' usage: the last attempt's output was needed
// (or is unfinished), every earlier one's was thrown away by a retry.
func (na *NodeAccount) tokens(nd *Node, prices Prices) {
	// The prompt is the same for every attempt: an attempt whose input the
	// provider did not report cost what a reported one did.
	knownInput := 0
	for _, a := range nd.Attempts {
		if !a.Usage.Estimated {
			knownInput = max(knownInput, a.Usage.InputTokens)
		}
	}
	p, priced := prices[nd.Model]
	var cost, wasted float64
	t := &na.Tokens
	for _, r := range nd.Records {
		t.Hidden = t.Hidden || r.Code.HidesOutput
	}
	for i, a := range nd.Attempts {
		u := a.Usage
		if u.Estimated && u.InputTokens == 0 {
			u.InputTokens = knownInput
		}
		visible := max(u.OutputTokens-u.ReasoningTokens, 0) // output, reasoning apart
		t.Generated += visible
		t.Input += u.InputTokens
		t.Reasoning += u.ReasoningTokens
		t.CacheRead += u.CacheReadTokens
		t.CacheWrite += u.CacheWriteTokens
		t.Preserved += u.PreservedTokens
		t.Estimated = t.Estimated || u.Estimated
		c := p.cost(u, visible)
		cost += c
		switch last := i == len(nd.Attempts)-1; {
		case last && nd.State == journal.NodeCompleted:
			t.Needed += visible
		case last:
			t.Unfinished += visible
		default:
			t.Regenerated += visible
			wasted += c
		}
	}
	if prices != nil && (priced || len(nd.Attempts) == 0) {
		na.CostUSD, na.WastedUSD = &cost, &wasted
	}
}

// saved reads what a cache hit did not pay from its NR407 record, priced
// by the model that first produced the output.
func (na *NodeAccount) saved(nd *Node, prices Prices) {
	for _, r := range nd.Records {
		if r.Code != diagnostics.CacheHit || nd.State != journal.NodeCompleted {
			continue
		}
		run, _ := diagnostics.KeyFromRun.Of(r.Record)
		node, _ := diagnostics.KeyFromNode.Of(r.Record)
		model, _ := diagnostics.KeyModel.Of(r.Record)
		var u journal.Usage
		u.InputTokens, _ = diagnostics.KeySavedInput.Of(r.Record)
		u.OutputTokens, _ = diagnostics.KeySavedOutput.Of(r.Record)
		u.ReasoningTokens, _ = diagnostics.KeySavedReasoning.Of(r.Record)
		u.CacheReadTokens, _ = diagnostics.KeySavedCacheRead.Of(r.Record)
		u.CacheWriteTokens, _ = diagnostics.KeySavedCacheWrite.Of(r.Record)
		visible := max(u.OutputTokens-u.ReasoningTokens, 0)
		na.Cached, na.CachedFrom = 1, run+"/"+node
		na.Saved = Saved{Output: visible, Input: u.InputTokens, Reasoning: u.ReasoningTokens,
			CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens}
		if na.Model == "" {
			na.Model = model
		}
		if p, ok := prices[model]; ok {
			c := p.cost(u, visible)
			na.Saved.CostUSD = &c
		}
	}
}

// times splits the node's wall time into useful, lost and waiting for
// quota. Lost is the union of the attempts a retry threw away and the
// stretches from each fault to the node's next data (or its end), so that a
// backoff inside a thrown-away attempt is not counted twice, and nothing
// outside the node's active time is counted at all. Waiting for quota is
// the union of the pacing waits and of the stretches from each 429 that
// parked the node to its next data; an instant of both is quota's.
func (na *NodeAccount) times(nd *Node) {
	var wall time.Duration
	var end time.Time
	for _, s := range nd.Active {
		wall += s.D()
		end = later(end, s.To)
	}
	var lost, quota []Span
	for i, a := range nd.Attempts {
		if i == len(nd.Attempts)-1 {
			break
		}
		to := a.Ended
		if to.IsZero() { // its runner died: until the next attempt began
			to = nd.Attempts[i+1].Started
		}
		lost = append(lost, Span{a.Started, to})
	}
	for i, r := range nd.Records {
		if r.Code == diagnostics.QuotaWait {
			waited, _ := diagnostics.KeyWaited.Of(r.Record)
			quota = append(quota, Span{r.Time.Add(-waited), r.Time})
			continue
		}
		if !r.Code.IsFault() {
			continue
		}
		to := r.NextData
		if to.IsZero() || to.Before(r.Time) {
			to = end
		}
		if i+1 < len(nd.Records) && nd.Records[i+1].Code == diagnostics.QuotaParked {
			quota = append(quota, Span{r.Time, to}) // a 429 the node waited out, spending nothing
			continue
		}
		lost = append(lost, Span{r.Time, to})
	}
	quota = union(quota)
	var lostD, quotaD time.Duration
	for _, s := range subtract(union(lost), quota) {
		for _, c := range clip(s, nd.Active) {
			lostD += c.D()
		}
	}
	for _, s := range quota {
		for _, c := range clip(s, nd.Active) {
			quotaD += c.D()
		}
	}
	na.WallMS = wall.Milliseconds()
	na.QuotaWaitMS = min(quotaD.Milliseconds(), na.WallMS)
	na.TimeLostMS = min(lostD.Milliseconds(), na.WallMS-na.QuotaWaitMS)
	na.UsefulMS = na.WallMS - na.TimeLostMS - na.QuotaWaitMS
}

// subtract is spans without the instants of minus (both unions: sorted,
// not overlapping).
func subtract(spans, minus []Span) []Span {
	var out []Span
	for _, s := range spans {
		for _, m := range minus {
			if !m.To.After(s.From) || !m.From.Before(s.To) {
				continue // apart
			}
			if m.From.After(s.From) {
				out = append(out, Span{s.From, m.From})
			}
			s.From = later(s.From, m.To)
		}
		if s.To.After(s.From) {
			out = append(out, s)
		}
	}
	return out
}

// union merges overlapping spans.
func union(spans []Span) []Span {
	spans = slices.DeleteFunc(slices.Clone(spans), func(s Span) bool { return s.D() <= 0 })
	slices.SortFunc(spans, func(a, b Span) int { return a.From.Compare(b.From) })
	var out []Span
	for _, s := range spans {
		if n := len(out); n > 0 && !s.From.After(out[n-1].To) {
			out[n-1].To = later(out[n-1].To, s.To)
			continue
		}
		out = append(out, s)
	}
	return out
}

func (f *Figures) add(o Figures) {
	f.Attempts += o.Attempts
	for k, v := range o.RecoverySteps {
		f.RecoverySteps[k] += v
	}
	for k, v := range o.Faults {
		f.Faults[k] += v
	}
	f.WallMS += o.WallMS
	f.UsefulMS += o.UsefulMS
	f.TimeLostMS += o.TimeLostMS
	f.QuotaWaitMS += o.QuotaWaitMS
	t := &f.Tokens
	t.Generated += o.Tokens.Generated
	t.Needed += o.Tokens.Needed
	t.Regenerated += o.Tokens.Regenerated
	t.Preserved += o.Tokens.Preserved
	t.Unfinished += o.Tokens.Unfinished
	t.Input += o.Tokens.Input
	t.Reasoning += o.Tokens.Reasoning
	t.CacheRead += o.Tokens.CacheRead
	t.CacheWrite += o.Tokens.CacheWrite
	t.Estimated = t.Estimated || o.Tokens.Estimated
	t.Hidden = t.Hidden || o.Tokens.Hidden
	if f.CostUSD != nil && o.CostUSD != nil { // unpriced nodes are left out, and warned of
		*f.CostUSD += *o.CostUSD
		*f.WastedUSD += *o.WastedUSD
	}
	f.Cached += o.Cached
	s := &f.Saved
	s.Output += o.Saved.Output
	s.Input += o.Saved.Input
	s.Reasoning += o.Saved.Reasoning
	s.CacheRead += o.Saved.CacheRead
	s.CacheWrite += o.Saved.CacheWrite
	if s.CostUSD != nil && o.Saved.CostUSD != nil {
		*s.CostUSD += *o.Saved.CostUSD
	}
}

// Steps counts the figures' recovery steps.
func (f Figures) Steps() int {
	n := 0
	for _, v := range f.RecoverySteps {
		n += v
	}
	return n
}

// summary is the run-level lines, printed at the end of run and resume too.
func (a *Account) summary() []string {
	t := a.Totals
	faults := faultPhrase(t.Faults)
	if faults == "" {
		faults = "no faults"
	}
	est := ""
	switch {
	case t.Tokens.Hidden:
		est = " (at least: an agent CLI does not report what its failed turns generated)"
	case t.Tokens.Estimated:
		est = " (some counted from the stream: estimated)"
	}
	waited := ""
	if t.QuotaWaitMS > 0 { // apart from time lost: nothing went wrong
		waited = fmt.Sprintf(" (%s of it waiting for quota)", Seconds(t.QuotaWaitMS))
	}
	lines := []string{
		fmt.Sprintf("recovery: %s, %s, %s, %s lost of %s the nodes ran%s", faults, pluralWord(t.Steps(), "recovery step"),
			pluralWord(t.Attempts, "attempt"), Seconds(t.TimeLostMS), Seconds(t.WallMS), waited),
		fmt.Sprintf("tokens: %s generated = %s needed + %s regenerated + %s unfinished; %s preserved by re-attach or continue%s",
			Thousands(t.Tokens.Generated), Thousands(t.Tokens.Needed), Thousands(t.Tokens.Regenerated),
			Thousands(t.Tokens.Unfinished), Thousands(t.Tokens.Preserved), est),
	}
	if t.CostUSD != nil {
		l := fmt.Sprintf("cost: $%.4f, of which $%.4f on work thrown away", *t.CostUSD, *t.WastedUSD)
		if len(a.Warnings) > 0 {
			l += " (priced models only)"
		}
		lines = append(lines, l)
	}
	if t.Cached > 0 {
		l := fmt.Sprintf("cache: %s reused from earlier runs, not paid again: %s output tokens, %s input tokens",
			pluralWord(t.Cached, "node"), Thousands(t.Saved.Output), Thousands(t.Saved.Input))
		if t.Saved.CostUSD != nil {
			l += fmt.Sprintf(", $%.4f saved", *t.Saved.CostUSD)
		}
		lines = append(lines, l)
	}
	return lines
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
