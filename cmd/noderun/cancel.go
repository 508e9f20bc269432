package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/runner"
)

// cancelCommand stops at the provider what an interrupted run left running.
func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "stop at the provider what an interrupted run left running",
		Description: "Cancels the responses of every unfinished node, or of the nodes named.\n\n" +
			"An interrupted run (Ctrl-C, SIGTERM) leaves its background responses running so that\n" +
			"`noderun resume` re-attaches to them without regenerating a token. cancel stops them instead, so they\n" +
			"stop billing; a later resume then retries those nodes from scratch.\n\n" +
			"Example: noderun cancel last essay",
		ArgsUsage: "RUN|last [NODE...]",
		Flags:     []cli.Flag{dbFlag()},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, -1, "give a run id (or last), and optionally nodes"); err != nil {
				return err
			}
			j, log, err := openLogged(c)
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			done, err := runner.Cancel(c.Context, r.ID, c.Args().Tail(), runner.Options{Journal: j, Logger: log})
			if err := runErr(err); err != nil {
				return err
			}
			return printCancelled(c, r.ID, done)
		},
	}
}

// printCancelled says what cancel did, a line a node; exit 1 if a cancel failed.
func printCancelled(c *cli.Context, runID string, done []runner.Cancelled) error {
	if len(done) == 0 {
		fmt.Fprintf(c.App.Writer, "run %s: nothing running at the provider\n", runID)
		return nil
	}
	failed := 0
	for _, d := range done {
		ref := d.Ref
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(c.App.Writer, "%s\t%s\t%s\n", d.Node, ref, d.Note)
		if d.Err != nil {
			failed++
		}
	}
	if failed > 0 {
		return &exitError{exitFailed, fmt.Errorf("%s could not be cancelled; it may still be running", textfit.Count(failed, "response"))}
	}
	return nil
}
