package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/humanlog"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/view"
)

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
	if errors.Is(err, runner.ErrNotSimulated) {
		err = fmt.Errorf("%w; run this graph without --sim", err)
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	// The run-level lines of noderun diagnose, a verdict per node, and what
	// an unfinished node streamed; none for a run on Temporal, whose
	// journals are the workers'.
	doc := view.ResultFrom(bg(c.Context), opts.Journal, res)
	if c.Bool("json") {
		if err := writeJSON(c.App.Writer, doc); err != nil {
			return &exitError{exitFailed, err}
		}
	} else if ids := c.StringSlice("print"); len(ids) > 0 { // stdout is the outputs': the table goes to stderr
		view.WriteResult(c.App.ErrWriter, outWidth(c.App.ErrWriter), doc, closingHint(c, res))
		if err := view.WriteOutputs(c.App.Writer, res, ids); err != nil {
			return &exitError{exitFailed, err}
		}
	} else {
		view.WriteResult(c.App.Writer, outWidth(c.App.Writer), doc, closingHint(c, res))
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
	fmt.Fprintln(w, textfit.Line(fmt.Sprintf("noderun: run %s interrupted; still running at the provider (and billing) until they finish:", res.RunID), width))
	for _, n := range res.Nodes {
		if n.Running != "" {
			fmt.Fprintf(w, "  %-*s response %s\n", humanlog.KeyWidth, n.ID, n.Running)
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
