package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/cliword"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/view"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "list runs, or show one run's nodes",
		ArgsUsage: "[RUN|last]",
		Description: "Examples:\n  noderun status                 # the newest 50 runs\n" +
			"  noderun status --status failed --graph deploy --since 7d --limit 10   # the runs list, filtered\n" +
			"  noderun status last --json     # the newest run's nodes, as JSON (docs/json.md)\n" +
			"  noderun status RUN --temporal 127.0.0.1:7233   # a run on Temporal (docs/temporal.md)",
		Flags: append(append([]cli.Flag{dbFlag(), jsonFlag()}, runQueryFlags()...), temporalFlags()...),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 1, "give at most one run id (or last)"); err != nil {
				return err
			}
			q, err := runQueryOf(c) // checked before anything is opened
			if err != nil {
				return err
			}
			if c.String("temporal") != "" {
				return statusTemporal(c)
			}
			j, err := openForReading(c)
			if err != nil {
				return err
			}
			defer j.Close()
			if c.NArg() == 0 {
				if c.Bool("json") {
					out, err := view.ListRunsOf(c.Context, j, q)
					if err != nil {
						return err
					}
					return writeJSON(c.App.Writer, out)
				}
				runs, err := j.FindRuns(c.Context, q)
				if err != nil {
					return err
				}
				return view.WriteRuns(c.App.Writer, j, runs)
			}
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			st, err := view.StatusOf(c.Context, j, r)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, st)
			}
			status := r.Status
			if j.Abandoned(r) {
				status = journal.RunStatus("interrupted (its runner is gone; " + resumeLine(c, r.ID) + ")")
			}
			fmt.Fprintf(c.App.Writer, "run %s (%s) %s, profile %s\n", r.ID, r.Graph, status, r.Profile)
			return view.WriteNodes(c.App.Writer, outWidth(c.App.Writer), st)
		},
	}
}

func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:      "events",
		Usage:     "print a run's journaled events (chunks, attempts, diagnostics)",
		ArgsUsage: "RUN|last",
		Description: "Event kinds (--kind): " + strings.Join(view.EventKinds, ", ") + ".\n\nExamples:\n  noderun events last --kind diagnostic        # every recovery step, with its code\n" +
			"  noderun events last --node report --follow   # one node, while the run goes\n" +
			"  noderun events last --json                   # one JSON object per line (docs/json.md)",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "node", Usage: "only `NODE`'s events"},
			&cli.StringSliceFlag{Name: "kind", Usage: "only events of this `KIND` (repeatable; the kinds are above)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the run ends"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 1, "give one run id (or last)"); err != nil {
				return err
			}
			for _, k := range c.StringSlice("kind") {
				if err := oneOf("kind", k, view.EventKinds...); err != nil {
					return err
				}
			}
			j, r, err := openRun(c, c.Args().First())
			if err != nil {
				return err
			}
			defer j.Close()
			if node := c.String("node"); node != "" {
				if err := knownNode(c, j, r.ID, "--node", node); err != nil {
					return err
				}
			}
			f := journal.EventFilter{Node: c.String("node"), Kinds: c.StringSlice("kind"), AfterSeq: -1}
			poll := time.Duration(0) // read once
			if c.Bool("follow") {
				poll = 200 * time.Millisecond
			}
			err = view.Tail(c.Context, j, r.ID, f, poll, func(e journal.Event) error { return printEvent(c.App.Writer, e, c.Bool("json")) })
			if ab, ok := errors.AsType[*view.AbandonedError](err); ok {
				// Nothing more will come: say so rather than wait forever.
				return &exitError{exitFailed, fmt.Errorf("%w; continue it with: %s", ab, resumeLine(c, ab.RunID))}
			}
			return err
		},
	}
}

// knownNode checks that a run has a node, else exit 2 naming the nodes it has.
func knownNode(c *cli.Context, j *journal.Journal, runID, flag, id string) error {
	_, err := view.FindNode(c.Context, j, runID, id)
	nf, ok := errors.AsType[*view.NodeNotFoundError](err)
	if !ok {
		return err
	}
	msg := fmt.Sprintf("%s %s: %v%s", flag, id, nf, cliword.DidYouMean(id, nf.Nodes))
	return usageErr(errors.New(strings.TrimPrefix(msg, " ")))
}

func printEvent(w io.Writer, e journal.Event, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(view.EventOf(e))
	}
	_, err := fmt.Fprintln(w, view.EventText(e))
	return err
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a node's output (an unfinished one's: what it has so far)",
		ArgsUsage: "RUN|last NODE",
		Description: "Prints a node's output or, for an unfinished node, what its journal holds; --attempts lists its\n" +
			"attempts instead: provider, response or thread id, cursor, outcome, tokens.\n\nExamples:\n  noderun show last report              # the node's output\n" +
			"  noderun show last report --attempts   # its attempts, with what each cost\n" +
			"  noderun show last report --thinking   # the thinking that went with the output (never in it)\n" +
			"  noderun show last report --json       # as JSON (docs/json.md)",
		Flags: append([]cli.Flag{dbFlag(), jsonFlag(), &cli.BoolFlag{Name: "attempts", Usage: "list the node's attempts instead"},
			&cli.BoolFlag{Name: "thinking", Usage: "print the node's thinking (reasoning) instead of its output"}}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, 2, "give RUN (or last) and NODE"); err != nil {
				return err
			}
			if c.String("temporal") != "" {
				return showTemporal(c)
			}
			j, r, err := openRun(c, c.Args().Get(0))
			if err != nil {
				return err
			}
			defer j.Close()
			id := c.Args().Get(1)
			if err := knownNode(c, j, r.ID, "", id); err != nil {
				return err
			}
			n, err := j.Node(c.Context, r.ID, id)
			if err != nil {
				return usageErr(fmt.Errorf("run %s: %w", r.ID, err))
			}
			atts, err := j.Attempts(c.Context, r.ID, id)
			if err != nil {
				return err
			}
			if c.Bool("thinking") && c.Bool("attempts") {
				return usageErr(errors.New("show: --thinking and --attempts each print something else; give one"))
			}
			if c.Bool("json") {
				return showJSON(c, j, r.ID, n, atts)
			}
			if c.Bool("thinking") {
				return showThinking(c, j, r.ID, n, atts)
			}
			if c.Bool("attempts") {
				usage, err := view.AttemptUsage(c.Context, j, r.ID, id)
				if err != nil {
					return err
				}
				return view.WriteAttempts(c.App.Writer, atts, usage)
			}
			if n.State == journal.NodeCompleted {
				_, err := io.WriteString(c.App.Writer, n.Output)
				return err
			}
			if len(atts) == 0 {
				return &exitError{exitFailed, fmt.Errorf("node %s is %s and has no attempts", id, n.State)}
			}
			last := atts[len(atts)-1]
			out, err := j.RebuildOutput(c.Context, r.ID, id, last.N)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "noderun: node %s is %s; printing the partial output of attempt %d from the journal\n", id, n.State, last.N)
			_, err = io.WriteString(c.App.Writer, out)
			return err
		},
	}
}

// showThinking prints the reasoning a node's last attempt streamed apart
// from its output: thinking blocks, thought summaries, reasoning summaries.
func showThinking(c *cli.Context, j *journal.Journal, runID string, n journal.Node, atts []journal.Attempt) error {
	if len(atts) == 0 {
		return &exitError{exitFailed, fmt.Errorf("node %s is %s and has no attempts", n.ID, n.State)}
	}
	last := atts[len(atts)-1]
	text, err := j.RebuildReasoning(c.Context, runID, n.ID, last.N)
	if err != nil {
		return err
	}
	if text == "" {
		fmt.Fprintf(c.App.ErrWriter, "noderun: node %s streamed no thinking (its provider sent none, or does not show it)\n", n.ID)
		return nil
	}
	_, err = io.WriteString(c.App.Writer, text)
	return err
}

// jsonFlag is --json, made afresh per command: urfave/cli writes to a flag as
// it parses, so a flag shared by two apps in one process (tests) would race.
func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON on stdout (schema: docs/json.md)"}
}

// showJSON prints a node, its output (or the partial output of its last
// attempt) or, with --attempts, its attempts with what each cost.
func showJSON(c *cli.Context, j *journal.Journal, runID string, n journal.Node, atts []journal.Attempt) error {
	if c.Bool("attempts") {
		out, err := view.AttemptsOf(c.Context, j, runID, n.ID)
		if err != nil {
			return err
		}
		return writeJSON(c.App.Writer, out)
	}
	out, err := view.OutputOf(c.Context, j, runID, n, atts)
	if err != nil {
		return err
	}
	return writeJSON(c.App.Writer, out)
}
