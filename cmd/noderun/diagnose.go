package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// diagnosis is what `noderun diagnose` reports: for each node and the run,
// what recovery did, what it cost and what it saved.
type diagnosis struct {
	RunID   string          `json:"run_id"`
	Graph   string          `json:"graph"`
	Status  string          `json:"status"`
	Profile string          `json:"profile"`
	Nodes   []nodeDiagnosis `json:"nodes"`
	Totals  costTotals      `json:"totals"`
	Summary []string        `json:"summary"`
}

type nodeDiagnosis struct {
	ID    string `json:"id"`
	State string `json:"state"`
	costTotals
	Verdict string `json:"verdict"`
}

// costTotals are the figures of a node, or summed over the run.
type costTotals struct {
	Attempts      int            `json:"attempts"`
	RecoverySteps map[string]int `json:"recovery_steps"` // by diagnostic name
	Faults        map[string]int `json:"faults"`         // what was detected, by diagnostic name
	TimeLostMS    int64          `json:"time_lost_ms"`
	Tokens        tokenFigures   `json:"tokens"`
	CostUSD       *float64       `json:"cost_usd"` // null without a price for every model used
	WastedUSD     *float64       `json:"wasted_usd"`
}

// tokenFigures: Generated = Needed + Regenerated + Unfinished. They count
// output tokens without reasoning tokens, which Reasoning counts.
type tokenFigures struct {
	Generated   int  `json:"generated"`   // output tokens the provider produced, every attempt
	Needed      int  `json:"needed"`      // output tokens of the attempts that completed
	Regenerated int  `json:"regenerated"` // produced by attempts thrown away by a retry from scratch
	Preserved   int  `json:"preserved"`   // kept by re-attach or thread resume: a re-send would have produced them again
	Unfinished  int  `json:"unfinished"`  // produced by the last attempt of a node that did not complete
	Input       int  `json:"input"`
	Reasoning   int  `json:"reasoning"`
	Estimated   bool `json:"estimated"` // some figure was counted from the stream, not reported by the provider
}

// price is per 1M tokens, in USD.
type price struct {
	Input     float64 `yaml:"input"`
	Output    float64 `yaml:"output"`
	Reasoning float64 `yaml:"reasoning"`
}

// loadPrices reads a price table: model name → input/output/reasoning per 1M tokens.
func loadPrices(path string) (map[string]price, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// parsePrices parses a price table (the user's file: untrusted input).
func parsePrices(b []byte) (map[string]price, error) {
	var out map[string]price
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&out); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w (want: MODEL: {input: USD, output: USD, reasoning: USD} per 1M tokens)", err)
	}
	if len(out) == 0 {
		return nil, errors.New("no prices (want: MODEL: {input: USD, output: USD, reasoning: USD} per 1M tokens)")
	}
	for m, p := range out {
		if !(p.Input >= 0 && p.Output >= 0 && p.Reasoning >= 0) || math.IsInf(p.Input+p.Output+p.Reasoning, 0) {
			return nil, fmt.Errorf("%s: prices must be finite and not negative", m)
		}
	}
	return out, nil
}

// detected are the codes that report a fault; the others of the 1xx-3xx
// ranges are the steps taken about it.
var detected = map[string]bool{"NR101": true, "NR104": true, "NR105": true, "NR106": true, "NR107": true, "NR305": true}

// records are diagnostics that are neither a fault nor a recovery step.
var records = map[string]bool{"NR108": true, "NR207": true, "NR209": true, "NR301": true, "NR302": true}

// diagnose reads a run from the journal and accounts for it.
func diagnose(ctx context.Context, j *journal.Journal, r journal.Run, prices map[string]price) (*diagnosis, error) {
	full, err := j.Run(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	models := map[string]string{}
	if g, err := runner.ParseGraph(full.GraphPath, full.GraphText); err == nil {
		for _, n := range g.Nodes {
			models[n.ID] = n.Model
		}
	}
	nodes, err := j.Nodes(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	atts, err := j.Attempts(ctx, r.ID, "")
	if err != nil {
		return nil, err
	}
	usage, err := j.AttemptUsage(ctx, r.ID, "")
	if err != nil {
		return nil, err
	}
	evs, err := j.Events(ctx, r.ID, journal.EventFilter{AfterSeq: -1, Kinds: []string{"diagnostic", "delta", "reasoning"}})
	if err != nil {
		return nil, err
	}
	byNode := map[string][]journal.Attempt{}
	for _, a := range atts {
		if _, ok := usage[a.NodeID][a.N]; !ok { // never ended (its runner died): count what the journal holds
			out, err := j.RebuildOutput(ctx, r.ID, a.NodeID, a.N)
			if err != nil {
				return nil, err
			}
			if usage[a.NodeID] == nil {
				usage[a.NodeID] = map[int]journal.Usage{}
			}
			usage[a.NodeID][a.N] = journal.Usage{OutputTokens: (len(out) + 3) / 4, Estimated: true}
		}
		byNode[a.NodeID] = append(byNode[a.NodeID], a)
	}
	evByNode := map[string][]journal.Event{}
	for _, e := range evs {
		evByNode[e.NodeID] = append(evByNode[e.NodeID], e)
	}
	d := &diagnosis{RunID: r.ID, Graph: r.Graph, Status: string(r.Status), Profile: r.Profile, Nodes: []nodeDiagnosis{},
		Totals: costTotals{RecoverySteps: map[string]int{}, Faults: map[string]int{}}}
	if prices != nil {
		d.Totals.CostUSD, d.Totals.WastedUSD = new(float64), new(float64)
	}
	for _, n := range nodes {
		nd := accountNode(n, byNode[n.ID], usage[n.ID], evByNode[n.ID], prices, models[n.ID])
		d.Nodes = append(d.Nodes, nd)
		d.Totals.add(nd.costTotals)
	}
	d.Summary = d.summary()
	return d, nil
}

// accountNode is the pure core of diagnose for one node.
func accountNode(n journal.Node, atts []journal.Attempt, usage map[int]journal.Usage, evs []journal.Event,
	prices map[string]price, model string) nodeDiagnosis {
	nd := nodeDiagnosis{ID: n.ID, State: string(n.State),
		costTotals: costTotals{Attempts: len(atts), RecoverySteps: map[string]int{}, Faults: map[string]int{}}}
	// The prompt is the same for every attempt: an attempt whose input the
	// provider did not report cost what a reported one did.
	knownInput := 0
	for _, u := range usage {
		if !u.Estimated {
			knownInput = max(knownInput, u.InputTokens)
		}
	}
	var cost, wasted float64
	p, priced := prices[model]
	var wastedTime time.Duration
	for i, a := range atts {
		u := usage[a.N]
		if u.Estimated && u.InputTokens == 0 {
			u.InputTokens = knownInput
		}
		t := &nd.Tokens
		visible := max(u.OutputTokens-u.ReasoningTokens, 0) // the figures count output, reasoning apart
		t.Generated += visible
		t.Input += u.InputTokens
		t.Reasoning += u.ReasoningTokens
		t.Preserved += u.PreservedTokens
		t.Estimated = t.Estimated || u.Estimated
		c := (float64(u.InputTokens)*p.Input + float64(visible)*p.Output + float64(u.ReasoningTokens)*p.Reasoning) / 1e6
		cost += c
		last := i == len(atts)-1
		switch {
		case last && n.State == journal.NodeCompleted:
			t.Needed += visible
		case last:
			t.Unfinished += visible
		default: // thrown away: the next attempt sent the request again
			t.Regenerated += visible
			wasted += c
			if !a.Ended.IsZero() {
				wastedTime += a.Ended.Sub(a.Started)
			}
		}
	}
	// Time lost: the work of attempts thrown away, and every stretch from a
	// detected fault to the next data.
	var since time.Time
	for _, e := range evs {
		switch e.Kind {
		case "diagnostic":
			code, ok := diagnostics.Lookup(e.Code)
			if !ok || records[e.Code] || e.Code < "NR1" || e.Code >= "NR4" {
				continue
			}
			if detected[e.Code] {
				nd.Faults[code.Name]++
				if since.IsZero() {
					since = e.Time
				}
			} else {
				nd.RecoverySteps[code.Name]++
			}
		default:
			if !since.IsZero() {
				wastedTime += e.Time.Sub(since)
				since = time.Time{}
			}
		}
	}
	if !since.IsZero() && !n.Finished.IsZero() && n.Finished.After(since) {
		wastedTime += n.Finished.Sub(since)
	}
	nd.TimeLostMS = wastedTime.Milliseconds()
	if prices != nil && (priced || nd.Attempts == 0) {
		nd.CostUSD, nd.WastedUSD = &cost, &wasted
	}
	nd.Verdict = verdictOf(nd)
	return nd
}

func (t *costTotals) add(o costTotals) {
	t.Attempts += o.Attempts
	for k, v := range o.RecoverySteps {
		t.RecoverySteps[k] += v
	}
	for k, v := range o.Faults {
		t.Faults[k] += v
	}
	t.TimeLostMS += o.TimeLostMS
	t.Tokens.Generated += o.Tokens.Generated
	t.Tokens.Needed += o.Tokens.Needed
	t.Tokens.Regenerated += o.Tokens.Regenerated
	t.Tokens.Preserved += o.Tokens.Preserved
	t.Tokens.Unfinished += o.Tokens.Unfinished
	t.Tokens.Input += o.Tokens.Input
	t.Tokens.Reasoning += o.Tokens.Reasoning
	t.Tokens.Estimated = t.Tokens.Estimated || o.Tokens.Estimated
	if t.CostUSD != nil {
		if o.CostUSD == nil {
			t.CostUSD, t.WastedUSD = nil, nil
		} else {
			*t.CostUSD += *o.CostUSD
			*t.WastedUSD += *o.WastedUSD
		}
	}
}

// verdictOf says in one line what happened to a node and what it cost.
func verdictOf(nd nodeDiagnosis) string {
	faults := countPhrase(nd.Faults)
	how := recoveryMeans(nd.RecoverySteps)
	figures := fmt.Sprintf("%s tokens regenerated, %s preserved, %s lost", thousands(nd.Tokens.Regenerated),
		thousands(nd.Tokens.Preserved), seconds(nd.TimeLostMS))
	switch journal.NodeState(nd.State) {
	case journal.NodeCompleted:
		if faults == "" && nd.Attempts <= 1 {
			return fmt.Sprintf("clean: %s tokens, no recovery needed", thousands(nd.Tokens.Needed))
		}
		if faults == "" {
			faults = "an interrupted run"
		}
		if how == "" {
			how = "retry"
		}
		return fmt.Sprintf("recovered from %s by %s: %s", faults, how, figures)
	case journal.NodePending, journal.NodeSkipped:
		return "did not run (" + nd.State + ")"
	}
	if faults == "" {
		faults = "no transport fault"
	}
	return fmt.Sprintf("%s after %s: %s tokens generated, %s", nd.State, faults, thousands(nd.Tokens.Generated), figures)
}

// faultWords name what the detected codes report, for a verdict.
var faultWords = map[string][2]string{
	"disconnect_detected": {"disconnect", "disconnects"}, "idle_timeout": {"idle timeout", "idle timeouts"},
	"rate_limit_wait": {"rate limit", "rate limits"}, "provider_error": {"server error", "server errors"},
	"connect_failed": {"connect failure", "connect failures"}, "harness_failed": {"harness failure", "harness failures"},
}

func countPhrase(m map[string]int) string {
	var parts []string
	for _, k := range sortedCountKeys(m) {
		w, ok := faultWords[k]
		if !ok {
			w = [2]string{strings.ReplaceAll(k, "_", " "), strings.ReplaceAll(k, "_", " ")}
		}
		word := w[1]
		if m[k] == 1 {
			word = w[0]
		}
		parts = append(parts, fmt.Sprintf("%d %s", m[k], word))
	}
	return strings.Join(parts, " and ")
}

// recoveryMeans names how a node got its output back.
func recoveryMeans(steps map[string]int) string {
	var means []string
	if steps["reattached"] > 0 || steps["thread_resumed"] > 0 {
		means = append(means, "re-attach")
	}
	if steps["continue_scheduled"] > 0 {
		means = append(means, "continue")
	}
	if steps["output_from_status"] > 0 {
		means = append(means, "status")
	}
	if steps["retry_started"] > 0 || steps["fell_back_to_retry"] > 0 {
		means = append(means, "retry")
	}
	return strings.Join(means, " and ")
}

// summary is the run-level lines, also printed at the end of run and resume.
func (d *diagnosis) summary() []string {
	t := d.Totals
	steps := 0
	for _, v := range t.RecoverySteps {
		steps += v
	}
	faults := countPhrase(t.Faults)
	if faults == "" {
		faults = "no faults"
	}
	est := ""
	if t.Tokens.Estimated {
		est = " (some counted from the stream: estimated)"
	}
	lines := []string{
		fmt.Sprintf("recovery: %s, %s, %s, %s lost", faults, plural(steps, "recovery step"), plural(t.Attempts, "attempt"), seconds(t.TimeLostMS)),
		fmt.Sprintf("tokens: %s generated = %s needed + %s regenerated + %s unfinished; %s preserved by re-attach or continue%s",
			thousands(t.Tokens.Generated), thousands(t.Tokens.Needed), thousands(t.Tokens.Regenerated),
			thousands(t.Tokens.Unfinished), thousands(t.Tokens.Preserved), est),
	}
	if t.CostUSD != nil {
		lines = append(lines, fmt.Sprintf("cost: $%.4f, of which $%.4f on work thrown away", *t.CostUSD, *t.WastedUSD))
	}
	return lines
}

func sortedCountKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// thousands writes n with thousands separators: 4,210.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func seconds(ms int64) string {
	return fmt.Sprintf("%.1f s", math.Round(float64(ms)/100)/10)
}

func diagnoseCommand() *cli.Command {
	return &cli.Command{
		Name:      "diagnose",
		Usage:     "what recovery did in a run: attempts, steps, time lost, tokens regenerated and preserved, cost",
		ArgsUsage: "RUN|last [NODE]",
		Description: "Examples:\n  noderun diagnose last                        # every node, with a verdict each\n" +
			"  noderun diagnose last report --json          # one node, as JSON (docs/json.md)\n" +
			"  noderun diagnose last --prices prices.yaml   # with cost (MODEL: {input: 1.25, output: 10, reasoning: 10} per 1M tokens)",
		Flags: []cli.Flag{dbFlag, jsonFlag,
			&cli.StringFlag{Name: "prices", Usage: "a YAML price table: MODEL: {input, output, reasoning} in USD per 1M tokens"}},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 2, "give RUN (or last) and optionally NODE"); err != nil {
				return err
			}
			var prices map[string]price
			if f := c.String("prices"); f != "" {
				var err error
				if prices, err = loadPrices(f); err != nil {
					return usageErr(fmt.Errorf("--prices: %w", err))
				}
			}
			j, err := openForReading(c)
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := findRun(c.Context, j, c.Args().Get(0))
			if err != nil {
				return err
			}
			node := c.Args().Get(1)
			if node != "" {
				if err := knownNode(c, j, r.ID, "", node); err != nil {
					return err
				}
			}
			d, err := diagnose(c.Context, j, r, prices)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			if node != "" {
				for _, nd := range d.Nodes {
					if nd.ID == node {
						d.Nodes = []nodeDiagnosis{nd}
					}
				}
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, d)
			}
			printDiagnosis(c.App.Writer, d)
			return nil
		},
	}
}

func printDiagnosis(w io.Writer, d *diagnosis) {
	fmt.Fprintf(w, "run %s (%s) %s, profile %s\n", d.RunID, d.Graph, d.Status, d.Profile)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tATTEMPTS\tSTEPS\tLOST\tGENERATED\tREGENERATED\tPRESERVED\tCOST")
	for _, n := range d.Nodes {
		steps := 0
		for _, v := range n.RecoverySteps {
			steps += v
		}
		cost := "-"
		if n.CostUSD != nil {
			cost = fmt.Sprintf("$%.4f", *n.CostUSD)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.State, n.Attempts, steps, seconds(n.TimeLostMS),
			thousands(n.Tokens.Generated), thousands(n.Tokens.Regenerated), thousands(n.Tokens.Preserved), cost)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, n := range d.Nodes {
		fmt.Fprintf(w, "%s: %s\n", n.ID, n.Verdict)
		if len(n.RecoverySteps) > 0 {
			var parts []string
			for _, k := range sortedCountKeys(n.RecoverySteps) {
				parts = append(parts, fmt.Sprintf("%s×%d", k, n.RecoverySteps[k]))
			}
			fmt.Fprintf(w, "  steps: %s\n", strings.Join(parts, ", "))
		}
	}
	fmt.Fprintln(w)
	for _, l := range d.Summary {
		fmt.Fprintln(w, l)
	}
}

// attemptUsage is the journaled usage of one node's attempts.
func attemptUsage(ctx context.Context, j *journal.Journal, runID, node string) (map[int]journal.Usage, error) {
	u, err := j.AttemptUsage(ctx, runID, node)
	if err != nil {
		return nil, err
	}
	return u[node], nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
