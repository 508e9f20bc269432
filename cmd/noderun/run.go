package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

var dbFlag = &cli.StringFlag{Name: "db", Value: "noderun.db", Usage: "the run journal (SQLite)", EnvVars: []string{"NODERUN_DB"}}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a goal graph",
		ArgsUsage: "GRAPH.yaml",
		Flags:     execFlags("recovery profile (overrides the graph's)"),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr(errors.New("run: give exactly one graph file"))
			}
			opts, err := execOptions(c)
			if err != nil {
				return err
			}
			g, err := runner.LoadGraph(c.Args().First())
			if err != nil {
				return usageErr(err)
			}
			// Everything that can be wrong with the input is found before the journal is touched.
			if err := errors.Join(runner.Check(g, &opts), runner.CheckEnvironment(g, &opts)); err != nil {
				return usageErr(err)
			}
			j, err := journal.Open(c.Context, c.String("db"), journal.WithLogger(opts.Logger))
			if err != nil {
				return &exitError{exitFailed, err}
			}
			defer j.Close()
			opts.Journal = j
			res, err := runner.Run(c.Context, g, opts)
			return report(c, res, err)
		},
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "continue a run that did not finish: completed nodes keep their outputs, in-flight ones re-attach, resume or retry",
		ArgsUsage: "RUN|last",
		Flags: append(execFlags("recovery profile (default: the run's)"),
			&cli.StringSliceFlag{Name: "retry", Usage: "send this node's request again even if it may have had side effects (repeatable)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr(errors.New("resume: give exactly one run id (or last)"))
			}
			opts, err := execOptions(c)
			if err != nil {
				return err
			}
			j, err := openExisting(c, journal.WithLogger(opts.Logger))
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			if r.Status == journal.RunCompleted && len(c.StringSlice("retry")) == 0 {
				fmt.Fprintf(c.App.ErrWriter, "noderun: run %s already completed; nothing to resume\n", r.ID)
				return nil
			}
			opts.Journal = j
			res, err := runner.Resume(c.Context, r.ID, c.StringSlice("retry"), opts)
			var locked *journal.LockedError
			if errors.As(err, &locked) {
				return usageErr(fmt.Errorf("%w; one runner per run: wait for it, or stop it first", err))
			}
			return report(c, res, err)
		},
	}
}

// execFlags are the flags of the commands that execute nodes (run, resume).
func execFlags(profileUsage string) []cli.Flag {
	return []cli.Flag{
		dbFlag,
		&cli.StringFlag{Name: "profile", Usage: profileUsage},
		&cli.IntFlag{Name: "parallel", Value: 4, Usage: "nodes run at once"},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout"},
		&cli.BoolFlag{Name: "sim", Usage: "run every provider on the embedded simulator (same API, no keys, no network; docs/simulator.md)"},
	}
}

// execOptions reads execFlags into runner options, with the logger and the
// progress lines on stderr.
func execOptions(c *cli.Context) (runner.Options, error) {
	if c.Int("parallel") < 1 {
		return runner.Options{}, usageErr(errors.New("--parallel must be at least 1"))
	}
	log, err := newLogger(c)
	if err != nil {
		return runner.Options{}, err
	}
	opts := runner.Options{Profile: c.String("profile"), Parallel: c.Int("parallel"), Logger: log,
		Progress: progressPrinter(c.App.ErrWriter)}
	if c.Bool("sim") {
		opts.Sim = &runner.SimOptions{}
	}
	return opts, nil
}

// report prints a run's result and maps it to an exit code.
func report(c *cli.Context, res *runner.Result, err error) error {
	if err != nil {
		return &exitError{exitFailed, err}
	}
	if c.Bool("json") {
		err = printResultJSON(c.App.Writer, res)
	} else {
		printResult(c.App.Writer, res)
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	switch res.Status {
	case journal.RunCompleted:
		return nil
	case journal.RunInterrupted:
		return &exitError{exitInterrupted, fmt.Errorf("run %s interrupted; continue it with: noderun resume %s", res.RunID, res.RunID)}
	}
	return &exitError{exitFailed, fmt.Errorf("run %s %s", res.RunID, res.Status)}
}

// progressPrinter prints one line per node state change on stderr.
func progressPrinter(w io.Writer) func(node, state string) {
	start := time.Now()
	tty := isTerminal(w)
	return func(node, state string) {
		if tty {
			fmt.Fprintf(w, "%6.1fs %-14s %s\n", time.Since(start).Seconds(), node, state)
			return
		}
		fmt.Fprintf(w, "noderun: %7.2fs %-14s %s\n", time.Since(start).Seconds(), node, state)
	}
}

func printResult(w io.Writer, res *runner.Result) {
	fmt.Fprintf(w, "run %s %s\n", res.RunID, res.Status)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tBYTES\tNOTE")
	for _, n := range res.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", n.ID, n.State, len(n.Output), oneLine(n.Reason, 100))
	}
	tw.Flush()
	fmt.Fprintf(w, "outputs: noderun show %s NODE\n", res.RunID)
}

func printResultJSON(w io.Writer, res *runner.Result) error {
	type node struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Output string `json:"output,omitempty"`
		Reason string `json:"reason,omitempty"`
	}
	out := struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Nodes  []node `json:"nodes"`
	}{RunID: res.RunID, Status: string(res.Status)}
	for _, n := range res.Nodes {
		out.Nodes = append(out.Nodes, node{n.ID, string(n.State), n.Output, n.Reason})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
