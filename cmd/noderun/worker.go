package main

// Temporal: `noderun worker`, and the --temporal variants of run, resume,
// status and show. See docs/temporal.md.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/noderun/noderun/internal/heapfloor"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/quota"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// temporalFlags select a Temporal frontend for run, resume, status, show,
// diagnose and report.
func temporalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "temporal", Usage: "run on (or read the run from) the Temporal frontend at `HOST:PORT`", EnvVars: []string{"NODERUN_TEMPORAL"}},
		&cli.StringFlag{Name: "namespace", Value: "default", Usage: "Temporal namespace"},
		&cli.StringFlag{Name: "task-queue", Value: ntemporal.DefaultTaskQueue, Usage: "Temporal task queue of the noderun workers"},
	}
}

func dialTemporal(c *cli.Context, identity string, interceptors ...interceptor.ClientInterceptor) (client.Client, error) {
	log, err := newLogger(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	tc, err := ntemporal.Dial(ctx, c.String("temporal"), c.String("namespace"), identity, log, interceptors...)
	if err != nil {
		return nil, &exitError{exitFailed, err}
	}
	return tc, nil
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run graph workflows and node activities from Temporal",
		Description: "A worker runs nodes with the same executor, profiles and diagnostics as `noderun run`, journals them\n" +
			"in its own SQLite file (--db), and heartbeats each node's resume cursor to Temporal, so that when a worker\n" +
			"is lost another one re-attaches to its response instead of regenerating it. It runs until interrupted.\n" +
			"See docs/temporal.md.",
		Flags: append(temporalFlags(),
			&cli.StringFlag{Name: "db", Value: "noderun-worker.db", Usage: "this worker's journal, an SQLite `FILE`", EnvVars: []string{"NODERUN_WORKER_DB"}, TakesFile: true},
			&cli.StringFlag{Name: "identity", Usage: "this worker's `NAME` in Temporal (default: pid@host)"},
			&cli.IntFlag{Name: "parallel", Value: 16, Usage: "nodes this worker runs at once"},
			metricsFlags(false)[0],
		),
		Action: func(c *cli.Context) error {
			defer heapfloor.Hold(heapfloor.Size)()
			if c.String("temporal") == "" {
				return usageErr(errors.New("worker: --temporal HOST:PORT is required"))
			}
			if c.Int("parallel") < 1 {
				return usageErr(errors.New("--parallel must be at least 1"))
			}
			log, err := newLogger(c)
			if err != nil {
				return err
			}
			identity := c.String("identity")
			if identity == "" {
				host, _ := os.Hostname()
				identity = fmt.Sprintf("%d@%s", os.Getpid(), host)
			}
			o, err := startTelemetry(c, log)
			if err != nil {
				return err
			}
			defer o.Close()
			j, err := journal.Open(c.Context, c.String("db"), append([]journal.Option{journal.WithLogger(log)}, o.JournalOptions()...)...)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			defer j.Close()
			icp, err := temporalInterceptors(o)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			tc, err := dialTemporal(c, identity, icp...)
			if err != nil {
				return err
			}
			defer tc.Close()
			w, err := ntemporal.NewWorker(tc, c.String("task-queue"), &ntemporal.Activities{Journal: j, Logger: log, Identity: identity, Pacers: quota.NewRegistry(),
				Observer: o.Observer()},
				ntemporal.WorkerOptions(c.Int("parallel")))
			if err != nil {
				return &exitError{exitFailed, err}
			}
			if err := w.Start(); err != nil {
				return &exitError{exitFailed, fmt.Errorf("worker: %w", err)}
			}
			fmt.Fprintf(c.App.ErrWriter, "noderun: worker %s polling task queue %q on %s (journal %s)\n",
				identity, c.String("task-queue"), c.String("temporal"), c.String("db"))
			<-c.Context.Done()
			// Stopping cancels the running nodes: each ends its attempt as
			// interrupted and Temporal gives it to another worker, which
			// re-attaches from the last heartbeat.
			w.Stop()
			return nil
		},
	}
}

// runTemporal submits g as a workflow and follows it like a local run.
func runTemporal(c *cli.Context, g *runner.Graph, opts runner.Options) error {
	if n := c.Int("pack"); n < 0 || n > ntemporal.MaxPackFlag {
		return usageErr(fmt.Errorf("--pack %d: give 0 (packs by the run's width), 1 (each node alone) or up to %d nodes an activity", n, ntemporal.MaxPackFlag))
	}
	p, err := runner.Prepare(g, &opts)
	if err != nil {
		return usageErr(err)
	}
	o, err := startTelemetry(c, opts.Logger)
	if err != nil {
		return err
	}
	defer o.Close()
	icp, err := temporalInterceptors(o)
	if err != nil {
		return &exitError{exitFailed, err}
	}
	tc, err := dialTemporal(c, "", icp...)
	if err != nil {
		return err
	}
	defer tc.Close()
	in := ntemporal.RunInput{RunID: uuid.NewString(), GraphPath: g.Path, GraphText: string(g.Source), Profile: p, Parallel: opts.Parallel,
		Inputs: opts.Inputs, HeartbeatTimeout: c.Duration("heartbeat-timeout"), Pack: c.Int("pack")}
	// The run's span is the trace's root; the interceptor carries it to
	// the workflow and from there to each node's activity.
	ctx, end := o.Telemetry.StartRun(c.Context, in.RunID, g.Name)
	if _, err := ntemporal.Submit(ctx, tc, c.String("task-queue"), in); err != nil {
		end(journal.RunFailed)
		return &exitError{exitFailed, fmt.Errorf("submit to Temporal: %w", err)}
	}
	fmt.Fprintf(c.App.ErrWriter, "noderun: run %s submitted to Temporal %s (task queue %q)\n", in.RunID, c.String("temporal"), c.String("task-queue"))
	err = followTemporal(c, tc, in.RunID, opts)
	st := journal.RunCompleted
	if err != nil {
		st = journal.RunFailed
	}
	end(st)
	return err
}

// followTemporal prints a Temporal run's progress and result with the exit
// codes of a local run.
func followTemporal(c *cli.Context, tc client.Client, runID string, opts runner.Options) error {
	res, err := ntemporal.Follow(c.Context, tc, runID, 250*time.Millisecond, opts.OnProgress)
	if err != nil {
		if c.Context.Err() != nil {
			return &exitError{exitInterrupted, fmt.Errorf("stopped following run %s; it goes on on Temporal: noderun status --temporal %s %s",
				runID, c.String("temporal"), runID)}
		}
		return &exitError{exitFailed, err}
	}
	err = report(c, opts, ntemporal.Result(res), nil)
	held := 0
	for _, n := range res.Nodes {
		if n.State == string(journal.NodeAttention) {
			held++
			fmt.Fprintf(c.App.ErrWriter, "noderun: node %s is held for an operator; replay it with: noderun resume --temporal %s %s --retry %s\n",
				n.Node, c.String("temporal"), runID, n.Node)
		}
	}
	if err != nil && held > 0 {
		return &exitError{exitFailed, fmt.Errorf("run %s waits on Temporal for an operator (%s held)", runID, textfit.Count(held, "node"))}
	}
	return err
}

// resumeTemporal replays nodes held for an operator and follows the run.
func resumeTemporal(c *cli.Context, opts runner.Options) error {
	runID := c.Args().First()
	if runID == "last" {
		return usageErr(errors.New("resume --temporal: give the run id (the workflow id), not last"))
	}
	tc, st, err := temporalRun(c, runID)
	if err != nil {
		return err
	}
	defer tc.Close()
	for _, node := range c.StringSlice("retry") {
		if !st.Has(node) {
			return usageErr(&runner.UnknownNodeError{Op: "--retry", RunID: runID, Node: node})
		}
		if err := ntemporal.Retry(c.Context, tc, runID, node); err != nil {
			return &exitError{exitFailed, fmt.Errorf("signal %s: %w", node, err)}
		}
	}
	return followTemporal(c, tc, runID, opts)
}

// statusTemporal prints a run as Temporal holds it: node states, the worker
// that ran each, the running ones' last heartbeated cursor, each finished
// node's verdict as its worker's ledger accounts it, and the diagnostics
// the activities returned.
func statusTemporal(c *cli.Context) error {
	if c.NArg() == 0 {
		return listTemporal(c)
	}
	if c.Bool("json") {
		return usageErr(errors.New("status RUN --temporal: --json is diagnose --temporal RUN --json (the run's nodes, figures and hand-overs)"))
	}
	runID := c.Args().First()
	tc, st, err := temporalRun(c, runID)
	if err != nil {
		return err
	}
	defer tc.Close()
	pend, _ := ntemporal.PendingNodes(c.Context, tc, runID) // unread, the table shows the workflow's state alone
	w := c.App.Writer
	fmt.Fprintf(w, "run %s %s (Temporal %s)\n", st.RunID, st.Status, c.String("temporal"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tBYTES\tWORKER\tACTIVITY ATTEMPT\tCURSOR\tNOTE")
	for _, n := range ntemporal.Standing(st, pend) {
		cursor := "-"
		if n.Cursor.Ref != "" {
			cursor = fmt.Sprintf("%s@%d", n.Cursor.Ref, n.Cursor.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", n.Node, n.State, n.Bytes, dash(n.Worker), n.Attempt, cursor, textfit.Text(n.Note, 100))
	}
	tw.Flush()
	for _, n := range st.Nodes {
		for _, d := range n.Diagnostics {
			fmt.Fprintf(w, "%s\t%s#%d\t%s %s\t%s\n", n.Node, dash(n.Worker), d.Attempt, d.Code, d.Name, d.Message)
		}
	}
	return nil
}

// listTemporal lists the newest runs on Temporal (status --temporal).
func listTemporal(c *cli.Context) error {
	tc, err := dialTemporal(c, "")
	if err != nil {
		return err
	}
	defer tc.Close()
	runs, err := ntemporal.ListRuns(c.Context, tc, 50)
	if err != nil {
		return &exitError{exitFailed, err}
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, ntemporal.RunList{Temporal: c.String("temporal"), Runs: runs})
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "RUN\tSTATUS\tSTARTED\tCLOSED\tEXECUTIONS")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.RunID, r.Status, dateTime(r.Started), dateTime(r.Closed), r.Executions)
	}
	return nil
}

// dateTime is an RFC 3339 time as status lists runs' ("-" for none).
func dateTime(s *string) string {
	if s == nil {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return *s
	}
	return t.Local().Format(time.DateTime)
}

// showTemporal prints a node's output as the run's workflow holds it.
func showTemporal(c *cli.Context) error {
	if c.NArg() != 2 {
		return usageErr(errors.New("show --temporal: give the run id and a node"))
	}
	runID, node := c.Args().Get(0), c.Args().Get(1)
	tc, st, err := temporalRun(c, runID)
	if err != nil {
		return err
	}
	defer tc.Close()
	for _, n := range st.Nodes {
		if n.Node != node {
			continue
		}
		if n.State != string(journal.NodeCompleted) {
			return &exitError{exitFailed, fmt.Errorf("node %s is %s (%s); its partial output is in the journal of worker %s",
				node, n.State, n.Reason, dash(n.Worker))}
		}
		_, err := fmt.Fprint(c.App.Writer, n.Output)
		return err
	}
	return usageErr(&runner.UnknownNodeError{Op: "show", RunID: runID, Node: node})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// temporalRun dials Temporal and reads how run runID stands there. Close
// the client when done.
func temporalRun(c *cli.Context, runID string) (client.Client, ntemporal.RunResult, error) {
	tc, err := dialTemporal(c, "")
	if err != nil {
		return nil, ntemporal.RunResult{}, err
	}
	st, err := ntemporal.State(c.Context, tc, runID)
	if err != nil {
		tc.Close()
		return nil, ntemporal.RunResult{}, &exitError{exitFailed, err}
	}
	return tc, st, nil
}
