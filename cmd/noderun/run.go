package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/shell"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

var dbFlag = &cli.StringFlag{Name: "db", Value: "noderun.db", Usage: "the run journal, an SQLite `FILE`", EnvVars: []string{"NODERUN_DB"}, TakesFile: true}

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
			"  noderun run g.yaml --cache-from previous.db         # reuse a CI artifact's outputs (read only)",
		Flags: append(append(append(execFlags("the recovery `PROFILE` (overrides the graph's; see: noderun profiles)"), temporalFlags()...),
			&cli.GenericFlag{Name: "input", Value: &inputFlag{}, Usage: "a graph input, `KEY=VALUE`; KEY=@FILE reads a file (repeatable)"},
			&cli.StringFlag{Name: "max-input", Value: "8MiB", Usage: "read at most `SIZE` of a file input (@FILE, type: file)"},
			&cli.DurationFlag{Name: "heartbeat-timeout", Usage: "--temporal: a silent worker is lost after `D` (10s)"},
			&cli.IntFlag{Name: "pack", Usage: "--temporal: `N` nodes an activity (0: by the run's width; 1: each alone)"},
			&cli.StringFlag{Name: "serve", Usage: "serve the run's page while it runs, on `HOST:PORT` (alone: " + defaultServeAddr + ")"},
			serveFlags()[0]),
			append(cacheFlags(), metricsFlags(true)...)...),
		Action: func(c *cli.Context) error {
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
			defer o.lingerThenClose(c)
			j, err := journal.Open(c.Context, c.String("db"), append([]journal.Option{journal.WithLogger(opts.Logger)}, o.journalOptions()...)...)
			if err != nil {
				return journalErr(err)
			}
			defer j.Close()
			opts.Journal, opts.Observer = j, o.observer()
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
			defer o.lingerThenClose(c)
			j, err := openExisting(c, append([]journal.Option{journal.WithLogger(opts.Logger)}, o.journalOptions()...)...)
			if err != nil {
				return err
			}
			defer j.Close()
			opts.Observer = o.observer()
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
			if err := runErr(err); err != nil {
				return err
			}
			return report(c, opts, res, nil)
		},
	}
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
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[i] = n.ID
	}
	for _, id := range c.StringSlice("refresh") {
		if g.Node(id) == nil {
			return nil, usageErr(fmt.Errorf("--refresh %s: graph %s has no node %q%s", id, g.Path, id, didYouMean(id, ids)))
		}
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

// execFlags are the flags of the commands that execute nodes (run, resume).
func execFlags(profileUsage string) []cli.Flag {
	return []cli.Flag{
		dbFlag,
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
	opts.Logger, opts.OnProgress = log, progressLogger(log)
	return opts, func() {}, nil
}

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
		Flags:     []cli.Flag{dbFlag},
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
	case err == nil, errors.Is(err, runner.ErrInterrupted): // the result says it: report maps it
		return nil
	case errors.As(err, &locked):
		return usageErr(fmt.Errorf("%w; one runner per run: wait for it, or stop it first", err))
	case errors.As(err, &unknown):
		return usageErr(err)
	case errors.As(err, new(*runner.MissingEnvError)):
		return usageErr(err)
	}
	return &exitError{exitFailed, err}
}

// report prints a run's result and maps it to an exit code.
func report(c *cli.Context, opts runner.Options, res *runner.Result, err error) error {
	if res != nil && errors.Is(err, runner.ErrInterrupted) {
		err = nil // res.Status is interrupted: exit code and hint below
	}
	if err != nil && res != nil && errors.Is(err, diagnostics.ErrJournal) {
		// Nothing more was sent once the journal could not record it; what
		// it holds is intact and resumable.
		return &exitError{exitInterrupted, fmt.Errorf("%w\nthe run is interrupted: free space on the disk that holds %s (or fix the file), then continue it: %s",
			err, c.String("db"), resumeLine(c, res.RunID))}
	}
	if err != nil && res == nil && c.Context.Err() != nil {
		// interrupted before the run began (reading a file input): nothing ran
		return &exitError{exitInterrupted, fmt.Errorf("%w; the run did not start", err)}
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	// The run-level lines of noderun diagnose, a verdict per node, and what
	// an unfinished node streamed; none for a run on Temporal, whose
	// journals are the workers'.
	var run *ledger.Run
	var d *ledger.Account
	if opts.Journal != nil {
		if run, err = ledger.Load(bg(c.Context), opts.Journal, res.RunID, ledger.LoadOptions{NoPartial: true}); err == nil {
			d = ledger.AccountOf(run, nil)
		}
	}
	if c.Bool("json") {
		err = printResultJSON(c.App.Writer, res, d)
	} else {
		err = nil
		printResult(c.App.Writer, outWidth(c.App.Writer), res, run, d, closingHint(c, res))
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
	return &exitError{exitFailed, errors.New("")} // the table said how the run ended
}

// interrupted tells the operator what an interruption left running at the
// provider and the exact commands to resume or cancel it. After Ctrl-C it
// waits a moment for a second one, which cancels that work now.
func interrupted(c *cli.Context, opts runner.Options, res *runner.Result) error {
	w := c.App.ErrWriter
	db := dbArg(c)
	var running []string
	for _, n := range res.Nodes {
		if n.Running != "" {
			running = append(running, n.ID)
		}
	}
	resumeCmd := resumeLine(c, res.RunID)
	if len(running) == 0 {
		return &exitError{exitInterrupted, fmt.Errorf("run %s interrupted; continue it with:\n  %s", res.RunID, resumeCmd)}
	}
	// Commands on lines of their own: they are copied, and must not wrap.
	width := outWidth(w)
	fmt.Fprintln(w, foldLine(fmt.Sprintf("noderun: run %s interrupted; still running at the provider (and billing) until they finish:", res.RunID), width))
	for _, n := range res.Nodes {
		if n.Running != "" {
			fmt.Fprintf(w, "  %-*s response %s\n", keyWidth, n.ID, n.Running)
		}
	}
	fmt.Fprintf(w, "continue them (re-attaches, regenerates nothing):\n  %s\n", resumeCmd)
	fmt.Fprintf(w, "or stop them at the provider:\n  noderun cancel %s%s\n", res.RunID, db)
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

// progressLogger puts the node states that no diagnostic reports (a node
// starts streaming, a node is done) into the log stream, so that a pipe gets
// one stream, each event once: a recovery step, a failure or a skip is
// already a diagnostic line.
func progressLogger(log *slog.Logger) func(runner.Progress) {
	return func(p runner.Progress) {
		switch p.State {
		case runner.ProgressStreaming, runner.ProgressDone:
			log.Info(p.Text, slog.String("node", p.Node), slog.Int("attempt", p.Attempt))
		case runner.ProgressWaiting:
			if p.Step.Code.ID == "" { // a park says itself (NR602)
				log.Info(p.Text, slog.String("node", p.Node), slog.Int("attempt", p.Attempt))
			}
		}
	}
}

// printResult prints the run's table, a verdict per node and the run's
// totals. Notes are whole on a pipe or in a file; on a terminal (width > 0)
// each fits its line, keeping the cause (fitText).
func printResult(w io.Writer, width int, res *runner.Result, run *ledger.Run, d *ledger.Account, hint string) {
	verdicts := map[string]string{}
	if d != nil {
		for _, n := range d.Nodes {
			verdicts[n.ID] = n.Verdict
		}
	}
	partial := map[string]int{}
	if run != nil {
		for _, n := range run.Nodes {
			partial[n.ID] = n.PartialBytes
		}
	}
	fmt.Fprintf(w, "run %s %s\n", res.RunID, res.Status)
	rows := [][]string{{"NODE", "STATE", "BYTES", "NOTE"}}
	for _, n := range res.Nodes {
		note := n.Reason
		if note == "" || note == "interrupted" {
			note = verdicts[n.ID]
		}
		bytes := len(n.Output)
		if n.State != journal.NodeCompleted {
			bytes = partial[n.ID] // what the journal holds: resume goes on from it
		}
		rows = append(rows, []string{n.ID, nodeStateText(n.State, n.Running), strconv.Itoa(bytes), strings.Join(strings.Fields(note), " ")})
	}
	writeTable(w, width, rows)
	if d != nil {
		for _, l := range d.Summary {
			fmt.Fprintln(w, foldLine(l, width))
		}
	}
	fmt.Fprintln(w, foldLine(hint, width))
}

// foldLine fits a line of text to width (0: no limit), folding at spaces
// with continuation lines indented.
func foldLine(s string, width int) string {
	if width <= 0 {
		return s
	}
	return fold("", s, width, 2)
}

// nodeStateText is a node's state as the table shows it: an interrupted node
// is resumable, and one whose response goes on at the provider (detached:
// its id) says so.
func nodeStateText(state journal.NodeState, detached string) string {
	switch {
	case state != journal.NodeCanceled:
		return string(state)
	case detached != "":
		return "interrupted (detached)"
	}
	return "interrupted"
}

// writeTable writes rows as aligned columns; the last column of each row is
// folded to width (0: no limit) under itself, so nothing is cut.
func writeTable(w io.Writer, width int, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	cols := len(rows[0])
	widths := make([]int, cols)
	for _, r := range rows {
		for i, cell := range r[:cols-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	lead := 0
	for _, x := range widths[:cols-1] {
		lead += x + 2
	}
	for _, r := range rows {
		var b strings.Builder
		for i, cell := range r[:cols-1] {
			fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
		}
		line := b.String() + r[cols-1]
		if width > 0 {
			line = fold(b.String(), r[cols-1], width, lead)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
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
	db := dbArg(c)
	short := runID
	if len(short) > 8 {
		short = short[:8] // a unique prefix is enough, and easier to type
	}
	return fmt.Sprintf("output: %s show %s %s%s   (what recovery did: %s diagnose %s%s)", bin, short, node, db, bin, short, db)
}

func printResultJSON(w io.Writer, res *runner.Result, d *ledger.Account) error {
	type node struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Output string `json:"output,omitempty"`
		Reason string `json:"reason,omitempty"`
		// CachedFrom is "run/node" whose output a cache hit reused.
		CachedFrom string `json:"cached_from,omitempty"`
		// Provider is the fallback that completed the node (NR603).
		Provider string `json:"provider,omitempty"`
	}
	out := struct {
		RunID   string   `json:"run_id"`
		Status  string   `json:"status"`
		Nodes   []node   `json:"nodes"`
		Summary []string `json:"summary"`
	}{RunID: res.RunID, Status: string(res.Status), Nodes: []node{}, Summary: []string{}}
	for _, n := range res.Nodes {
		out.Nodes = append(out.Nodes, node{n.ID, string(n.State), n.Output, n.Reason, n.FromCache, n.Provider})
	}
	if d != nil {
		out.Summary = d.Summary
	}
	return writeJSON(w, out)
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
