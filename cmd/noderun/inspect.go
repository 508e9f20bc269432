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
)

// openExisting opens a journal for reading; it refuses to create one.
func openExisting(c *cli.Context, opts ...journal.Option) (*journal.Journal, error) {
	path := c.String("db")
	if !fileExists(path) {
		return nil, usageErr(fmt.Errorf("no journal at %s (use --db)", path))
	}
	return journal.Open(c.Context, path, opts...)
}

// findRun resolves "last", a full run id, or a unique prefix of one.
func findRun(ctx context.Context, j *journal.Journal, arg string) (journal.Run, error) {
	runs, err := j.Runs(ctx, 0)
	if err != nil {
		return journal.Run{}, err
	}
	if len(runs) == 0 {
		return journal.Run{}, usageErr(errors.New("the journal has no runs"))
	}
	if arg == "last" || arg == "" {
		return runs[0], nil
	}
	var match []journal.Run
	for _, r := range runs {
		if r.ID == arg {
			return r, nil
		}
		if strings.HasPrefix(r.ID, arg) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 0:
		return journal.Run{}, usageErr(fmt.Errorf("no run %q in %s", arg, j.Path()))
	case 1:
		return match[0], nil
	}
	return journal.Run{}, usageErr(fmt.Errorf("run prefix %q is ambiguous (%d runs)", arg, len(match)))
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "list runs, or show one run's nodes",
		ArgsUsage: "[RUN|last]",
		Flags:     append([]cli.Flag{dbFlag}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.String("temporal") != "" {
				return statusTemporal(c)
			}
			j, err := openExisting(c)
			if err != nil {
				return err
			}
			defer j.Close()
			w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			defer w.Flush()
			if c.NArg() == 0 {
				runs, err := j.Runs(c.Context, 50)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, "RUN\tGRAPH\tSTATUS\tSTARTED\tPROFILE")
				for _, r := range runs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Graph, r.Status, r.Started.Format(time.DateTime), r.Profile)
				}
				return nil
			}
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			nodes, err := j.Nodes(c.Context, r.ID)
			if err != nil {
				return err
			}
			status := r.Status
			if j.Abandoned(r) {
				status = "interrupted (its runner is gone; noderun resume " + journal.RunStatus(r.ID) + ")"
			}
			fmt.Fprintf(w, "run %s (%s) %s, profile %s\n", r.ID, r.Graph, status, r.Profile)
			fmt.Fprintln(w, "NODE\tSTATE\tATTEMPTS\tBYTES\tNOTE")
			var notes []string
			for _, n := range nodes {
				note := n.Reason
				if n.Error != "" {
					note = n.ErrClass + ": " + n.Error
				}
				short := oneLine(note, 80)
				if short != oneLine(note, len(note)+1) {
					notes = append(notes, fmt.Sprintf("%s: %s", n.ID, oneLine(note, len(note)+1)))
					short = oneLine(note, 60) + " (below)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", n.ID, n.State, n.Attempts, len(n.Output), short)
			}
			w.Flush()
			for _, note := range notes {
				fmt.Fprintln(c.App.Writer, "\n"+note)
			}
			return nil
		},
	}
}

func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:      "events",
		Usage:     "print a run's journaled events (chunks, attempts, diagnostics)",
		ArgsUsage: "RUN|last",
		Flags: []cli.Flag{
			dbFlag,
			&cli.StringFlag{Name: "node", Usage: "only this node's events"},
			&cli.StringSliceFlag{Name: "kind", Usage: "only these kinds (delta, diagnostic, ref, raw, reasoning, reset, done)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the run ends"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"},
		},
		Action: func(c *cli.Context) error {
			j, err := openExisting(c)
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := findRun(c.Context, j, c.Args().First())
			if err != nil {
				return err
			}
			f := journal.EventFilter{Node: c.String("node"), Kinds: c.StringSlice("kind"), AfterSeq: -1}
			for {
				evs, err := j.Events(c.Context, r.ID, f)
				if err != nil {
					return err
				}
				for _, e := range evs {
					if err := printEvent(c.App.Writer, e, c.Bool("json")); err != nil {
						return err
					}
					f.AfterSeq = e.Seq
				}
				if !c.Bool("follow") {
					return nil
				}
				if len(evs) == 0 {
					cur, err := j.Run(c.Context, r.ID)
					if err != nil {
						return err
					}
					if cur.Status != journal.RunRunning {
						return nil
					}
					select {
					case <-c.Context.Done():
						return nil
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		},
	}
}

func printEvent(w io.Writer, e journal.Event, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{
			"seq": e.Seq, "time": e.Time.Format(time.RFC3339Nano), "node": e.NodeID, "attempt": e.Attempt,
			"kind": e.Kind, "code": e.Code, "provider_seq": e.ProviderSeq, "payload": string(e.Payload)})
	}
	where := e.NodeID
	if where == "" {
		where = "-"
	} else if e.Attempt > 0 {
		where = fmt.Sprintf("%s#%d", e.NodeID, e.Attempt)
	}
	what := e.Kind
	if e.Code != "" {
		what = e.Code
	}
	_, err := fmt.Fprintf(w, "%6d %s %-16s %-10s %s\n", e.Seq, e.Time.Format("15:04:05.000"), where, what, payloadText(e))
	return err
}

// payloadText renders a payload on one line: diagnostics as "name: message",
// chunks quoted so whitespace is visible.
func payloadText(e journal.Event) string {
	if e.Kind == "diagnostic" {
		var d struct {
			Name    string         `json:"name"`
			Message string         `json:"message"`
			Attrs   map[string]any `json:"attrs"`
		}
		if json.Unmarshal(e.Payload, &d) == nil {
			s := d.Name + ": " + d.Message
			for _, k := range sortedKeys(d.Attrs) {
				s += fmt.Sprintf(" %s=%v", k, d.Attrs[k])
			}
			return oneLine(s, 240)
		}
	}
	if e.Kind == "delta" || e.Kind == "reasoning" {
		return fmt.Sprintf("%q", string(e.Payload))
	}
	return oneLine(string(e.Payload), 240)
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a node's output (or, for an unfinished node, what its journal holds) and its attempts",
		ArgsUsage: "RUN|last NODE",
		Flags:     append([]cli.Flag{dbFlag, &cli.BoolFlag{Name: "attempts", Usage: "list the node's attempts instead"}}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.String("temporal") != "" {
				return showTemporal(c)
			}
			if c.NArg() != 2 {
				return usageErr(errors.New("show: give RUN and NODE"))
			}
			j, err := openExisting(c)
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := findRun(c.Context, j, c.Args().Get(0))
			if err != nil {
				return err
			}
			id := c.Args().Get(1)
			n, err := j.Node(c.Context, r.ID, id)
			if err != nil {
				return usageErr(fmt.Errorf("run %s: %w", r.ID, err))
			}
			atts, err := j.Attempts(c.Context, r.ID, id)
			if err != nil {
				return err
			}
			if c.Bool("attempts") {
				w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "ATTEMPT\tMODE\tPROVIDER\tREF\tCURSOR\tOUTCOME\tCLASS\tERROR")
				for _, a := range atts {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.N, a.Mode, a.Provider, a.Ref, a.Cursor, a.Outcome, a.ErrClass, oneLine(a.Error, 80))
				}
				return w.Flush()
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
