package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// DefaultTokens is the length of every simulated answer unless Options say
// otherwise: long enough for early, middle and late to be apart, short
// enough that a matrix of runs takes seconds.
const DefaultTokens = 32

// Options configure a chaos run.
type Options struct {
	Journal *journal.Journal // required: every run is journaled, inspectable after
	Cases   []Case           // nil = DefaultCases of the profile
	// Profile overrides the graph's; Profiles as in runner.Options.
	Profile  string
	Profiles profile.Set
	Seed     int64
	Tokens   int // default DefaultTokens
	Parallel int // default 4
	Logger   *slog.Logger
	Getenv   func(string) string
	// Progress, if set, is told each result as it is known.
	Progress func(Result)
}

// Result is one case against one node.
type Result struct {
	Case        string    `json:"case"`
	Description string    `json:"description"`
	Node        string    `json:"node"`
	Fault       sim.Fault `json:"fault"`
	Expect      Expect    `json:"expect"`
	Pass        bool      `json:"pass"`
	// State is the target node's final state.
	State string `json:"state"`
	// Outcome is how the target ended, as its journal tells; the case is
	// judged by it.
	Outcome Outcome `json:"outcome"`
	// Diagnostic is the code a reader of a failed case looks up first: the
	// record that says how the target ended, else its last fault or step.
	Diagnostic string `json:"diagnostic,omitempty"`
	// Verdict is the ledger's one line on the target: what happened, what it cost.
	Verdict string `json:"verdict"`
	// Codes are the target's diagnostic codes, in order, without repeats.
	Codes         []string `json:"codes"`
	RecoverySteps int      `json:"recovery_steps"`
	Retries       int      `json:"retries"`
	Reconnects    int      `json:"reconnects"`
	// Regenerated is how many output tokens the simulator generated for
	// the node beyond the reference run.
	Regenerated int64 `json:"tokens_regenerated"`
	// Failures say why the case did not hold (empty when it passed).
	Failures []string `json:"failures,omitempty"`
	RunID    string   `json:"run_id"`
	// Stats are the simulator's counters for the case's run alone (the
	// independent count its figures are checked against).
	Stats   sim.Stats     `json:"-"`
	Time    time.Duration `json:"-"`
	Seconds float64       `json:"seconds"`
}

// Report is a whole chaos run.
type Report struct {
	Graph    string    `json:"graph"`
	Profile  string    `json:"profile"`
	Seed     int64     `json:"seed"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Runs     int       `json:"runs"` // case-and-node runs
	Passed   int       `json:"passed"`
	Failed   int       `json:"failed"`
	Results  []Result  `json:"results"`
	RefRunID string    `json:"reference_run_id"`
	// Journal is the path of the journal that holds every run, for the
	// commands the report prints ("" when it is not kept).
	Journal string `json:"journal,omitempty"`
}

// OK reports whether every case held.
func (r *Report) OK() bool { return r.Failed == 0 }

// ErrReference is returned when the graph does not complete on the
// simulator even without faults: nothing can be compared to it.
var ErrReference = errors.New("the reference run (no faults) did not complete")

// Run runs the reference, then every case against every node it aims at.
func Run(ctx context.Context, g *runner.Graph, opts Options) (*Report, error) {
	if opts.Journal == nil {
		return nil, errors.New("chaos: no journal")
	}
	if opts.Tokens <= 0 {
		opts.Tokens = DefaultTokens
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ropts := runner.Options{Journal: opts.Journal, Profiles: opts.Profiles, Profile: opts.Profile,
		Parallel: opts.Parallel, Logger: opts.Logger, Getenv: opts.Getenv}
	prof, err := runner.Prepare(g, &ropts)
	if err != nil {
		return nil, err
	}
	cases := opts.Cases
	if cases == nil {
		cases = DefaultCases(prof)
	}
	for _, c := range cases {
		for _, id := range c.Nodes {
			if g.Node(id) == nil {
				return nil, fmt.Errorf("case %q: the graph %s has no node %q", c.Name, g.Path, id)
			}
		}
	}
	srv := sim.New(sim.Config{Seed: opts.Seed, Tokens: opts.Tokens, Logger: opts.Logger.With("sim", "chaos")})
	if err := srv.Start(""); err != nil {
		return nil, err
	}
	defer srv.Close()
	ropts.Sim = &runner.SimOptions{Server: srv}

	rep := &Report{Graph: g.Name, Profile: prof.Name, Seed: opts.Seed, Started: time.Now(), Journal: opts.Journal.Path()}
	if err := srv.Reset(); err != nil {
		return nil, err
	}
	ref, err := runner.Run(ctx, g, ropts)
	if err != nil {
		return nil, err
	}
	rep.RefRunID = ref.RunID
	var bad []string
	outputs := map[string]string{}
	for _, nr := range ref.Nodes {
		if nr.State != journal.NodeCompleted {
			bad = append(bad, fmt.Sprintf("node %q %s: %s", nr.ID, nr.State, nr.Reason))
		}
		outputs[nr.ID] = nr.Output
	}
	if len(bad) > 0 {
		return rep, fmt.Errorf("%w (run %s): %s", ErrReference, ref.RunID, strings.Join(bad, "; "))
	}
	x := &caseRun{g: g, prof: prof, srv: srv, ropts: ropts, ref: srv.Stats(), outputs: outputs}
	for _, c := range cases {
		for _, n := range g.Nodes {
			if len(c.Nodes) > 0 && !slices.Contains(c.Nodes, n.ID) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			r, err := x.run(ctx, c, n)
			if err != nil {
				return rep, err
			}
			rep.Results = append(rep.Results, r)
			if r.Pass {
				rep.Passed++
			} else {
				rep.Failed++
			}
			if opts.Progress != nil {
				opts.Progress(r)
			}
		}
	}
	rep.Runs = len(rep.Results)
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

// caseRun is what every case of one chaos run shares.
type caseRun struct {
	g       *runner.Graph
	prof    profile.Profile
	srv     *sim.Server
	ropts   runner.Options
	ref     sim.Stats // the reference run's counters
	outputs map[string]string
}

// streamEndpoint is the simulator endpoint that carries n's output stream.
func (x *caseRun) streamEndpoint(n *runner.Node) string {
	spec := x.g.Providers[n.Provider]
	switch {
	case spec.Kind == runner.ProviderKindOpenAI,
		spec.Kind == runner.ProviderKindSim && spec.API != runner.SimAPIResponses:
		return sim.EndpointChat
	case spec.Kind == runner.ProviderKindHarness:
		return runner.HarnessSimEndpoint(spec)
	}
	return sim.EndpointResponsesCreate
}

// resumable reports whether n's provider re-attaches (Responses) or
// continues (a chat server with a continuation form) without regenerating.
func (x *caseRun) resumable(n *runner.Node) bool {
	spec := x.g.Providers[n.Provider]
	if spec.Continuation != "" && spec.Continuation != "none" {
		return true
	}
	return spec.Kind == runner.ProviderKindResponses || spec.Kind == runner.ProviderKindSim && spec.API == runner.SimAPIResponses
}

// aim makes c's fault for target n, placing it in n's stream.
func (x *caseRun) aim(c Case, n *runner.Node) (sim.Fault, error) {
	f := c.Fault
	f.Node = n.ID
	f.Requests = slices.Clone(f.Requests)
	if f.Endpoint == "" {
		f.Endpoint = x.streamEndpoint(n)
	}
	if len(f.Requests) == 0 {
		f.Requests = []int{1}
	}
	if f.Times == 0 {
		f.Times = 1
	}
	if c.At != "" {
		ns := x.ref.Nodes[n.ID]
		reqs := ns.Requests[f.Endpoint]
		if reqs == 0 || ns.Events == 0 {
			return f, fmt.Errorf("the reference run saw no stream of node %q on %s naming the node (%s), so no point of it can be aimed at", n.ID, f.Endpoint, "X-Noderun-Node")
		}
		per := int(ns.Events / reqs)
		switch c.At {
		case PointEarly:
			f.AfterEvents = 2
		case PointMiddle:
			f.AfterEvents = per / 2
		case PointLate:
			f.AfterEvents = per - 1
		}
		if f.AfterEvents < 1 || f.AfterEvents >= per {
			return f, fmt.Errorf("node %q's stream has %d events, too short to place a fault %s in it", n.ID, per, c.At)
		}
	}
	return f, f.Validate()
}

// run runs the graph with c aimed at n and judges n.
func (x *caseRun) run(ctx context.Context, c Case, n *runner.Node) (Result, error) {
	r := Result{Case: c.Name, Description: c.Description, Node: n.ID, Expect: c.Expect}
	f, err := x.aim(c, n)
	r.Fault = f
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r, nil
	}
	if err := x.srv.Reset(f); err != nil {
		return r, err
	}
	opts := x.ropts
	if f.Kind == sim.FaultOutage {
		// An outage takes the whole simulator down. One node at a time, so
		// that it hits the target only; it ends once the target has retried
		// into it (a brief outage) or has given up, so that the nodes after
		// it run against a live server. A target that gave up has opened its
		// provider's circuit breaker: the next node starts after the
		// breaker's cool-down, as it would once a real outage is over, and
		// not while the breaker still fails every attempt without dialing.
		opts.Parallel = 1
		if c.Expect == ExpectRecover {
			// the target ran into the outage: noderun saw a refused
			// connection, or the harness is retrying one by itself, or
			// failed its turn (a harness without retries of its own)
			opts.Logger = slog.New(&tap{next: x.ropts.Logger.Handler(), watch: func(node string, code diagnostics.Code) {
				if node == n.ID && (code == diagnostics.ConnectFailed || code == diagnostics.HarnessRetrying || code == diagnostics.HarnessFailed) {
					_ = x.srv.SetOutage(false)
				}
			}})
		}
		next := opts.OnProgress
		opts.OnProgress = func(p runner.Progress) {
			if next != nil {
				next(p)
			}
			if p.Node != n.ID {
				return
			}
			switch p.State {
			case runner.ProgressDone, runner.ProgressFailed, runner.ProgressAttention:
			default:
				return
			}
			_ = x.srv.SetOutage(false)
			if p.State != runner.ProgressDone {
				t := time.NewTimer(x.prof.BreakerCooldown.D() + 50*time.Millisecond)
				defer t.Stop()
				select { // the scheduler waits: with one node at a time, nothing else runs
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}
	}
	start := time.Now()
	res, err := runner.Run(ctx, x.g, opts)
	r.Time = time.Since(start)
	r.Seconds = r.Time.Seconds()
	_ = x.srv.SetOutage(false)
	if err != nil {
		return r, err
	}
	r.RunID = res.RunID
	st := x.srv.Stats()
	r.Stats = st
	if err := x.judge(ctx, &r, c, n, st); err != nil {
		return r, err
	}
	r.Pass = len(r.Failures) == 0
	return r, nil
}

// judge fills r's figures and failures from the run's journal, read by the
// ledger: the target's outcome against what the case expects, its recovery
// steps counted by what each code spends, and the rest of the graph.
func (x *caseRun) judge(ctx context.Context, r *Result, c Case, n *runner.Node, st sim.Stats) error {
	run, err := ledger.Load(ctx, x.ropts.Journal, r.RunID, ledger.LoadOptions{})
	if err != nil {
		return err
	}
	i := slices.IndexFunc(run.Nodes, func(nd *ledger.Node) bool { return nd.ID == n.ID })
	if i < 0 {
		return fmt.Errorf("chaos: run %s has no node %q in its journal", r.RunID, n.ID)
	}
	target := run.Nodes[i]
	t := tallyOf(target)
	outcome, why := outcomeOf(target)
	r.State, r.Outcome, r.Codes = string(target.State), outcome, ids(t.seen)
	r.Retries, r.Reconnects, r.RecoverySteps = t.retries, t.reconnects, t.steps
	r.Verdict = ledger.AccountNode(target, nil).Verdict
	switch {
	case why.ID != "":
		r.Diagnostic = why.ID
	case t.last.ID != "":
		r.Diagnostic = t.last.ID
	}
	r.Regenerated = max(0, st.Nodes[n.ID].TokensGenerated-x.ref.Nodes[n.ID].TokensGenerated)
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }

	if st.Faults[string(r.Fault.Kind)] == 0 {
		fail("the fault never acted on node %q (its stream may be shorter than the case assumes)", n.ID)
	}
	budget := x.prof.Retries
	if n.Retries != nil {
		budget = *n.Retries
	}
	unsafe := n.SideEffects == runner.SideUnsafe
	harness := x.g.Providers[n.Provider].Kind == runner.ProviderKindHarness
	// A harness thread resume is a new turn in the same thread (the
	// descriptor's continue_prompt): its text is the agent's answer to
	// that, not a replay of the lost one, so it cannot equal the reference.
	newTurn := harness && t.reattached
	switch {
	case unsafe && outcome == OutcomeUnsafeRefused:
		// side_effects: unsafe may always be held rather than sent again
	case c.Expect == ExpectFail && outcome == OutcomeCompleted:
		fail("node %q completed; the case expects it to fail", n.ID)
	case c.Expect == ExpectFail && len(c.Outcomes) > 0 && !slices.Contains(c.Outcomes, outcome):
		fail("node %q ended %s; the case expects %s: %s", n.ID, outcome, expected(c.Outcomes, unsafe), oneLine(reason(target)))
	case c.Expect == ExpectFail && c.Meets != "" && !harness && !slices.Contains(t.met, c.Meets):
		fail("node %q ended %s without meeting the fault as the case expects: its journal shows no %s fault", n.ID, outcome, c.Meets)
	case c.Expect == ExpectFail:
	case outcome != OutcomeCompleted:
		fail("node %q ended %s: %s", n.ID, outcome, oneLine(reason(target)))
	case newTurn && target.Output == "":
		fail("node %q completed with an empty output after its thread was resumed", n.ID)
	case !newTurn && target.Output != x.outputs[n.ID]:
		fail("node %q completed, but its output (%d bytes) differs from the reference (%d bytes)", n.ID, len(target.Output), len(x.outputs[n.ID]))
	}
	// codes a matrix file asks for, on top of the outcome
	codes := c.Codes
	if harness && c.HarnessCodes != nil {
		codes = c.HarnessCodes
	}
	for _, spec := range codes {
		switch shown, known := t.shows(spec); {
		case !known:
			fail("case %q names an unknown diagnostic code %q", c.Name, spec)
		case !shown:
			fail("node %q lacks diagnostic %s", n.ID, spec)
		}
	}
	// A retry that repeats nothing (replays: false: the request never
	// left, or a harness dropped a session before any tool call) is allowed
	// even for an unsafe node.
	if unsafe && t.replays > 0 {
		fail("node %q is side_effects: unsafe but its request was sent again %d time(s)", n.ID, t.replays)
	}
	if r.Retries > budget {
		fail("node %q used %d retries, more than its budget of %d", n.ID, r.Retries, budget)
	}
	if limit := x.prof.Reconnects * (r.Retries + 1); r.Reconnects > limit {
		fail("node %q reconnected %d times, more than the profile allows (%d per attempt)", n.ID, r.Reconnects, x.prof.Reconnects)
	}
	refTokens := x.ref.Nodes[n.ID].TokensGenerated
	switch steps := r.Retries + r.Reconnects + t.ownRetries; {
	case x.resumable(n) && r.Retries == 0 && r.Regenerated != 0:
		fail("node %q regenerated %d tokens; its provider resumes, so none should be", n.ID, r.Regenerated)
	case !x.resumable(n) && r.Regenerated > refTokens*int64(steps):
		fail("node %q regenerated %d tokens, more than %d recovery step(s) of %d tokens can explain", n.ID, r.Regenerated, steps, refTokens)
	}
	// the rest of the graph: untouched nodes complete as in the reference;
	// after a failure, the nodes that need the target are skipped
	downstream := map[string]bool{}
	var mark func(id string)
	mark = func(id string) {
		for _, d := range x.g.Dependents(id) {
			downstream[d] = true
			mark(d)
		}
	}
	mark(n.ID)
	byID := make(map[string]*ledger.Node, len(run.Nodes))
	for _, nd := range run.Nodes {
		byID[nd.ID] = nd
	}
	for _, gn := range x.g.Nodes {
		nd := byID[gn.ID]
		switch {
		case nd == nil:
			fail("node %q is not in the run's journal", gn.ID)
		case nd.ID == n.ID:
		case nd.State == journal.NodeCompleted && nd.Output == x.outputs[nd.ID]:
		case nd.State == journal.NodeCompleted && newTurn && downstream[nd.ID]: // its input changed
		case nd.State == journal.NodeSkipped && outcome != OutcomeCompleted:
		default:
			fail("node %q (not the target) ended %s: %s", nd.ID, nd.State, oneLine(reason(nd)))
		}
	}
	return nil
}

// expected says which outcomes a case accepts of a node.
func expected(outcomes []Outcome, unsafe bool) string {
	words := make([]string, 0, len(outcomes)+1)
	for _, o := range outcomes {
		words = append(words, string(o))
	}
	if unsafe && !slices.Contains(outcomes, OutcomeUnsafeRefused) {
		words = append(words, string(OutcomeUnsafeRefused))
	}
	return strings.Join(words, " or ")
}

// reason is why a node did not complete, as its journal says.
func reason(nd *ledger.Node) string {
	if nd.Error != "" {
		return nd.Error
	}
	return nd.Reason
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		return s[:299] + "…"
	}
	return s
}
