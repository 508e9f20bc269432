// Package view builds the documents that noderun's read commands print with
// --json (docs/json.md is their schema) from a journal: the runs list, a
// run's nodes, its events, a node's output and attempts. The CLI prints them
// and the HTTP server (package server) serves them, so a body of the API and
// a command's --json output cannot differ. It also builds what the commands
// that run and check graphs print (a run's Result, a graph file's
// GraphCheck, the recovery Profiles), the one-line text of an event
// (EventText), and follows a run's events as they are journaled (Tail).
//
// Documents are objects, never bare arrays; every one about a run carries
// run_id; payloads are objects, never JSON in a string; times are RFC 3339
// in UTC, absent when unknown.
package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// Time is an RFC 3339 UTC time for a document; nil (omitted) when zero.
func Time(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// Run is a run in the runs list (`status --json`) and the head of a run's
// status (`status RUN --json`).
type Run struct {
	RunID     string  `json:"run_id"`
	Graph     string  `json:"graph"`
	GraphPath string  `json:"graph_path"`
	Status    string  `json:"status"`
	Abandoned bool    `json:"abandoned"`
	Profile   string  `json:"profile"`
	Started   *string `json:"started,omitempty"`
	Finished  *string `json:"finished,omitempty"`
}

// RunOf is the document of a run as it stands now (journal.Standing): a run
// whose runner is gone is interrupted, and Abandoned says why.
func RunOf(j *journal.Journal, r journal.Run) Run {
	return Run{RunID: r.ID, Graph: r.Graph, GraphPath: r.GraphPath, Status: string(j.Standing(r)), Abandoned: j.Abandoned(r),
		Profile: r.Profile, Started: Time(r.Started), Finished: Time(r.Finished)}
}

// Runs is the runs list, newest first (`status --json`).
type Runs struct {
	Runs []Run `json:"runs"`
}

// ListRuns is the newest limit runs of j (0: all).
func ListRuns(ctx context.Context, j *journal.Journal, limit int) (Runs, error) {
	runs, err := j.Runs(ctx, limit)
	if err != nil {
		return Runs{}, err
	}
	out := Runs{Runs: make([]Run, 0, len(runs))}
	for _, r := range runs {
		out.Runs = append(out.Runs, RunOf(j, r))
	}
	return out, nil
}

// Node is one node of a run's status.
type Node struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	Attempts   int     `json:"attempts"`
	Bytes      int     `json:"bytes"`
	ErrorClass string  `json:"error_class,omitempty"`
	Error      string  `json:"error,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Started    *string `json:"started,omitempty"`
	Finished   *string `json:"finished,omitempty"`
	// CachedFrom is "run/node" whose output a cache hit reused.
	CachedFrom string `json:"cached_from,omitempty"`

	// Detached is the response an interrupted node left running at the
	// provider, for the table (the JSON has it in the node's records).
	Detached string `json:"-"`
	// Cache is where a cache hit's output came from, for the table.
	Cache *journal.CacheOrigin `json:"-"`
}

// Status is a run and its nodes (`status RUN --json`).
type Status struct {
	Run
	Nodes []Node `json:"nodes"`
}

// StatusOf reads a run's nodes. A running node's bytes are what its journal
// holds so far; an interrupted one is read whole (its records say whether
// its response was left running).
func StatusOf(ctx context.Context, j *journal.Journal, r journal.Run) (Status, error) {
	nodes, err := j.Nodes(ctx, r.ID)
	if err != nil {
		return Status{}, err
	}
	cached, err := j.CacheOrigins(ctx, r.ID)
	if err != nil {
		return Status{}, err
	}
	out := Status{Run: RunOf(j, r), Nodes: make([]Node, 0, len(nodes))}
	for _, n := range nodes {
		n.State = journal.NodeStanding(n.State, out.Abandoned)
		v := Node{ID: n.ID, State: string(n.State), Attempts: n.Attempts, Bytes: len(n.Output),
			ErrorClass: string(n.ErrClass), Error: n.Error, Reason: n.Reason, Started: Time(n.Started), Finished: Time(n.Finished)}
		switch {
		case n.State == journal.NodeCanceled:
			if nd, err := ledger.LoadNode(ctx, j, r.ID, n.ID); err == nil {
				v.Bytes, v.Detached = nd.PartialBytes, nd.Detached()
			}
		case n.State != journal.NodeCompleted && n.Attempts > 0:
			if o, err := j.RebuildOutput(ctx, r.ID, n.ID, n.Attempts); err == nil {
				v.Bytes = len(o)
			}
		}
		if o, ok := cached[n.ID]; ok {
			v.CachedFrom, v.Cache = o.Run+"/"+o.Node, &o
		}
		out.Nodes = append(out.Nodes, v)
	}
	return out, nil
}

// Event is one journaled event (`events --json`, a line each); Payload is
// always an object.
type Event struct {
	RunID       string         `json:"run_id"`
	Seq         int64          `json:"seq"`
	Time        string         `json:"time"`
	Node        string         `json:"node,omitempty"`
	Attempt     int            `json:"attempt"`
	Kind        string         `json:"kind"`
	Code        string         `json:"code,omitempty"`
	ProviderSeq int64          `json:"provider_seq"`
	Payload     map[string]any `json:"payload"`
}

// EventOf is the document of a journaled event: chunks as {"text"}, a ref as
// {"ref"}, a JSON payload as itself, anything else as {"text"}.
func EventOf(e journal.Event) Event {
	out := Event{RunID: e.RunID, Seq: e.Seq, Time: *Time(e.Time), Node: e.NodeID, Attempt: e.Attempt,
		Kind: e.Kind, Code: e.Code, ProviderSeq: e.ProviderSeq}
	var obj map[string]any
	switch e.Kind {
	case journal.KindDelta, journal.KindReasoning:
		obj = map[string]any{"text": string(e.Payload)}
	case "ref":
		obj = map[string]any{"ref": string(e.Payload)}
	default:
		if len(e.Payload) == 0 || json.Unmarshal(e.Payload, &obj) != nil || obj == nil {
			obj = map[string]any{}
			if len(e.Payload) > 0 {
				obj["text"] = string(e.Payload)
			}
		}
	}
	out.Payload = obj
	return out
}

// EventKinds are the kinds of event the journal holds (`events --kind`).
var EventKinds = []string{"delta", "reasoning", "diagnostic", "ref", "raw", "reset", "done", "usage", "mark"}

// Output is a node's output, or the partial output of its last attempt
// while it is unfinished (`show RUN NODE --json`).
type Output struct {
	RunID   string `json:"run_id"`
	Node    string `json:"node"`
	State   string `json:"state"`
	Partial bool   `json:"partial"`
	Attempt int    `json:"attempt"`
	Output  string `json:"output"`
	// Thinking is what went with the output, apart from it.
	Thinking string `json:"thinking,omitempty"`
}

// OutputOf reads a node's output (a completed node's) or the partial
// output of its last attempt, with the thinking that went with it.
func OutputOf(ctx context.Context, j *journal.Journal, runID string, n journal.Node, atts []journal.Attempt) (Output, error) {
	out := Output{RunID: runID, Node: n.ID, State: string(n.State), Attempt: n.Attempts, Output: n.Output}
	if len(atts) == 0 {
		return out, nil
	}
	last := atts[len(atts)-1]
	if n.State != journal.NodeCompleted {
		o, err := j.RebuildOutput(ctx, runID, n.ID, last.N)
		if err != nil {
			return Output{}, err
		}
		out.Partial, out.Output = true, o
	}
	th, err := j.RebuildReasoning(ctx, runID, n.ID, last.N)
	if err != nil {
		return Output{}, err
	}
	out.Thinking = th
	return out, nil
}

// Attempts are a node's attempts with what each cost (`show RUN NODE
// --attempts --json`).
type Attempts struct {
	RunID    string    `json:"run_id"`
	Node     string    `json:"node"`
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one attempt of a node.
type Attempt struct {
	N          int     `json:"n"`
	Mode       string  `json:"mode"`
	Provider   string  `json:"provider"`
	Ref        string  `json:"ref,omitempty"`
	Cursor     int64   `json:"cursor"`
	Outcome    string  `json:"outcome"`
	ErrorClass string  `json:"error_class,omitempty"`
	Error      string  `json:"error,omitempty"`
	Started    *string `json:"started,omitempty"`
	Ended      *string `json:"ended,omitempty"`
	Usage      *Usage  `json:"usage,omitempty"`
}

// Usage is what an attempt cost, as journaled.
type Usage struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
	// Input tokens a provider counts apart (Anthropic's prompt cache).
	CacheReadTokens  int  `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int  `json:"cache_write_tokens,omitempty"`
	Estimated        bool `json:"estimated"`
	PreservedTokens  int  `json:"preserved_tokens"`
}

// AttemptsOf reads a node's attempts and their journaled usage.
func AttemptsOf(ctx context.Context, j *journal.Journal, runID, node string) (Attempts, error) {
	atts, err := j.Attempts(ctx, runID, node)
	if err != nil {
		return Attempts{}, err
	}
	usage, err := AttemptUsage(ctx, j, runID, node)
	if err != nil {
		return Attempts{}, err
	}
	out := Attempts{RunID: runID, Node: node, Attempts: make([]Attempt, 0, len(atts))}
	for _, a := range atts {
		v := Attempt{N: a.N, Mode: string(a.Mode), Provider: a.Provider, Ref: a.Ref, Cursor: a.Cursor,
			Outcome: string(a.Outcome), ErrorClass: string(a.ErrClass), Error: a.Error, Started: Time(a.Started), Ended: Time(a.Ended)}
		if u, ok := usage[a.N]; ok {
			v.Usage = &Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens,
				CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, Estimated: u.Estimated, PreservedTokens: u.PreservedTokens}
		}
		out.Attempts = append(out.Attempts, v)
	}
	return out, nil
}

// AttemptUsage is the journaled usage of one node's attempts, by attempt.
func AttemptUsage(ctx context.Context, j *journal.Journal, runID, node string) (map[int]journal.Usage, error) {
	u, err := j.AttemptUsage(ctx, runID, node)
	if err != nil {
		return nil, err
	}
	return u[node], nil
}

// Diagnose is a run's account (`diagnose --json`), optionally of one node.
func Diagnose(ctx context.Context, j *journal.Journal, runID, node string, prices ledger.Prices) (*ledger.Account, error) {
	run, err := ledger.Load(ctx, j, runID, ledger.LoadOptions{})
	if err != nil {
		return nil, err
	}
	d := ledger.AccountOf(run, ledger.PricesFor(run, prices))
	if node != "" {
		for _, nd := range d.Nodes {
			if nd.ID == node {
				d.Nodes = []ledger.NodeAccount{nd}
			}
		}
	}
	return d, nil
}

// ErrNoRuns: the journal holds no run yet.
var ErrNoRuns = errors.New("the journal has no runs")

// RunNotFoundError: no run has that id or prefix.
type RunNotFoundError struct{ Arg, Journal string }

func (e *RunNotFoundError) Error() string { return fmt.Sprintf("no run %q in %s", e.Arg, e.Journal) }

// AmbiguousRunError: more than one run id starts with the prefix given.
type AmbiguousRunError struct {
	Arg  string
	Runs int
}

func (e *AmbiguousRunError) Error() string {
	return fmt.Sprintf("run prefix %q is ambiguous (%d runs)", e.Arg, e.Runs)
}

// FindRun resolves "last" (or ""), a full run id, or a unique prefix of one.
func FindRun(ctx context.Context, j *journal.Journal, arg string) (journal.Run, error) {
	if arg != "last" && arg != "" {
		// The common case, a whole id, is one indexed read.
		if r, err := j.Run(ctx, arg); err == nil {
			return r, nil
		} else if !errors.Is(err, journal.ErrNotFound) {
			return journal.Run{}, err
		}
	}
	runs, err := j.Runs(ctx, 0)
	if err != nil {
		return journal.Run{}, err
	}
	if len(runs) == 0 {
		return journal.Run{}, ErrNoRuns
	}
	if arg == "last" || arg == "" {
		return runs[0], nil
	}
	var match []journal.Run
	for _, r := range runs {
		if strings.HasPrefix(r.ID, arg) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 0:
		return journal.Run{}, &RunNotFoundError{Arg: arg, Journal: j.Path()}
	case 1:
		return match[0], nil
	}
	return journal.Run{}, &AmbiguousRunError{Arg: arg, Runs: len(match)}
}

// NodeNotFoundError: a run has no node of that id.
type NodeNotFoundError struct {
	Run, Node string
	Nodes     []string // the run's nodes, in order
}

func (e *NodeNotFoundError) Error() string {
	return fmt.Sprintf("run %s has no node %q (its nodes: %s)", e.Run, e.Node, strings.Join(e.Nodes, ", "))
}

// FindNode reads a run's node, or a *NodeNotFoundError naming its nodes.
func FindNode(ctx context.Context, j *journal.Journal, runID, id string) (journal.Node, error) {
	n, err := j.Node(ctx, runID, id)
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, journal.ErrNotFound) {
		return journal.Node{}, err
	}
	nodes, err := j.Nodes(ctx, runID)
	if err != nil {
		return journal.Node{}, err
	}
	nf := &NodeNotFoundError{Run: runID, Node: id}
	for _, n := range nodes {
		nf.Nodes = append(nf.Nodes, n.ID)
	}
	return journal.Node{}, nf
}
