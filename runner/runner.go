// Package runner runs goal graphs (package graph): it schedules nodes
// in dependency order, and executes each node with the recovery loop that
// makes a dropped stream a recoverable event rather than a failed node.
//
// # Embedding
//
// A program runs a graph in four steps: get a *graph.Graph (graph.Load of a
// file, the language of docs/graph.md, or graph.Build of one made in code),
// open a journal (journal.Open), call Run, read the Result. Everything the
// run does is in the journal, and Resume continues a run that did not
// finish, with the inputs it started with.
//
// The Result has each node's state, output and error, its attempts
// (provider, mode, response id, outcome, error class, token usage) and its
// diagnostics, decoded (NodeResult.Attempts, NodeResult.Diagnostics); what
// recovery did and cost, in sum, is package runner/ledger: Result.Ledger is
// the run as ledger.Load read it at the end, and ledger.AccountOf accounts
// for it. A run that is interrupted (ctx canceled) returns its
// Result with an error matching ErrInterrupted and the context's cause;
// setup errors are sentinels (ErrNoJournal, ErrNoGraph, ErrUnbuiltGraph,
// ErrBuiltinKind, ErrNoProviderFunc, ErrNotSimulated; a graph's problems
// are graph.ErrUnknownKind and its friends, inside a *graph.Error). The examples show each, and examples/embed in the
// repository is a program that does them all.
//
// A program adds its own providers by kind name (Options.Kinds): anything
// that implements provider.Provider, and optionally provider.Resumer,
// provider.Checker, provider.Canceler and provider.Continuer, gets the same
// recovery loop as the built-in adapters, as long as it reports a stream that
// ended without terminal evidence as diagnostics.ErrDisconnected (see the
// example).
//
// Options.OnProgress receives what happens to each node as data (Progress):
// its state (ProgressState; Final says which states end it), the bytes,
// tokens and reasoning streamed with the time of the last data and of the
// last status poll that found the work alive, each recovery step as a
// RecoveryStep (its diagnostic code, delay and place in its budget), and
// each diagnostic with its code.
//
// Graph, Node, LoadGraph, ParseGraph and the other graph names here are
// aliases of package graph's, kept for existing callers.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/redact"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/resume"
	"github.com/noderun/noderun/runner/graph"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/quota"
)

// Options configure a run.
type Options struct {
	Journal *journal.Journal // required
	// Profiles defaults to the built-ins plus the graph's profiles file.
	Profiles profile.Set
	// Profile overrides the graph's default profile when set.
	Profile string
	// Parallel bounds how many nodes run at once (default 4).
	Parallel int
	// Logger receives every diagnostic (default: discard).
	Logger *slog.Logger
	// OnProgress, when set, is told what happens to each node, as data
	// (Progress): its state changes (ProgressState; a recovery step with
	// its code, delay and budget), its figures as they move (bytes, tokens,
	// reasoning, the time of the last data and of the last status poll that
	// found the work alive; at most every 100 ms a node), and each of its
	// diagnostics with its code. It is called from the nodes' goroutines,
	// one call at a time, in order for each node; it should return quickly:
	// the nodes wait for it.
	OnProgress func(Progress)
	// Inputs are the values given for the graph's inputs (name to value, as
	// on the command line); Run resolves them (graph.ResolveInputs) and
	// journals the result, which Resume reuses (Resume ignores this field).
	Inputs map[string]string
	// MaxInputBytes bounds what a run reads of a file input (0:
	// graph.DefaultMaxInputBytes); past it the run does not start.
	MaxInputBytes int64
	// Kinds registers provider kinds beyond the built-in ones: a graph's
	// provider whose kind is a key here is built by its function. This map
	// is the one registry: ParseGraphWith parses with it, Run and Resume
	// build with it, and a graph using a kind it lacks is an error matching
	// graph.ErrUnknownKind (graph.Build takes KindNames of it). Reading a
	// run (ledger.Load) needs no registration.
	Kinds map[string]ProviderFunc
	// JournalArg is how the commands a message suggests name the journal
	// (`--db ci.db`), so that what the run prints can be pasted as is;
	// empty when it is the CLI's default journal.
	JournalArg string
	// Getenv looks up API keys and base URLs (default os.Getenv).
	Getenv func(string) string
	// RunID names the run (default: a new UUID).
	RunID string
	// Sim, when set, runs every provider on a simulator (see SimOptions).
	Sim *SimOptions
	// Cache says how the run reuses outputs of earlier runs (CacheOptions).
	Cache CacheOptions
	// Quota says how the run paces its requests to its providers' rate
	// limits (QuotaOptions).
	Quota QuotaOptions
	// Observer, when set, watches the run for telemetry (Observer;
	// runner/telemetry builds one). Nil costs nothing.
	Observer Observer
}

// QuotaOptions configure pacing. A run paces the requests of every
// provider that speaks HTTP (not agent harnesses) to the rate limits its
// responses' headers announce and its graph declares (`limits:`): a node
// whose request the budget does not allow yet waits, in graph order, and
// a 429 parks it until the Retry-After without spending a retry.
type QuotaOptions struct {
	// Off turns pacing off: every node sends when it starts, and a 429
	// costs it a retry (`run --no-pacing`).
	Off bool
	// Pacers, when set, holds the pacers of the run's accounts, shared
	// with whatever else uses it (every node a Temporal worker runs); nil:
	// the run's own.
	Pacers *quota.Registry
}

// Result is what a run did.
type Result struct {
	RunID  string
	Status journal.RunStatus
	Nodes  []NodeResult // in graph order
	// Ledger is the run as its journal holds it at the end, read once
	// (ledger.Load, without the outputs, which Nodes hold, nor an
	// unfinished node's text, only its size): ledger.AccountOf(res.Ledger,
	// prices) accounts for it without reading the journal again. Nodes'
	// Attempts and Diagnostics are taken from it. Nil when the journal
	// could not be read back (the log says why): the run itself is
	// journaled and finished.
	Ledger *ledger.Run
}

// NodeResult is one node's outcome.
type NodeResult struct {
	ID     string
	State  journal.NodeState
	Output string
	Err    error  // set when failed
	Reason string // why skipped or failed
	// Running is the response an interruption left running at the provider
	// (re-attached by Resume, stopped by Cancel); empty otherwise.
	Running string
	// FromCache is "run/node", where a cache hit's output was produced;
	// empty when the node called its provider.
	FromCache string
	// FromJournal is the other journal (--cache-from) a cache hit's output
	// was found in; empty for the run's own.
	FromJournal string
	// Provider is the fallback provider that completed the node after its
	// own was unavailable (NR603); empty when its own provider did.
	Provider string
	// Attempts are the node's requests and re-attachments in order, over
	// every Run and Resume of the run, each with what it cost; nil for a
	// node that sent none (skipped, from the cache). Run and Resume fill
	// Attempts and Diagnostics in; RunNode (one node, for a worker) does
	// not.
	Attempts []AttemptResult
	// Diagnostics are the node's diagnostic records in order, decoded and
	// typed: every fault, recovery step and outcome, with its code
	// (Record.Code.Role says which; compare codes with ==, like
	// d.Record.Code == diagnostics.Recovered).
	Diagnostics []Diagnostic
}

// AttemptResult is one attempt of a node, as journaled: its provider, mode
// (journal.ModeStart, ModeRetry, ModeReattach, ...; a re-attach that picks a
// dropped stream up again stays in its attempt), Ref (response or thread
// id), Outcome, ErrClass and Error (the error without its class), and its
// Usage.
type AttemptResult struct {
	journal.Attempt
	// Usage is what the attempt cost in tokens (zero if it recorded none).
	Usage journal.Usage
}

// Diagnostic is one journaled diagnostic of a node: the record (its code,
// message and typed attributes, read with Record.Attr or a key's Of), the
// attempt it belongs to (0: none), and when it was journaled.
type Diagnostic struct {
	Record  diagnostics.Record
	Attempt int
	Time    time.Time
}

// Failed reports whether any node failed or was skipped.
func (r *Result) Failed() bool { return r.Status != journal.RunCompleted }

// runState is one run in progress.
type runState struct {
	id       string
	g        *Graph
	j        *journal.Journal
	log      *slog.Logger
	red      *redact.Redactor // masks secrets in all that is journaled or logged
	prof     profile.Profile
	provs    map[string]builtProvider
	breakers map[string]*breaker // per provider, shared by its nodes
	owner    journal.Owner       // this process, holding the run's lock
	entries  map[string]*entry   // where resumed nodes pick up (noderun resume)
	onProg   *progressSink       // nil without Options.OnProgress
	cache    *runCache
	flush    *flusher        // journals the nodes' pending rows of deltas (coalesce.go)
	pacers   *quota.Registry // nil when pacing is off
	// journalArg names the journal in the commands messages quote (Options.JournalArg).
	journalArg string
	graphText  []byte            // the graph as journaled: env values hidden (Graph.Journaled)
	inputs     map[string]string // resolved; templates read them
	parallel   int
	halt       context.CancelCauseFunc // stops the run (a journal that cannot record)
	beat       func(NodeCursor, bool)  // a supervisor's heartbeat (RunNode); nil for local runs
	obs        Observer                // Options.Observer; nil: nothing is gathered for it

	mu      sync.Mutex
	outputs map[string]string
	results map[string]*NodeResult
}

// Prepare checks everything a run needs before anything is written: the
// profile and the providers. Its error names the graph file and the field.
func Prepare(g *Graph, opts *Options) (profile.Profile, error) {
	if err := checkGraph(g); err != nil {
		return profile.Profile{}, err
	}
	set := opts.Profiles
	if set == nil {
		set = profile.Set(profile.Builtins())
		if g.ProfilesPath != "" {
			p := g.ProfilesPath
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(g.Path), p)
			}
			loaded, err := profile.Load(p)
			if _, ok := errors.AsType[*profile.FieldError](err); ok {
				return profile.Profile{}, err // each problem names the profiles file and its line
			} else if err != nil {
				return profile.Profile{}, fmt.Errorf("%s: %w", g.Path, err)
			}
			set = loaded
		}
		opts.Profiles = set
	}
	name := opts.Profile
	if name == "" {
		name = g.Profile
	}
	if name == "" {
		name = "default"
	}
	p, err := set.Get(name)
	if err != nil {
		return profile.Profile{}, fmt.Errorf("%s: %w", g.Path, err)
	}
	return p, nil
}

// Run executes g to the end (or until ctx is canceled) and journals
// everything. Node failures are in the Result (Result.Failed, each
// NodeResult's Err). The returned error is for the run itself: a setup
// error (ErrNoJournal, ErrBuiltinKind, a *GraphError, ...) with a nil
// Result, a journal error, or, with the Result, ErrInterrupted when the run
// was interrupted (canceled ctx: errors.Is(err, context.Canceled) too), which
// Resume continues.
func Run(ctx context.Context, g *Graph, opts Options) (*Result, error) {
	if err := checkGraph(g); err != nil {
		return nil, err
	}
	if opts.RunID == "" {
		opts.RunID = uuid.NewString()
	}
	inputs, err := g.ResolveInputsContext(ctx, opts.Inputs, opts.MaxInputBytes)
	if err != nil {
		return nil, err // a *GraphError naming the inputs block; nothing written
	}
	r, closeProvs, err := newRunState(ctx, g, &opts)
	if err != nil {
		return nil, err
	}
	defer closeProvs()
	r.inputs = inputs
	if err := r.j.CreateRun(bg(ctx), journal.Run{ID: r.id, Graph: g.Name, GraphPath: g.Path, GraphText: r.graphText,
		GraphHash: g.Hash, Profile: r.prof.Name, Status: journal.RunRunning, Started: time.Now(), Owner: r.owner,
		Inputs: inputs}); err != nil {
		return nil, err
	}
	defer r.j.ReleaseRun(bg(ctx), r.id, r.owner)
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		r.results[n.ID] = &NodeResult{ID: n.ID, State: journal.NodePending}
		ids[i] = n.ID
	}
	if err := r.j.SetNodesPending(bg(ctx), r.id, ids); err != nil {
		return nil, err
	}
	r.diag(ctx, "", 0, diagnostics.New(diagnostics.RunStarted, fmt.Sprintf("run %s started: graph %s, profile %s, %s", r.id, g.Name, r.prof.Name, textfit.Count(len(g.Nodes), "node")), diagnostics.KeyGraph.Attr(g.Name),
		diagnostics.KeyProfile.Attr(r.prof.Name), diagnostics.KeyNodes.Attr(len(g.Nodes))))
	return r.run(ctx)
}

// run schedules the nodes and records how the run ended. A node that finds
// the journal unable to record halts the run: nothing more is started, the
// running nodes stop as if interrupted, and the journal's error is returned.
func (r *runState) run(ctx context.Context) (res *Result, err error) {
	if r.obs != nil {
		var ended func(journal.RunStatus)
		ctx, ended = r.obs.RunStarted(ctx, r.id, r.g)
		defer func() {
			if res != nil {
				ended(res.Status)
			} else {
				ended(journal.RunInterrupted)
			}
		}()
	}
	ctx, halt := context.WithCancelCause(ctx)
	defer halt(nil)
	r.halt = halt
	r.schedule(ctx)
	res, err = r.finish(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, diagnostics.ErrJournal) {
		return res, cause
	}
	if err == nil && res.Status == journal.RunInterrupted {
		// The caller matches it (errors.Is) rather than reading Status;
		// with the context's cause, when that is what stopped it.
		if cause := context.Cause(ctx); cause != nil {
			return res, fmt.Errorf("%w: %w", ErrInterrupted, cause)
		}
		return res, ErrInterrupted
	}
	return res, err
}

// newRunState checks the options and builds the providers of a run.
func newRunState(ctx context.Context, g *Graph, opts *Options) (*runState, func(), error) {
	if opts.Journal == nil {
		return nil, nil, ErrNoJournal
	}
	if err := checkKinds(opts.Kinds); err != nil {
		return nil, nil, err
	}
	prof, err := Prepare(g, opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Every line logged and every text journaled passes the redactor: a
	// server that echoes the Authorization header must not get the key
	// written to stderr or the journal.
	red := redact.New(secrets(g, opts.Getenv)...)
	opts.Logger = slog.New(red.Handler(opts.Logger.Handler()))
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	cache, err := newRunCache(g, opts)
	if err != nil {
		return nil, nil, err
	}
	text, err := g.Journaled(graph.Options{Kinds: kindNames(opts.Kinds)})
	if err != nil {
		return nil, nil, err
	}
	provs, closeProvs, err := buildProviders(ctx, g, opts.Getenv, opts.Logger, opts.Sim, opts.Kinds)
	if err != nil {
		return nil, nil, err
	}
	r := &runState{graphText: text, id: opts.RunID, g: g, j: opts.Journal, log: opts.Logger.With("run", opts.RunID), red: red, prof: prof,
		provs: provs, onProg: newProgressSink(progressFunc(opts.RunID, opts.OnProgress, opts.Observer)), obs: opts.Observer, parallel: opts.Parallel, owner: journal.NewOwner(),
		outputs: map[string]string{}, results: map[string]*NodeResult{}, breakers: map[string]*breaker{},
		entries: map[string]*entry{}, journalArg: opts.JournalArg, cache: cache, flush: startFlusher(opts.Journal)}
	if !opts.Quota.Off {
		r.pacers = opts.Quota.Pacers
		if r.pacers == nil {
			r.pacers = quota.NewRegistry()
		}
	}
	for name := range provs {
		r.breakers[name] = newBreaker(prof.Breaker, prof.BreakerCooldown.D())
	}
	return r, func() { r.flush.close(); closeProvs() }, nil
}

// finish records how the run ended.
func (r *runState) finish(ctx context.Context) (*Result, error) {
	res := &Result{RunID: r.id, Status: journal.RunCompleted}
	for _, n := range r.g.Nodes {
		nr := r.results[n.ID]
		res.Nodes = append(res.Nodes, *nr)
		switch nr.State {
		case journal.NodeCompleted:
		case journal.NodePending, journal.NodeCanceled, journal.NodeRunning:
			if res.Status == journal.RunCompleted {
				res.Status = journal.RunInterrupted
			}
		default:
			if res.Status != journal.RunInterrupted {
				res.Status = journal.RunFailed
			}
		}
	}
	if ctx.Err() != nil {
		res.Status = journal.RunInterrupted
		r.diag(ctx, "", 0, diagnostics.New(diagnostics.RunInterrupted, "run interrupted")) // how to go on is the caller's to say, once (the CLI: the resume command)
	} else {
		r.diag(ctx, "", 0, diagnostics.New(diagnostics.RunFinished, fmt.Sprintf("run %s", res.Status), diagnostics.KeyRunStatus.Attr(string(res.Status))))
	}
	if err := r.j.SetRunStatus(bg(ctx), r.id, res.Status); err != nil {
		return res, err
	}
	if err := r.j.Flush(bg(ctx)); err != nil {
		return res, err
	}
	r.records(bg(ctx), res)
	return res, nil
}

// records reads the run back once, as its account reads it (ledger.Load),
// and fills in the nodes' attempts, usage and diagnostics from it: one
// query of each kind for the whole run, so that a wide run does not pay a
// query per node, and a caller that prints the account (the CLI's result)
// does not read it all again (issue 45: that second read was a fifth of a
// 1,000-node run's end). A read that fails leaves them out (and says so in
// the log): the run itself is journaled and finished.
func (r *runState) records(ctx context.Context, res *Result) {
	run, err := ledger.Load(ctx, r.j, r.id, ledger.LoadOptions{NoPartial: true, NoOutput: true, Graph: r.g})
	if err != nil {
		r.log.Warn("result: reading the attempts, usage and diagnostics", "error", err)
		return
	}
	res.Ledger = run
	at := make(map[string]int, len(res.Nodes))
	for i, n := range res.Nodes {
		at[n.ID] = i
	}
	for _, nd := range run.Nodes {
		i, ok := at[nd.ID]
		if !ok {
			continue
		}
		n := &res.Nodes[i]
		for _, a := range nd.Attempts {
			var u journal.Usage // what the attempt recorded: none is zero, not the ledger's estimate
			if a.UsageRecorded {
				u = a.Usage
			}
			n.Attempts = append(n.Attempts, AttemptResult{Attempt: a.Attempt, Usage: u})
		}
		for _, rec := range nd.Records {
			n.Diagnostics = append(n.Diagnostics, Diagnostic{Record: rec.Record, Attempt: rec.Attempt, Time: rec.Time})
		}
	}
}

// runNode executes one node whose needs have all completed.
func (r *runState) runNode(ctx context.Context, n *Node) *NodeResult {
	if r.obs != nil {
		defer r.settled(ctx, n.ID)
	}
	res := &NodeResult{ID: n.ID}
	bp := r.provs[n.Provider]
	system, prompt, err := r.render(n)
	if err != nil {
		class, code := diagnostics.ClassDeterministic, diagnostics.NodeFailed
		if errors.Is(err, graph.ErrTooLarge) {
			class, code = diagnostics.ClassLimit, diagnostics.LimitExceeded
			err = fmt.Errorf("%w: %w", err, diagnostics.ErrLimit)
		}
		res.State, res.Err, res.Reason = journal.NodeFailed, err, r.red.String(err.Error())
		r.diag(ctx, n.ID, 0, diagnostics.New(code, err.Error(), diagnostics.KeyClass.Attr(class)))
		_ = r.j.FailNode(bg(ctx), r.id, n.ID, class, res.Reason)
		return res
	}
	key := r.cacheKey(n, bp, system, prompt)
	if hit := r.fromCache(ctx, n, key); hit != nil {
		return hit
	}
	if hit := r.awaitInFlight(ctx, n, key); hit != nil {
		return hit
	}
	total := r.retryBudget(n)
	x := &nodeExec{run: r, node: n, side: resume.SideEffects(n.SideEffects), prof: r.prof,
		chunks: coalescer{j: r.j, f: r.flush}, total: total, retries: total, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		req: provider.Request{Node: n.ID, System: system, Prompt: prompt, Agent: n.Agent, ReasoningEffort: n.ReasoningEffort,
			MaxOutputTokens: n.MaxOutputTokens, Env: n.Env, Policy: r.prof},
		order: r.g.Position(n.ID), fallbacks: r.g.FallbacksOf(n)}
	x.use(n.Provider, n.Model)
	e := r.entries[n.ID]
	if e != nil && e.provider != "" { // it had moved to a fallback: it goes on there, with what is left of the list
		x.use(e.provider, n.Model)
		if i := slices.Index(x.fallbacks, e.provider); i >= 0 {
			x.fallbacks = x.fallbacks[i+1:]
		}
	}
	x.bound()
	ctx = provider.WithNode(ctx, n.ID) // adapters name the node on the wire (provider.NodeHeader)
	if e == nil || e.fresh {
		// Waiting for quota comes before the node starts: it is not the
		// node's time (its timeout), and the journal shows it pending.
		if err := x.admit(ctx); err != nil {
			return r.notStarted(ctx, n, err)
		}
	}
	defer x.releaseTicket(0) // a node that ends before its request is sent leaves the pacer nothing in flight
	if n.Timeout > 0 {
		// The node's wall time, recovery included: the executor reports
		// ErrNodeTimeout with its own code when this fires.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, n.Timeout, &nodeTimeout{n.Timeout})
		defer cancel()
	}
	// The key is recorded for every node, whatever its cache policy: a
	// later run decides by its own whether to reuse this output. A node
	// that goes on on a fallback (resumed there) has none: its answer may
	// be two providers' (failover sets the fallback's own key).
	if x.provNm != n.Provider {
		key = ""
	}
	_ = r.j.StartNode(bg(ctx), r.id, n.ID, key)
	out, err := x.execute(ctx, e)
	var ne *NodeError
	switch {
	case err == nil:
		res.State, res.Output = journal.NodeCompleted, out
		if x.provNm != n.Provider {
			res.Provider = x.provNm
		}
		if jerr := r.j.CompleteNode(bg(ctx), r.id, n.ID, out); jerr != nil {
			res.State, res.Err, res.Reason = journal.NodeFailed, jerr, "journal: "+jerr.Error()
		}
	case errors.As(err, &ne) && (ne.Class == diagnostics.ClassCanceled || ne.Class == diagnostics.ClassJournal):
		res.State, res.Err, res.Reason, res.Running = journal.NodeCanceled, err, "interrupted", ne.Running
		if ne.Class == diagnostics.ClassJournal {
			res.Reason = "interrupted: " + r.red.String(ne.Err.Error())
			r.halt(ne.Err)
		}
		_ = r.j.SetNodeState(bg(ctx), r.id, n.ID, journal.NodeCanceled, "interrupted")
	default:
		res.State, res.Err, res.Reason = journal.NodeFailed, err, r.red.String(err.Error())
		class := diagnostics.Classify(err).Class
		_ = r.j.FailNode(bg(ctx), r.id, n.ID, class, res.Reason)
	}
	return res
}

// notStarted ends a node that never sent its request: the run was
// interrupted while it waited for quota, or no quota can ever take it.
func (r *runState) notStarted(ctx context.Context, n *Node, err error) *NodeResult {
	res := &NodeResult{ID: n.ID, Err: err}
	if ctx.Err() != nil {
		res.State, res.Reason = journal.NodeCanceled, "interrupted"
		res.Err = fmt.Errorf("node %q: %w while waiting for quota: %w", n.ID, ErrInterrupted, err)
		_ = r.j.SetNodeState(bg(ctx), r.id, n.ID, journal.NodeCanceled, "interrupted while waiting for quota")
		return res
	}
	ce := diagnostics.Classify(err)
	res.State, res.Reason = journal.NodeFailed, r.red.String(err.Error())
	res.Err = &NodeError{Node: n.ID, Class: ce.Class, Code: diagnostics.DeterministicError, Reason: res.Reason, Tried: "0 attempts", Err: ce}
	r.diag(ctx, n.ID, 0, diagnostics.New(diagnostics.DeterministicError, res.Reason, diagnostics.KeyClass.Attr(ce.Class)))
	_ = r.j.FailNode(bg(ctx), r.id, n.ID, ce.Class, res.Reason)
	return res
}

// render fills the node's system and prompt templates with its needs'
// outputs ("" for one that failed under continue_on_failure) and the run's
// inputs.
func (r *runState) render(n *Node) (system, prompt string, err error) {
	r.mu.Lock()
	v := graph.Values{Outputs: make(map[string]string, len(n.Needs)), Failed: map[string]bool{}, Inputs: r.inputs}
	for _, id := range n.Needs {
		v.Outputs[id] = r.outputs[id]
		if res := r.results[id]; res != nil && res.State == journal.NodeFailed {
			v.Failed[id] = true
		}
	}
	r.mu.Unlock()
	return n.Render(v)
}

// diag journals a diagnostic record, logs it with its code, and reports it
// to Options.OnProgress when it is about a node.
// command is the noderun command line that does verb with args on this
// run's journal, for a message to quote.
func (r *runState) command(verb string, args ...string) string {
	line := strings.Join(append([]string{"noderun", verb}, args...), " ")
	if r.journalArg != "" {
		line += " " + r.journalArg
	}
	return line
}

func (r *runState) diag(ctx context.Context, node string, attempt int, d diagnostics.Record) {
	d = r.journalDiag(ctx, node, attempt, d)
	if node != "" {
		r.onProg.reportFor(node, attempt, Progress{State: ProgressDiagnostic, Text: d.Message, Code: d.Code})
	}
}

// journalDiag journals a diagnostic record and logs it with its code, and
// returns it as journaled. Secrets are masked in both; the journal's form is
// the record's own (Record.MarshalJSON), which every reader decodes with
// diagnostics.Decode.
func (r *runState) journalDiag(ctx context.Context, node string, attempt int, d diagnostics.Record) diagnostics.Record {
	d = d.Redact(r.red.String)
	_ = r.j.Append(journal.Event{RunID: r.id, NodeID: node, Attempt: attempt, Kind: journal.KindDiagnostic, Code: d.Code.ID,
		ProviderSeq: -1, Payload: jsonBytes(d)})
	attrs := make([]slog.Attr, 0, len(d.Attrs)+4)
	attrs = append(attrs, slog.String("code", d.Code.ID), slog.String("diag", d.Code.Name))
	if node != "" {
		attrs = append(attrs, slog.String("node", node), slog.Int("attempt", attempt))
	}
	r.log.LogAttrs(ctx, d.Code.Level, d.Message, append(attrs, d.Attrs...)...)
	return d
}

// progress reports a node's state that the scheduler decides (an outcome,
// a skip, a hold), with text for people.
func (r *runState) progress(node string, state ProgressState, text string) {
	r.onProg.reportFor(node, 0, Progress{State: state, Text: text})
}

func jsonBytes(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%q", fmt.Sprint(v)))
	}
	return b
}
