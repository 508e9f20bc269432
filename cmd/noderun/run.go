package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/cliword"
	"github.com/noderun/noderun/internal/heapfloor"
	"github.com/noderun/noderun/internal/shell"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// dbFlag is --db, made afresh for each command (see jsonFlag).
func dbFlag() cli.Flag {
	return &cli.StringFlag{Name: "db", Value: "noderun.db", Usage: "the run journal, an SQLite `FILE`", EnvVars: []string{"NODERUN_DB"}, TakesFile: true}
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a goal graph",
		ArgsUsage: "GRAPH.yaml",
		Description: "Examples:\n  noderun run testdata/graphs/demo.yaml               # journal: ./noderun.db\n" +
			"  noderun run g.yaml --db ci.db --profile ci --json    # the result as JSON (docs/json.md)\n" +
			"  noderun run testdata/graphs/goal.yaml --input goal=\"why streams drop\" --input depth=5\n" +
			"  noderun run g.yaml --sim                            # every provider simulated (docs/simulator.md)\n" +
			"  noderun run g.yaml --refresh fetch                  # call fetch and what needs it again; reuse the rest\n" +
			"  noderun run g.yaml --cache-from previous.db         # reuse a CI artifact's outputs (read only)\n" +
			"  noderun run g.yaml --print report > report.md       # the node's output on stdout (the table on stderr)",
		Flags: append(append(append(execFlags("the recovery `PROFILE` (overrides the graph's; see: noderun profiles)"), temporalFlags()...),
			&cli.GenericFlag{Name: "input", Value: &inputFlag{}, Usage: "a graph input, `KEY=VALUE`; KEY=@FILE reads a file (repeatable)"},
			&cli.StringFlag{Name: "max-input", Value: "8MiB", Usage: "read at most `SIZE` of a file input (@FILE, type: file)"},
			&cli.DurationFlag{Name: "heartbeat-timeout", Usage: "--temporal: a silent worker is lost after `D` (10s)"},
			&cli.IntFlag{Name: "pack", Usage: "--temporal: `N` nodes an activity (0: by the run's width; 1: each alone)"},
			&cli.StringFlag{Name: "serve", Usage: "serve the run's page while it runs, on `HOST:PORT` (alone: " + defaultServeAddr + ")"},
			serveFlags()[0],
			&cli.StringSliceFlag{Name: "print", Usage: "print `NODE`'s output on stdout after the run, nothing else (repeatable)"}),
			append(cacheFlags(), metricsFlags(true)...)...),
		Action: func(c *cli.Context) error {
			defer heapfloor.Hold(heapfloor.Size)()
			if err := wantArgs(c, 1, 1, "give exactly one graph file"); err != nil {
				return err
			}
			opts, stopView, err := execOptions(c)
			if err != nil {
				return err
			}
			defer stopView()
			g, err := loadGraph(c, c.Args().First())
			if err != nil {
				return err
			}
			if err := knownGraphNodes(c, g, "print"); err != nil {
				return err
			}
			if c.Bool("json") && len(c.StringSlice("print")) > 0 {
				return usageErr(errors.New("--print and --json both write stdout: give one"))
			}
			if opts.MaxInputBytes, err = maxInputOf(c); err != nil {
				return usageErr(err)
			}
			if opts.Inputs, err = inputsOf(c, g, opts.MaxInputBytes); err != nil {
				return usageErr(inputHint(err))
			}
			// Everything that can be wrong with the input is found before the journal is touched.
			if err := g.CheckInputs(opts.Inputs, opts.MaxInputBytes); err != nil {
				return usageErr(inputHint(err))
			}
			if c.String("serve") != "" {
				if c.String("temporal") != "" {
					return usageErr(errors.New("--serve is for local runs: serve a run on Temporal with noderun serve --temporal"))
				}
				if _, err := serveToken(c, c.String("serve")); err != nil {
					return err
				}
			}
			if c.String("temporal") != "" { // the environment that matters is the workers'
				if c.String("metrics") != "" {
					return usageErr(errors.New("--metrics is for local runs: on Temporal the workers run the nodes and serve their metrics (noderun worker --metrics)"))
				}
				if c.Bool("no-cache") || len(c.StringSlice("refresh")) > 0 || len(c.StringSlice("cache-from")) > 0 {
					return usageErr(errors.New("--no-cache, --refresh and --cache-from are for local runs: on Temporal each worker consults its own journal (docs/temporal.md)"))
				}
				if err := runner.Check(g, &opts); err != nil {
					return usageErr(err)
				}
				return runTemporal(c, g, opts)
			}
			if err := errors.Join(runner.Check(g, &opts), runner.CheckEnvironment(g, &opts)); err != nil {
				return usageErr(err)
			}
			closeCache, err := cacheOptions(c, g, &opts)
			if err != nil {
				return err
			}
			defer closeCache()
			o, err := startTelemetry(c, opts.Logger)
			if err != nil {
				return err
			}
			defer lingerThenClose(c, o)
			j, err := journal.Open(c.Context, c.String("db"), append([]journal.Option{journal.WithLogger(opts.Logger)}, o.JournalOptions()...)...)
			if err != nil {
				return journalErr(err)
			}
			defer j.Close()
			opts.Journal, opts.Observer = j, o.Observer()
			if c.String("serve") != "" {
				opts.RunID = uuid.NewString()
				stop, err := startRunServer(c, opts.RunID)
				if err != nil {
					return err
				}
				defer stop()
			}
			res, err := runner.Run(c.Context, g, opts)
			stopView()
			closeBeside(c, j, res)
			return report(c, opts, res, err)
		},
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "continue an unfinished run; completed nodes keep their outputs",
		ArgsUsage: "RUN|last",
		Description: "Completed nodes keep their outputs; in-flight ones re-attach to their response, resume\n" +
			"their thread or retry, as their journal allows. Everything given is checked before anything runs.\n\n" +
			"Examples:\n  noderun resume last                  # continue the newest run\n" +
			"  noderun resume last --retry deploy   # ... and send deploy's request again",
		Flags: append(append(execFlags("the recovery `PROFILE` (default: the run's)"),
			append(temporalFlags(), &cli.StringSliceFlag{Name: "retry", Usage: "send `NODE`'s request again, side effects or not (repeatable)"})...),
			metricsFlags(true)...),
		Action: func(c *cli.Context) error {
			defer heapfloor.Hold(heapfloor.Size)()
			if err := wantArgs(c, 1, 1, "give exactly one run id (or last)"); err != nil {
				return err
			}
			opts, stopView, err := execOptions(c)
			if err != nil {
				return err
			}
			if c.String("temporal") != "" {
				if c.String("metrics") != "" {
					return usageErr(errors.New("--metrics is for local runs: on Temporal the workers run the nodes and serve their metrics (noderun worker --metrics)"))
				}
				return resumeTemporal(c, opts)
			}
			defer stopView()
			o, err := startTelemetry(c, opts.Logger)
			if err != nil {
				return err
			}
			defer lingerThenClose(c, o)
			j, err := openExisting(c, append([]journal.Option{journal.WithLogger(opts.Logger)}, o.JournalOptions()...)...)
			if err != nil {
				return err
			}
			defer j.Close()
			opts.Observer = o.Observer()
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			// Every argument is checked before anything starts (providers, simulators).
			if err := checkRetry(c, j, r.ID, c.StringSlice("retry")); err != nil {
				return err
			}
			if err := checkProfile(c, j, r.ID); err != nil {
				return err
			}
			if r.Status == journal.RunCompleted && len(c.StringSlice("retry")) == 0 {
				fmt.Fprintf(c.App.ErrWriter, "noderun: run %s already completed; nothing to resume\n", r.ID)
				return nil
			}
			opts.Journal = j
			res, err := runner.Resume(c.Context, r.ID, c.StringSlice("retry"), opts)
			stopView()
			closeBeside(c, j, res)
			if err := runErr(err); err != nil {
				return err
			}
			return report(c, opts, res, nil)
		},
	}
}

// closeBeside starts closing the journal while the result is printed, when
// nothing after the run reads it: the result comes from what the run read
// back (Result.Ledger). Its last checkpoint (~30 ms after 1,000 nodes) then
// runs beside the account and the JSON; the deferred Close waits for it. An
// interrupted run keeps it open (its report may cancel work through it), and
// so does one served (--serve), whose page reads it to the end.
func closeBeside(c *cli.Context, j *journal.Journal, res *runner.Result) {
	if res == nil || res.Ledger == nil || res.Status == journal.RunInterrupted || c.String("serve") != "" {
		return
	}
	go j.Close()
}

// cacheFlags are run's switches of the node cache (docs/graph.md, cache).
func cacheFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-cache", Usage: "call every node: reuse no output of an earlier run"},
		&cli.StringSliceFlag{Name: "refresh", Usage: "call `NODE` and every node that needs it again (repeatable)"},
		&cli.StringSliceFlag{Name: "cache-from", Usage: "reuse the outputs of journal `FILE` too, read-only (repeatable)", TakesFile: true},
	}
}

// cacheOptions reads cacheFlags into opts, checking every name and file
// before the journal is touched; close closes the --cache-from journals.
func cacheOptions(c *cli.Context, g *runner.Graph, opts *runner.Options) (closeAll func(), err error) {
	opts.Cache.Off = c.Bool("no-cache")
	if err := knownGraphNodes(c, g, "refresh"); err != nil {
		return nil, err
	}
	opts.Cache.Refresh = c.StringSlice("refresh")
	closeAll = func() {
		for _, j := range opts.Cache.From {
			_ = j.Close()
		}
	}
	for _, path := range c.StringSlice("cache-from") {
		j, err := journal.OpenReadOnly(c.Context, path)
		if err != nil {
			closeAll()
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usageErr(fmt.Errorf("--cache-from %s: no such file", path))
			}
			return nil, usageErr(fmt.Errorf("--cache-from %s: %w", path, err))
		}
		opts.Cache.From = append(opts.Cache.From, j)
	}
	return closeAll, nil
}

// knownGraphNodes refuses a node named by a flag (--refresh, --print) that
// the graph does not have, naming the closest (exit 2).
func knownGraphNodes(c *cli.Context, g *runner.Graph, flag string) error {
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[i] = n.ID
	}
	for _, id := range c.StringSlice(flag) {
		if g.Node(id) == nil {
			return usageErr(fmt.Errorf("--%s %s: graph %s has no node %q%s", flag, id, g.Path, id, cliword.DidYouMean(id, ids)))
		}
	}
	return nil
}

// execFlags are the flags of the commands that execute nodes (run, resume).
func execFlags(profileUsage string) []cli.Flag {
	return []cli.Flag{
		dbFlag(),
		&cli.StringFlag{Name: "profile", Usage: profileUsage},
		&cli.IntFlag{Name: "parallel", Value: 4, Usage: "nodes run at once"},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout"},
		&cli.BoolFlag{Name: "sim", Usage: "run every provider on the embedded simulator (no keys, no network)"},
		&cli.BoolFlag{Name: "no-pacing", Usage: "send at once, not as quota allows (a 429 then spends a retry)"},
	}
}

// execOptions reads execFlags into runner options, with the logger and the
// progress on stderr: on a terminal, a live view (stop it before printing
// anything else; stopping twice is fine); else one log stream.
func execOptions(c *cli.Context) (runner.Options, func(), error) {
	if c.Int("parallel") < 1 {
		return runner.Options{}, nil, usageErr(errors.New("--parallel must be at least 1"))
	}
	if err := checkLinger(c); err != nil {
		return runner.Options{}, nil, err
	}
	if err := checkCompanions(c); err != nil {
		return runner.Options{}, nil, err
	}
	opts := runner.Options{Profile: c.String("profile"), Parallel: c.Int("parallel"), JournalArg: strings.TrimSpace(dbArg(c))}
	opts.Quota.Off = c.Bool("no-pacing")
	if c.Bool("sim") {
		opts.Sim = &runner.SimOptions{}
	}
	if f, ok := terminalFile(c.App.ErrWriter); ok {
		v := newLiveView(f)
		log, err := newLoggerTo(c, &lockedWriter{w: v}, termWidth(f))
		if err != nil {
			v.stop()
			return runner.Options{}, nil, err
		}
		var once sync.Once
		opts.Logger, opts.OnProgress = log, v.report
		return opts, func() { once.Do(v.stop) }, nil
	}
	log, err := newLogger(c)
	if err != nil {
		return runner.Options{}, nil, err
	}
	opts.Logger = log
	// What progressLogger logs is at Info. Below that nobody hears it, and
	// without OnProgress the runner does no progress work per chunk (3.8%
	// of a CPU profile of 10,000 trickling nodes, though BenchmarkTrickle's
	// CPU did not move beyond its noise).
	if log.Enabled(c.Context, slog.LevelInfo) {
		opts.OnProgress = progressLogger(log)
	}
	return opts, func() {}, nil
}

// runErr maps the errors of reopening a journaled run to exit codes: a live
// runner holding it, or a node the run does not have, are the operator's to
// fix (exit 2); anything else is a failure.
func runErr(err error) error {
	var locked *journal.LockedError
	var unknown *runner.UnknownNodeError
	switch {
	case err == nil, errors.Is(err, runner.ErrInterrupted): // the result says it: report maps it
		return nil
	case errors.As(err, &locked):
		return usageErr(fmt.Errorf("%w; one runner per run: wait for it, or stop it first", err))
	case errors.As(err, &unknown) && unknown.Op == "retry":
		named := *unknown // the CLI's word for what named it
		named.Op = "--retry"
		return usageErr(&named)
	case errors.As(err, &unknown):
		return usageErr(err)
	case errors.As(err, new(*runner.MissingEnvError)):
		return usageErr(err)
	}
	return &exitError{exitFailed, err}
}

// dbArg is the --db flag that names this journal, for a command to print;
// empty for the default journal.
func dbArg(c *cli.Context) string {
	if c.IsSet("db") {
		return " --db " + shell.Quote(c.String("db"))
	}
	return ""
}

// resumeLine is the command that continues a run, as the operator would type it.
func resumeLine(c *cli.Context, runID string) string {
	return "noderun resume " + runID + dbArg(c)
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

// bg keeps ctx's values but not its cancellation: an interrupted run still
// gets its summary.
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// loadGraph reads a graph file for a command: its problems are exit 2, and a
// signal while reading it (a FIFO nobody writes) ends the command at once.
func loadGraph(c *cli.Context, path string) (*runner.Graph, error) {
	g, err := runner.LoadGraphContext(c.Context, path)
	switch {
	case c.Context.Err() != nil:
		return nil, interruptedLoad(path)
	case err != nil:
		return nil, usageErr(err)
	}
	return g, nil
}

// interruptedLoad is the error of a signal that came while a graph file was
// being read: nothing was written.
func interruptedLoad(path string) error {
	return &exitError{exitInterrupted, fmt.Errorf("interrupted while reading %s; nothing was written", path)}
}
