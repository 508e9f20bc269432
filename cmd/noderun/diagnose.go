package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// pricesOf reads the command's --prices table; nil without one.
func pricesOf(c *cli.Context) (ledger.Prices, error) {
	f := c.String("prices")
	if f == "" {
		return nil, nil
	}
	prices, err := ledger.LoadPrices(f)
	if err != nil {
		if e := fileErr("--prices", err); e != err {
			return nil, usageErr(e)
		}
		return nil, usageErr(fmt.Errorf("--prices: %w", err))
	}
	return prices, nil
}

// diagnose loads a run and accounts for it (package ledger holds both).
func diagnose(ctx context.Context, j *journal.Journal, runID string, prices ledger.Prices) (*ledger.Account, error) {
	run, err := ledger.Load(ctx, j, runID, ledger.LoadOptions{})
	if err != nil {
		return nil, err
	}
	return ledger.AccountOf(run, prices), nil
}

func diagnoseCommand() *cli.Command {
	return &cli.Command{
		Name:      "diagnose",
		Usage:     "what recovery did in a run: steps, time lost, tokens, cost",
		ArgsUsage: "RUN|last [NODE]",
		Description: "Per node and for the run: attempts, recovery steps, time lost, tokens generated, regenerated\n" +
			"and preserved, and with --prices their cost, with a verdict per node.\n\nExamples:\n  noderun diagnose last                        # every node, with a verdict each\n" +
			"  noderun diagnose last report --json          # one node, as JSON (docs/json.md)\n" +
			"  noderun diagnose last --prices prices.yaml   # with cost (MODEL: {input: 1.25, output: 10, reasoning: 10} per 1M tokens)\n" +
			"  noderun diagnose --temporal 127.0.0.1:7233 RUN   # a run on Temporal, with its hand-overs (docs/temporal.md)",
		Flags: append([]cli.Flag{dbFlag, jsonFlag,
			&cli.BoolFlag{Name: "table", Usage: "only the table of figures, without verdicts and totals"},
			&cli.StringFlag{Name: "prices", Usage: "price table `FILE`: MODEL: {input, output, reasoning}, USD per 1M tokens", TakesFile: true}},
			temporalFlags()...),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 2, "give RUN (or last) and optionally NODE"); err != nil {
				return err
			}
			if c.String("temporal") != "" {
				return diagnoseTemporalAction(c)
			}
			prices, err := pricesOf(c)
			if err != nil {
				return err
			}
			j, r, err := openRun(c, c.Args().Get(0))
			if err != nil {
				return err
			}
			defer j.Close()
			node := c.Args().Get(1)
			if node != "" {
				if err := knownNode(c, j, r.ID, "", node); err != nil {
					return err
				}
			}
			d, err := diagnose(c.Context, j, r.ID, prices)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			if node != "" {
				for _, nd := range d.Nodes {
					if nd.ID == node {
						d.Nodes = []ledger.NodeAccount{nd}
					}
				}
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, d)
			}
			printDiagnosis(c.App.Writer, outWidth(c.App.Writer), d, c.Bool("table"))
			return nil
		},
	}
}

// printDiagnosis prints the account: the run, a table of figures, a verdict
// per node with its steps, and the totals; tableOnly prints the table alone
// (what `make demo` adds to the run's own verdicts and totals). Lines fit
// width (0: no limit).
func printDiagnosis(w io.Writer, width int, d *ledger.Account, tableOnly bool) {
	if !tableOnly {
		fmt.Fprintf(w, "run %s (%s) %s, profile %s\n", d.RunID, d.Graph, d.Status, d.Profile)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tATTEMPTS\tSTEPS\tLOST\tQUOTA WAIT\tGENERATED\tREGENERATED\tPRESERVED\tCOST")
	for _, n := range d.Nodes {
		steps := n.Steps()
		cost := "-"
		if n.CostUSD != nil {
			cost = fmt.Sprintf("$%.4f", *n.CostUSD)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.State, n.Attempts, steps, ledger.Seconds(n.TimeLostMS), ledger.Seconds(n.QuotaWaitMS),
			ledger.Thousands(n.Tokens.Generated), ledger.Thousands(n.Tokens.Regenerated), ledger.Thousands(n.Tokens.Preserved), cost)
	}
	tw.Flush()
	if !tableOnly {
		fmt.Fprintln(w)
		for _, n := range d.Nodes {
			fmt.Fprintln(w, foldLine(n.ID+": "+n.Verdict, width))
			if len(n.RecoverySteps) > 0 {
				var parts []string
				for _, k := range slices.Sorted(maps.Keys(n.RecoverySteps)) {
					parts = append(parts, fmt.Sprintf("%s×%d", k, n.RecoverySteps[k]))
				}
				fmt.Fprintf(w, "  steps: %s\n", strings.Join(parts, ", "))
			}
		}
		fmt.Fprintln(w)
		for _, l := range d.Summary {
			fmt.Fprintln(w, foldLine(l, width))
		}
	}
	for _, l := range d.Warnings {
		fmt.Fprintln(w, foldLine("warning: "+l, width))
	}
}
