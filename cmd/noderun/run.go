package main

import (
	"context"
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
		Flags:     append(execFlags("recovery profile (overrides the graph's)"), temporalFlags()...),
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
			if c.String("temporal") != "" { // the environment that matters is the workers'
				if err := runner.Check(g, &opts); err != nil {
					return usageErr(err)
				}
				return runTemporal(c, g, opts)
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
			return report(c, opts, res, err)
		},
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "continue a run that did not finish: completed nodes keep their outputs, in-flight ones re-attach, resume or retry",
		ArgsUsage: "RUN|last",
		Flags: append(execFlags("recovery profile (default: the run's)"),
			append(temporalFlags(), &cli.StringSliceFlag{Name: "retry", Usage: "send this node's request again even if it may have had side effects (repeatable)"})...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr(errors.New("resume: give exactly one run id (or last)"))
			}
			opts, err := execOptions(c)
			if err != nil {
				return err
			}
			if c.String("temporal") != "" {
				return resumeTemporal(c, opts)
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
			if err := runErr(err); err != nil {
				return err
			}
			return report(c, opts, res, nil)
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
	return runner.Options{Profile: c.String("profile"), Parallel: c.Int("parallel"), Logger: log,
		Progress: progressPrinter(c.App.ErrWriter)}, nil
}

// cancelCommand stops at the provider what an interrupted run left running.
func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "cancel at the provider the responses an interrupted run left running (all unfinished nodes, or those named)",
		Description: "An interrupted run (Ctrl-C, SIGTERM) leaves its background responses running so that\n" +
			"`noderun resume` re-attaches to them without regenerating a token. cancel stops them instead, so they\n" +
			"stop billing; a later resume then retries those nodes from scratch.\n\n" +
			"Example: noderun cancel last essay",
		ArgsUsage: "RUN|last [NODE...]",
		Flags:     []cli.Flag{dbFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return usageErr(errors.New("cancel: give a run id (or last), and optionally nodes"))
			}
			log, err := newLogger(c)
			if err != nil {
				return err
			}
			j, err := openExisting(c, journal.WithLogger(log))
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
		return &exitError{exitFailed, fmt.Errorf("%d response(s) could not be cancelled; they may still be running", failed)}
	}
	return nil
}

// runErr maps the errors of reopening a journaled run to exit codes: a live
// runner holding it, or a node the run does not have, are the operator's to
// fix (exit 2); anything else is a failure.
func runErr(err error) error {
	var locked *journal.LockedError
	var unknown *runner.UnknownNodeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &locked):
		return usageErr(fmt.Errorf("%w; one runner per run: wait for it, or stop it first", err))
	case errors.As(err, &unknown):
		return usageErr(err)
	}
	return &exitError{exitFailed, err}
}

// report prints a run's result and maps it to an exit code.
func report(c *cli.Context, opts runner.Options, res *runner.Result, err error) error {
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
		return interrupted(c, opts, res)
	}
	return &exitError{exitFailed, fmt.Errorf("run %s %s", res.RunID, res.Status)}
}

// interrupted tells the operator what an interruption left running at the
// provider and the exact commands to resume or cancel it. After Ctrl-C it
// waits a moment for a second one, which cancels that work now.
func interrupted(c *cli.Context, opts runner.Options, res *runner.Result) error {
	w := c.App.ErrWriter
	db := ""
	if c.IsSet("db") {
		db = " --db " + shellQuote(c.String("db"))
	}
	var running []string
	for _, n := range res.Nodes {
		if n.Running != "" {
			running = append(running, n.ID)
		}
	}
	resumeCmd := fmt.Sprintf("noderun resume %s%s", res.RunID, db)
	if len(running) == 0 {
		return &exitError{exitInterrupted, fmt.Errorf("run %s interrupted; continue it with: %s", res.RunID, resumeCmd)}
	}
	fmt.Fprintf(w, "noderun: run %s interrupted; still running at the provider (and billing) until they finish:\n", res.RunID)
	for _, n := range res.Nodes {
		if n.Running != "" {
			fmt.Fprintf(w, "  %-14s response %s\n", n.ID, n.Running)
		}
	}
	fmt.Fprintf(w, "continue (re-attaches, regenerates nothing): %s\n", resumeCmd)
	fmt.Fprintf(w, "stop them at the provider:                  noderun cancel %s%s\n", res.RunID, db)
	sig := signalsOf(c)
	if sig == nil {
		return &exitError{exitInterrupted, errors.New("")}
	}
	if sig.interactive() {
		fmt.Fprintf(w, "press Ctrl-C again within %s to cancel them now\n", cancelWindow)
	}
	if !sig.cancelAsked(waitFor(sig.interactive())) {
		return &exitError{exitInterrupted, errors.New("")}
	}
	// Cancel with a context of its own: the run's was cancelled by the signal.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), time.Minute)
	defer cancel()
	done, err := runner.Cancel(ctx, res.RunID, running, runner.Options{Journal: opts.Journal, Logger: opts.Logger})
	if err != nil {
		return &exitError{exitInterrupted, fmt.Errorf("cancel: %w", err)}
	}
	if err := printCancelled(c, res.RunID, done); err != nil {
		return &exitError{exitInterrupted, err}
	}
	return &exitError{exitInterrupted, errors.New("")}
}

// waitFor is how long an interrupted run waits for the signal that cancels
// its work: a moment after Ctrl-C, none after SIGTERM (a second signal that
// already arrived is still seen).
func waitFor(interactive bool) time.Duration {
	if interactive {
		return cancelWindow
	}
	return 0
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
