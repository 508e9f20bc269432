package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
)

// ErrNodeTimeout is (wrapped in) the error of a node whose timeout passed.
var ErrNodeTimeout = errors.New("node timeout")

// ErrInterrupted is (wrapped in) the error Run and Resume return, together
// with the Result (Status journal.RunInterrupted), when the run stopped
// before every node ended because its context was canceled: errors.Is(err,
// context.Canceled) is then true too (or the cause given to
// context.WithCancelCause matches). Nothing is lost: Resume continues it.
// The nodes it stopped mid-way have State journal.NodeCanceled and an Err
// that matches ErrInterrupted too; those it had not started stay
// journal.NodePending.
//
//	res, err := runner.Run(ctx, g, opts)
//	switch {
//	case errors.Is(err, runner.ErrInterrupted): // res.Status == journal.RunInterrupted; Resume(ctx, res.RunID, nil, opts) later
//	case err != nil: // the run itself failed: configuration, journal
//	case res.Failed(): // a node failed: res.Nodes[i].Err
//	}
var ErrInterrupted = errors.New("run interrupted")

// Setup errors: Run, Resume, RunNode and Cancel return them (wrapped)
// before anything is journaled.
var (
	// ErrNoJournal: Options.Journal is nil.
	ErrNoJournal = errors.New("runner: no journal")
	// ErrBuiltinKind: Options.Kinds registers a kind name that a built-in
	// provider kind has (sim, openai, responses, harness, gemini, ...).
	ErrBuiltinKind = errors.New("a built-in provider kind")
	// ErrNoProviderFunc: Options.Kinds registers a kind with a nil
	// ProviderFunc.
	ErrNoProviderFunc = errors.New("no ProviderFunc")
	// ErrNoGraph: the graph is nil.
	ErrNoGraph = errors.New("runner: no graph")
	// ErrNotSimulated: Options.Sim points a graph at the simulator, and one
	// of its providers cannot be pointed there (a harness noderun does not
	// know how to aim at a base URL).
	ErrNotSimulated = errors.New("cannot be pointed at the simulator")
	// ErrUnbuiltGraph: the graph was filled in by hand and never checked:
	// load it (LoadGraph, ParseGraph) or build it (graph.Build) first.
	ErrUnbuiltGraph = errors.New("runner: the graph is not built (LoadGraph, ParseGraph or graph.Build make one)")
)

// checkGraph is the setup check of every entry point that takes a graph.
func checkGraph(g *Graph) error {
	switch {
	case g == nil:
		return ErrNoGraph
	case !g.Built():
		return fmt.Errorf("graph %q: %w", g.Name, ErrUnbuiltGraph)
	}
	return nil
}

// nodeTimeout is the cause of a node context that its timeout ended.
type nodeTimeout struct{ d time.Duration }

func (e *nodeTimeout) Error() string {
	return fmt.Sprintf("the node's timeout (%s) passed", profile.FormatDuration(e.d))
}
func (e *nodeTimeout) Is(target error) bool { return target == ErrNodeTimeout }

// NodeError is why a node failed: its class, the decision that ended it, and
// what was tried, in words an operator can act on.
type NodeError struct {
	Node   string
	Class  diagnostics.Class
	Code   diagnostics.Code
	Reason string
	Tried  string
	Err    error
	// Running names the response left running at the provider by an
	// interruption, which `noderun resume` re-attaches to.
	Running string
}

func (e *NodeError) Error() string {
	verb := "failed"
	if e.interrupted() {
		verb = "interrupted" // not a failure: Resume continues it
	}
	return fmt.Sprintf("node %q %s [%s %s]: %v; %s (tried: %s)", e.Node, verb, e.Code.ID, e.Code.Name, e.Err, e.Reason, e.Tried)
}

func (e *NodeError) Unwrap() error { return e.Err }

// Is makes the error of a node that an interruption stopped match
// ErrInterrupted.
func (e *NodeError) Is(target error) bool { return target == ErrInterrupted && e.interrupted() }

func (e *NodeError) interrupted() bool {
	return e.Class == diagnostics.ClassCanceled || e.Class == diagnostics.ClassJournal
}
