package view

import (
	"context"
	"fmt"
	"strings"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// Result is what a run did, as `noderun run` and `resume` print it: the
// JSON document, and the figures of their table that the document leaves
// out.
type Result struct {
	RunID  string       `json:"run_id"`
	Status string       `json:"status"`
	Nodes  []ResultNode `json:"nodes"`
	// Summary is the run's account in a few lines (ledger.Account.Summary);
	// empty without one.
	Summary []string `json:"summary"`
}

// ResultNode is one node of a Result.
type ResultNode struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Output string `json:"output,omitempty"`
	Reason string `json:"reason,omitempty"`
	// CachedFrom is "run/node" whose output a cache hit reused.
	CachedFrom string `json:"cached_from,omitempty"`
	// Provider is the fallback that completed the node (NR603).
	Provider string `json:"provider,omitempty"`

	// StateText is the state as a table shows it (StateText).
	StateText string `json:"-"`
	// Bytes is the output's size; for a node that did not complete, what
	// its journal holds of it (what a resume goes on from).
	Bytes int `json:"-"`
	// Note says on one line why the node ended so: its reason, else (and
	// for a plain interruption) its verdict.
	Note string `json:"-"`
}

// ResultOf is res with run's account: acct's verdicts and summary, and
// what run's unfinished nodes hold. run and acct may be nil (a run on
// Temporal, whose journals are the workers'): the nodes then have no
// verdict and an unfinished one no bytes.
func ResultOf(res *runner.Result, run *ledger.Run, acct *ledger.Account) Result {
	verdicts := map[string]string{}
	if acct != nil {
		for _, n := range acct.Nodes {
			verdicts[n.ID] = n.Verdict.Text
		}
	}
	partial := map[string]int{}
	if run != nil {
		for _, n := range run.Nodes {
			partial[n.ID] = n.PartialBytes
		}
	}
	out := Result{RunID: res.RunID, Status: string(res.Status), Nodes: []ResultNode{}, Summary: []string{}}
	for _, n := range res.Nodes {
		note := n.Reason
		if note == "" || note == "interrupted" {
			note = verdicts[n.ID]
		}
		if n.FromJournal != "" { // --cache-from: which journal
			note += " (found in " + n.FromJournal + ")"
		}
		bytes := len(n.Output)
		if n.State != journal.NodeCompleted {
			bytes = partial[n.ID]
		}
		out.Nodes = append(out.Nodes, ResultNode{ID: n.ID, State: string(n.State), Output: n.Output, Reason: n.Reason, CachedFrom: n.FromCache,
			Provider: n.Provider, StateText: StateText(n.State, n.Running), Bytes: bytes, Note: strings.Join(strings.Fields(note), " ")})
	}
	if acct != nil {
		out.Summary = acct.Summary
	}
	return out
}

// ResultFrom is ResultOf with the run's account, unpriced, and without the
// text of unfinished nodes (only their size): of the run res.Ledger holds
// (read at the run's end), else read from j. Without either (j nil), or
// when the run cannot be read, the result has no account: a run's result
// is said whatever its account.
func ResultFrom(ctx context.Context, j *journal.Journal, res *runner.Result) Result {
	run := res.Ledger
	if run == nil && j != nil {
		var err error
		if run, err = ledger.Load(ctx, j, res.RunID, ledger.LoadOptions{NoPartial: true, NoOutput: true}); err != nil {
			run = nil
		}
	}
	if run == nil {
		return ResultOf(res, nil, nil)
	}
	return ResultOf(res, run, ledger.AccountOf(run, nil))
}

// StateText is a node's state as a table shows it: an interrupted
// (canceled) node is resumable, and one whose response goes on at the
// provider (detached: its id) says so.
func StateText(state journal.NodeState, detached string) string {
	switch {
	case state != journal.NodeCanceled:
		return string(state)
	case detached != "":
		return "interrupted (detached)"
	}
	return "interrupted"
}

// StateText is the node's state as a table shows it (StateText).
func (n Node) StateText() string {
	if n.State == string(journal.NodeCanceled) {
		return StateText(journal.NodeCanceled, n.Detached)
	}
	return n.State
}

// Note says on one line why the node stands so: where a cache hit's output
// came from, else its error with its class, else its reason.
func (n Node) Note() string {
	note := n.Reason
	if n.Error != "" {
		note = n.Error
		if !strings.Contains(n.Error, n.ErrorClass) { // a node's error names its class: said once
			note = n.ErrorClass + ": " + n.Error
		}
	}
	if o := n.Cache; o != nil {
		note = fmt.Sprintf("from the cache: node %s of run %s", o.Node, ledger.ShortRunID(o.Run))
		if o.Journal != "" { // --cache-from: which journal
			note += " in " + o.Journal
		}
	}
	return strings.Join(strings.Fields(note), " ")
}
