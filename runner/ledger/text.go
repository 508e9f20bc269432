package ledger

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/noderun/noderun/internal/textfit"
)

// TextOptions are how WriteText lays an account out.
type TextOptions struct {
	// Width is the columns a line of prose may take (0: no limit): each
	// verdict, summary line and warning is folded to it at spaces. The
	// table's rows are never folded.
	Width int
	// TableOnly writes the table of figures alone (and the warnings),
	// without the run's line, the verdicts and the summary: for a reader
	// that has said those already.
	TableOnly bool
}

// WriteText writes an account for people, as `noderun diagnose` prints it:
// the run, a table of each node's figures (attempts, recovery steps, time
// lost, quota wait, tokens, cost), a verdict per node with its steps, the
// summary, and the warnings. It returns the first error writing to w.
func WriteText(w io.Writer, acct *Account, opts TextOptions) error {
	ew := &errWriter{w: w}
	if !opts.TableOnly {
		fmt.Fprintf(ew, "run %s (%s) %s, profile %s\n", acct.RunID, acct.Graph, acct.Status, acct.Profile)
	}
	// QUOTA WAIT and COST are shown only when a row has one: a column of
	// zeros or dashes says nothing (a graph without limits waits for no
	// quota; without prices nothing is costed).
	waited, costed := false, false
	for _, n := range acct.Nodes {
		waited = waited || shows(n.QuotaWaitMS)
		costed = costed || n.CostUSD != nil
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tATTEMPTS\tSTEPS\tLOST"+when(waited, "\tQUOTA WAIT")+"\tGENERATED\tREGENERATED\tPRESERVED"+when(costed, "\tCOST"))
	for _, n := range acct.Nodes {
		cost := "\t-"
		if n.CostUSD != nil {
			cost = fmt.Sprintf("\t$%.4f", *n.CostUSD)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s%s\t%s\t%s\t%s%s\n", n.ID, n.State, n.Attempts, n.Steps(), Seconds(n.TimeLostMS), when(waited, "\t"+Seconds(n.QuotaWaitMS)),
			Thousands(n.Tokens.Generated), Thousands(n.Tokens.Regenerated), Thousands(n.Tokens.Preserved), when(costed, cost))
	}
	tw.Flush()
	if !opts.TableOnly {
		fmt.Fprintln(ew)
		for _, n := range acct.Nodes {
			fmt.Fprintln(ew, textfit.Line(n.ID+": "+n.Verdict.Text, opts.Width))
			if len(n.RecoverySteps) > 0 {
				var parts []string
				for _, k := range slices.Sorted(maps.Keys(n.RecoverySteps)) {
					parts = append(parts, fmt.Sprintf("%s×%d", k, n.RecoverySteps[k]))
				}
				fmt.Fprintf(ew, "  steps: %s\n", strings.Join(parts, ", "))
			}
		}
		fmt.Fprintln(ew)
		for _, l := range acct.Summary {
			fmt.Fprintln(ew, textfit.Line(l, opts.Width))
		}
	}
	for _, l := range acct.Warnings {
		fmt.Fprintln(ew, textfit.Line("warning: "+l, opts.Width))
	}
	return ew.err
}

// errWriter keeps the first error of a run of writes, which then write
// nothing: a renderer checks once, at its end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// when is s if ok, else "".
func when(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}
