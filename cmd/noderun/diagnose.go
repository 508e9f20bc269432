package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/cliword"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/view"
)

// pricesOf reads the command's --prices table; nil without one.
func pricesOf(c *cli.Context) (ledger.Prices, error) {
	f := c.String("prices")
	if f == "" {
		return nil, nil
	}
	prices, err := ledger.LoadPrices(f)
	if err != nil {
		if e := cliword.FileErr("--prices", err); e != err {
			return nil, usageErr(e)
		}
		return nil, usageErr(fmt.Errorf("--prices: %w", err))
	}
	return prices, nil
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
		Flags: append([]cli.Flag{dbFlag(), jsonFlag(),
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
			d, err := view.Diagnose(c.Context, j, r.ID, node, prices)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, d)
			}
			if err := ledger.WriteText(c.App.Writer, d, ledger.TextOptions{Width: outWidth(c.App.Writer), TableOnly: c.Bool("table")}); err != nil {
				return &exitError{exitFailed, err}
			}
			return nil
		},
	}
}

// pricesCommand prints the table diagnose and report price runs by.
func pricesCommand() *cli.Command {
	return &cli.Command{
		Name:  "prices",
		Usage: "print the dated price table diagnose and report cost runs by",
		Description: "Examples:\n  noderun prices                          # the built-in table\n" +
			"  noderun prices --prices mine.yaml --json   # yours over it, as JSON (docs/prices.md)",
		Flags: []cli.Flag{jsonFlag(), &cli.StringFlag{Name: "prices", Usage: "price table `FILE` to merge over the built-in one", TakesFile: true}},
		Action: func(c *cli.Context) error {
			given, err := pricesOf(c)
			if err := errors.Join(err, wantArgs(c, 0, 0, "takes no arguments")); err != nil {
				return err
			}
			t := ledger.BuiltinPrices()
			t.Prices = given.Over(t.Prices)
			if c.Bool("json") {
				return writeJSON(c.App.Writer, t)
			}
			if err := t.WriteText(c.App.Writer); err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.App.Writer, "A table given with --prices overrides these, model by model.")
			return err
		},
	}
}
