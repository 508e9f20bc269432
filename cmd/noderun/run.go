package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"text/tabwriter"

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
		Description: "Examples:\n  noderun run testdata/graphs/demo.yaml               # journal: ./noderun.db\n" +
			"  noderun run g.yaml --db ci.db --profile ci --json    # the result as JSON (docs/json.md)",
		Flags: execFlags("recovery profile (overrides the graph's)"),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 1, "give exactly one graph file"); err != nil {
				return err
			}
			opts, stopView, err := execOptions(c)
			if err != nil {
				return err
			}
			defer stopView()
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
			stopView()
			return report(c, j, res, err)
		},
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "continue a run that did not finish: completed nodes keep their outputs, in-flight ones re-attach, resume or retry",
		ArgsUsage: "RUN|last",
		Description: "Examples:\n  noderun resume last                  # continue the newest run\n" +
			"  noderun resume last --retry deploy   # ... and send deploy's request again",
		Flags: append(execFlags("recovery profile (default: the run's)"),
			&cli.StringSliceFlag{Name: "retry", Usage: "send this node's request again even if it may have had side effects (repeatable)"}),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 1, "give exactly one run id (or last)"); err != nil {
				return err
			}
			opts, stopView, err := execOptions(c)
			if err != nil {
				return err
			}
			defer stopView()
			j, err := openExisting(c, journal.WithLogger(opts.Logger))
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			if err := checkRetry(c, j, r.ID, c.StringSlice("retry")); err != nil {
				return err
			}
			if r.Status == journal.RunCompleted && len(c.StringSlice("retry")) == 0 {
				fmt.Fprintf(c.App.ErrWriter, "noderun: run %s already completed; nothing to resume\n", r.ID)
				return nil
			}
			opts.Journal = j
			res, err := runner.Resume(c.Context, r.ID, c.StringSlice("retry"), opts)
			stopView()
			var locked *journal.LockedError
			if errors.As(err, &locked) {
				return usageErr(fmt.Errorf("%w; one runner per run: wait for it, or stop it first", err))
			}
			return report(c, j, res, err)
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
// progress on stderr: on a terminal, a live view (stop it before printing
// anything else; stopping twice is fine); else one log stream.
func execOptions(c *cli.Context) (runner.Options, func(), error) {
	if c.Int("parallel") < 1 {
		return runner.Options{}, nil, usageErr(errors.New("--parallel must be at least 1"))
	}
	if f, ok := terminalFile(c.App.ErrWriter); ok {
		v := newLiveView(f)
		log, err := newLoggerTo(c, &lockedWriter{w: v}, true)
		if err != nil {
			v.stop()
			return runner.Options{}, nil, err
		}
		var once sync.Once
		return runner.Options{Profile: c.String("profile"), Parallel: c.Int("parallel"), Logger: log,
			Progress: v.progress, Observe: v.observe}, func() { once.Do(v.stop) }, nil
	}
	log, err := newLogger(c)
	if err != nil {
		return runner.Options{}, nil, err
	}
	return runner.Options{Profile: c.String("profile"), Parallel: c.Int("parallel"), Logger: log,
		Progress: progressLogger(log)}, func() {}, nil
}

// report prints a run's result and maps it to an exit code.
func report(c *cli.Context, j *journal.Journal, res *runner.Result, err error) error {
	if err != nil {
		return &exitError{exitFailed, err}
	}
	var d *diagnosis // the run-level lines of noderun diagnose, and a verdict per node
	if r, derr := j.Run(c.Context, res.RunID); derr == nil {
		d, _ = diagnose(c.Context, j, r, nil)
	}
	if c.Bool("json") {
		err = printResultJSON(c.App.Writer, res, d)
	} else {
		printResult(c.App.Writer, res, d, closingHint(c, res))
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

// progressLogger puts the node states that no diagnostic reports (a node
// starts streaming, a node is done) into the log stream, so that a pipe gets
// one stream, each event once: a recovery step, a failure or a skip is
// already a diagnostic line.
func progressLogger(log *slog.Logger) func(node, state string) {
	return func(node, state string) {
		if state == "streaming" || strings.HasPrefix(state, "done") {
			log.Info(state, slog.String("node", node))
		}
	}
}

func printResult(w io.Writer, res *runner.Result, d *diagnosis, hint string) {
	verdicts := map[string]string{}
	if d != nil {
		for _, n := range d.Nodes {
			verdicts[n.ID] = n.Verdict
		}
	}
	fmt.Fprintf(w, "run %s %s\n", res.RunID, res.Status)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tBYTES\tNOTE")
	for _, n := range res.Nodes {
		note := n.Reason
		if note == "" {
			note = verdicts[n.ID]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", n.ID, n.State, len(n.Output), oneLine(note, 100))
	}
	tw.Flush()
	if d != nil {
		for _, l := range d.Summary {
			fmt.Fprintln(w, l)
		}
	}
	fmt.Fprintln(w, hint)
}

// closingHint is a command that shows an output, as it can be typed: the
// binary as it was invoked, a node that has an output, and the journal when
// it is not the default.
func closingHint(c *cli.Context, res *runner.Result) string {
	runID, node := res.RunID, "NODE"
	for _, n := range res.Nodes { // the last node with an output: a command that works verbatim
		if n.State == journal.NodeCompleted {
			node = n.ID
		}
	}
	bin := "noderun"
	if arg0 := os.Args[0]; strings.Contains(arg0, "/") && !strings.HasSuffix(arg0, ".test") {
		bin = arg0
	}
	db := ""
	if c.String("db") != dbFlag.Value {
		db = " --db " + c.String("db")
	}
	short := runID
	if len(short) > 8 {
		short = short[:8] // a unique prefix is enough, and easier to type
	}
	return fmt.Sprintf("output: %s show %s %s%s   (what recovery did: %s diagnose %s%s)", bin, short, node, db, bin, short, db)
}

func printResultJSON(w io.Writer, res *runner.Result, d *diagnosis) error {
	type node struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Output string `json:"output,omitempty"`
		Reason string `json:"reason,omitempty"`
	}
	out := struct {
		RunID   string   `json:"run_id"`
		Status  string   `json:"status"`
		Nodes   []node   `json:"nodes"`
		Summary []string `json:"summary"`
	}{RunID: res.RunID, Status: string(res.Status), Nodes: []node{}, Summary: []string{}}
	for _, n := range res.Nodes {
		out.Nodes = append(out.Nodes, node{n.ID, string(n.State), n.Output, n.Reason})
	}
	if d != nil {
		out.Summary = d.Summary
	}
	return writeJSON(w, out)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
