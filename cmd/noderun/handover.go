package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// diagnose --temporal: package runner/temporal accounts for the run from its
// workflow history (ntemporal.Diagnose); this file prints it.

// printHandovers prints the hand-overs as a table, after the diagnosis.
func printHandovers(w io.Writer, hs []ntemporal.Handover) {
	if len(hs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HAND-OVER\tLOST WORKER\tLAST HEARTBEAT\tTAKEN OVER BY\tRESUMED\tTOOK\tRECOVERY\tGENERATED\tREGENERATED\tPRESERVED")
	for _, ho := range hs {
		took := "-"
		if ho.HandoverMS != nil {
			took = ledger.Seconds(*ho.HandoverMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ho.Node, dash(ho.LostWorker), ntemporal.Clock(ho.LastHeartbeat), dash(ho.Worker), ntemporal.Clock(ho.Resumed),
			took, ho.Recovery, ledger.Thousands(ho.Tokens.Generated), ledger.Thousands(ho.Tokens.Regenerated), ledger.Thousands(ho.Tokens.Preserved))
	}
	tw.Flush()
}

// printTemporalDiagnosis prints the diagnosis as local diagnose does, then
// the hand-overs.
func printTemporalDiagnosis(w io.Writer, width int, d *ntemporal.Diagnosis, tableOnly bool) {
	printDiagnosis(w, width, d.Account, tableOnly)
	printHandovers(w, d.Handovers)
}

// diagnoseTemporalAction runs `diagnose --temporal HOST:PORT RUN [NODE]`.
func diagnoseTemporalAction(c *cli.Context) error {
	if c.IsSet("prices") {
		return usageErr(errors.New("diagnose --temporal: --prices is not supported (the workers' journals hold the models)"))
	}
	tc, err := dialTemporal(c, "")
	if err != nil {
		return err
	}
	defer tc.Close()
	runID := c.Args().Get(0)
	d, _, err := ntemporal.Diagnose(c.Context, tc, runID)
	if err != nil {
		return &exitError{exitFailed, err}
	}
	if node := c.Args().Get(1); node != "" && !d.Only(node) {
		return usageErr(&runner.UnknownNodeError{Flag: "diagnose", RunID: runID, Node: node})
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, d)
	}
	printTemporalDiagnosis(c.App.Writer, outWidth(c.App.Writer), d, c.Bool("table"))
	return nil
}
