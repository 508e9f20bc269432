package temporal

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// WriteText writes the diagnosis for people, as `noderun diagnose` prints a
// local run's account (ledger.WriteText, by opts), then a table of the
// hand-overs: the lost worker and its last heartbeat, the worker that took
// the node over, when and how, and the node's tokens there. It returns the
// first error writing to w.
func (d *Diagnosis) WriteText(w io.Writer, opts ledger.TextOptions) error {
	if err := ledger.WriteText(w, d.Account, opts); err != nil {
		return err
	}
	if len(d.Handovers) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HAND-OVER\tLOST WORKER\tLAST HEARTBEAT\tTAKEN OVER BY\tRESUMED\tTOOK\tRECOVERY\tGENERATED\tREGENERATED\tPRESERVED")
	for _, ho := range d.Handovers {
		took := "-"
		if ho.HandoverMS != nil {
			took = ledger.Seconds(*ho.HandoverMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ho.Node, dash(ho.LostWorker), Clock(ho.LastHeartbeat), dash(ho.Worker), Clock(ho.Resumed),
			took, ho.Recovery, ledger.Thousands(ho.Tokens.Generated), ledger.Thousands(ho.Tokens.Regenerated), ledger.Thousands(ho.Tokens.Preserved))
	}
	return tw.Flush()
}

// NodeStanding is one node of a run on Temporal as it stands: what the
// workflow holds of it, with a running node's worker, activity attempt and
// resume cursor taken from its last heartbeat.
type NodeStanding struct {
	Node, State string
	// Bytes is what the node holds of its output: the whole output once it
	// completed, else what its last heartbeat's cursor held.
	Bytes int
	// Worker is the worker running the node, else the one that finished it
	// ("" for none).
	Worker  string
	Attempt int32 // the activity attempt (above 1: a worker was lost)
	Cursor  runner.NodeCursor
	// Note is the finishing worker's verdict on the node (its ledger's),
	// else the workflow's reason for its state.
	Note string
}

// Standing is how the nodes of st stand, given pending, the activities that
// run now (PendingNodes; none: the workflow's state alone): a running
// node's worker, attempt and cursor are its last heartbeat's, which are
// newer than the workflow's state.
func Standing(st RunResult, pending []PendingActivity) []NodeStanding {
	live := map[string]PendingActivity{}
	for _, p := range pending {
		live[p.Node] = p
	}
	out := make([]NodeStanding, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		s := NodeStanding{Node: n.Node, State: n.State, Worker: n.Worker, Attempt: n.TemporalAttempt, Cursor: n.Cursor,
			Note: n.Verdict}
		if p, ok := live[n.Node]; ok {
			s.Worker, s.Attempt, s.Cursor = p.Worker, p.Attempt, p.Beat.NodeCursor
		}
		s.Bytes = max(len(n.Output), s.Cursor.Bytes)
		if s.Note == "" {
			s.Note = n.Reason
		}
		out = append(out, s)
	}
	return out
}

// Has reports whether the run has node.
func (r RunResult) Has(node string) bool {
	for _, n := range r.Nodes {
		if n.Node == node {
			return true
		}
	}
	return false
}

// WriteReport writes the report page of the run d diagnoses, read from its
// history h (Diagnose returns both), as of now: the page of a journaled run
// (ledger.WriteReport) drawn from the workflow (LedgerRun), with d's
// account and its hand-overs in a section of their own. opts.Handovers is
// set from d.
func (d *Diagnosis) WriteReport(w io.Writer, h *History, opts ledger.ReportOptions, now time.Time) error {
	opts.Handovers = ReportHandovers(d.Handovers)
	return ledger.WriteReport(w, LedgerRun(h, InputOf(h), d, now), d.Account, opts)
}
