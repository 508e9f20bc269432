package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// diagnose --temporal: package runner/temporal accounts for the run from its
// workflow history, hand-overs included (ntemporal.Diagnose), and writes it
// (Diagnosis.WriteText); this file prints it.

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
		return usageErr(&runner.UnknownNodeError{Op: "diagnose", RunID: runID, Node: node})
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, d)
	}
	if err := d.WriteText(c.App.Writer, ledger.TextOptions{Width: outWidth(c.App.Writer), TableOnly: c.Bool("table")}); err != nil {
		return &exitError{exitFailed, err}
	}
	return nil
}
