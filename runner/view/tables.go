package view

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// The tables the read commands print without --json: the runs list, a
// run's nodes, a node's attempts; and what `run --print` writes.

// ListRunsOf is the runs q selects, newest first (`status --json` with
// --status, --graph, --since or --limit): each run's document is ListRuns'.
func ListRunsOf(ctx context.Context, j *journal.Journal, q journal.RunQuery) (Runs, error) {
	runs, err := j.FindRuns(ctx, q)
	if err != nil {
		return Runs{}, err
	}
	out := Runs{Runs: make([]Run, 0, len(runs))}
	for _, r := range runs {
		out.Runs = append(out.Runs, RunOf(j, r))
	}
	return out, nil
}

// WriteRuns writes the runs list as a table, each run's status as it
// stands (journal.Standing), its start in local time.
func WriteRuns(w io.Writer, j *journal.Journal, runs []journal.Run) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tGRAPH\tSTATUS\tSTARTED\tPROFILE")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Graph, j.Standing(r), r.Started.Format(time.DateTime), r.Profile)
	}
	return tw.Flush()
}

// PipeWidth is the columns a table fits on a pipe or in a file: CI logs
// are read in a browser, where 160 columns show without scrolling. --json
// has every text whole.
const PipeWidth = 160

// tableWidth is the columns a table on stdout fits: the terminal's
// (width), or PipeWidth on a pipe or in a file (width 0).
func tableWidth(width int) int {
	if width <= 0 {
		return PipeWidth
	}
	return width
}

// WriteNodes writes a run's nodes as a table. A note too long for its
// column is cut there, keeping its cause, and written whole below, folded
// to the terminal's width (or PipeWidth: width 0).
func WriteNodes(w io.Writer, width int, st Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tATTEMPTS\tBYTES\tNOTE")
	var notes []string
	for _, n := range st.Nodes {
		whole := n.Note()
		short := textfit.Text(whole, 80)
		if short != whole {
			notes = append(notes, fmt.Sprintf("%s: %s", n.ID, whole))
			short = textfit.Text(whole, 60) + " (below)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", n.ID, n.StateText(), n.Attempts, n.Bytes, short)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, note := range notes {
		if _, err := fmt.Fprintln(w, "\n"+textfit.Line(note, tableWidth(width))); err != nil {
			return err
		}
	}
	return nil
}

// WriteAttempts writes a node's attempts as a table, with the tokens each
// used (usage is AttemptUsage's; "(est.)" where they were estimated).
func WriteAttempts(w io.Writer, atts []journal.Attempt, usage map[int]journal.Usage) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tMODE\tPROVIDER\tREF\tCURSOR\tOUTCOME\tTOKENS (in/out)\tCLASS\tERROR")
	for _, a := range atts {
		tokens := "-"
		if u, ok := usage[a.N]; ok {
			tokens = fmt.Sprintf("%d/%d", u.InputTokens, u.OutputTokens)
			if u.Estimated {
				tokens += " (est.)"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.N, a.Mode, a.Provider, a.Ref, a.Cursor, a.Outcome, tokens, a.ErrClass, textfit.Text(a.Error, 80))
	}
	return tw.Flush()
}

// WriteOutputs writes the outputs of the nodes ids of a run's result, in
// that order, as they are (what `run --print` pipes on): one node's output
// byte for byte; between two, a newline where the first does not end in
// one. A node that did not complete writes what its result holds (nothing,
// for most).
func WriteOutputs(w io.Writer, res *runner.Result, ids []string) error {
	prev := ""
	for i, id := range ids {
		out := ""
		for _, n := range res.Nodes {
			if n.ID == id {
				out = n.Output
			}
		}
		if i > 0 && prev != "" && prev[len(prev)-1] != '\n' {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, out); err != nil {
			return err
		}
		prev = out
	}
	return nil
}

// WriteResult writes the run's table, a verdict per node and the run's
// totals, fitted to width, the terminal's (or PipeWidth on a pipe or in a
// file: width 0): each note is folded under itself (textfit.Table),
// nothing cut. The hint, which holds commands, is folded on a terminal
// only: a pipe's is copied whole.
func WriteResult(w io.Writer, width int, res Result, hint string) {
	fmt.Fprintf(w, "run %s %s\n", res.RunID, res.Status)
	rows := [][]string{{"NODE", "STATE", "BYTES", "NOTE"}}
	for _, n := range res.Nodes {
		rows = append(rows, []string{n.ID, n.StateText, strconv.Itoa(n.Bytes), n.Note})
	}
	textfit.Table(w, tableWidth(width), rows)
	for _, l := range res.Summary {
		fmt.Fprintln(w, textfit.Line(l, tableWidth(width)))
	}
	fmt.Fprintln(w, textfit.Line(hint, width))
}
