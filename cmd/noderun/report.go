package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/runner/ledger"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "write a run as one self-contained HTML page",
		ArgsUsage: "RUN|last",
		Description: "The page shows what needs attention (with the commands), a timeline of every attempt, and each\n" +
			"node's diagnostics and output; an output longer than --max-output is cut, with the command that\n" +
			"prints it whole.\n\nExamples:\n  noderun report last -o run.html   # open it in a browser, or keep it as a CI artifact\n" +
			"  noderun report last -o -          # to stdout\n" +
			"  noderun report --temporal 127.0.0.1:7233 RUN   # a run on Temporal, from its workflow history, with its hand-overs",
		Flags: append([]cli.Flag{dbFlag(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "noderun-report.html", Usage: "the HTML `FILE` to write (- for stdout)", TakesFile: true},
			&cli.StringFlag{Name: "prices", Usage: "price table `FILE` (as for diagnose)", TakesFile: true},
			&cli.IntFlag{Name: "max-output", Value: ledger.DefaultMaxOutput,
				Usage: "bytes of each node's output the page holds (0: all)"}},
			temporalFlags()...),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 1, "give one run id (or last)"); err != nil {
				return err
			}
			if c.Int("max-output") < 0 {
				return usageErr(fmt.Errorf("--max-output %d: must be 0 (all) or more", c.Int("max-output")))
			}
			if c.String("temporal") != "" {
				return reportTemporal(c)
			}
			prices, err := pricesOf(c)
			if err != nil {
				return err
			}
			j, r, err := openRun(c, c.Args().First())
			if err != nil {
				return err
			}
			defer j.Close()
			run, err := ledger.Load(c.Context, j, r.ID, ledger.LoadOptions{Thinking: true})
			if err != nil {
				return &exitError{exitFailed, err}
			}
			opts := ledger.ReportOptions{MaxOutput: c.Int("max-output")}
			if opts.MaxOutput == 0 {
				opts.MaxOutput = -1 // all of it
			}
			if c.IsSet("db") {
				// The page is read later, elsewhere: its commands name the
				// journal by a path that works from any directory.
				if opts.DB, err = filepath.Abs(c.String("db")); err != nil {
					return &exitError{exitFailed, err}
				}
			}
			return writeReport(c, run.ID, func(w io.Writer) error {
				return ledger.WriteReport(w, run, ledger.AccountOf(run, ledger.PricesFor(run, prices)), opts)
			})
		},
	}
}

// writeReport writes the page of run runID to -o (- for stdout) with write.
func writeReport(c *cli.Context, runID string, write func(io.Writer) error) error {
	out := c.String("output")
	if out == "-" {
		return write(c.App.Writer)
	}
	f, err := os.Create(out)
	if err != nil {
		return usageErr(fmt.Errorf("-o: %w", err))
	}
	if err := write(f); err != nil {
		f.Close()
		return &exitError{exitFailed, err}
	}
	if err := f.Close(); err != nil {
		return &exitError{exitFailed, err}
	}
	fmt.Fprintf(c.App.ErrWriter, "noderun: wrote %s (run %s)\n", out, runID)
	return nil
}

// reportTemporal writes the page of a run on Temporal from its workflow
// history (ntemporal.Diagnosis.WriteReport): what diagnose --temporal
// accounts, the nodes' outputs and the diagnostics their finishing workers
// journaled, and the hand-overs.
func reportTemporal(c *cli.Context) error {
	if c.IsSet("prices") || c.IsSet("db") {
		return usageErr(errors.New("report --temporal: --prices and --db are not supported (the workers' journals hold the models and attempts)"))
	}
	tc, err := dialTemporal(c, "")
	if err != nil {
		return err
	}
	defer tc.Close()
	d, h, err := ntemporal.Diagnose(c.Context, tc, c.Args().First())
	if err != nil {
		return &exitError{exitFailed, err}
	}
	opts := ledger.ReportOptions{MaxOutput: c.Int("max-output"), Temporal: c.String("temporal")}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = -1 // all of it
	}
	return writeReport(c, h.WorkflowID, func(w io.Writer) error { return d.WriteReport(w, h, opts, time.Now()) })
}
