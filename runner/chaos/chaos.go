package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
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

// DefaultParallel is how many case runs chaos runs at once unless Options
// say otherwise. A case run mostly waits, on sockets and timers (a silence
// outlasting the idle window, a backoff, a breaker's cool-down), not on the
// CPU: eight overlap well on a two-core machine. A graph with agent harness
// nodes gets fewer (see Options.Parallel).
const DefaultParallel = 8

// DefaultNodes is how many nodes each case run runs at once unless Options
// say otherwise (the runner's own default); outage cases run one.
const DefaultNodes = 4

// Options configure a chaos run.
type Options struct {
	Journal *journal.Journal // required: every run is journaled, inspectable after
	Cases   []Case           // nil = DefaultCases of the profile
	// Profile overrides the graph's; Profiles as in runner.Options.
	Profile  string
	Profiles profile.Set
	Seed     int64
	Tokens   int // default DefaultTokens
	// Parallel bounds the case runs at once. Each case run has a simulator
	// of its own, so its fault, its counters and an outage it starts touch
	// no other case. 0: DefaultParallel, or one per two CPUs for a graph
	// with agent harness nodes: their recovery starts a CLI process (a
	// thread resume), which takes seconds of CPU, and that start-up counts
	// against the profile's deadline; CLIs starting side by side on a busy
	// machine would make a case's verdict depend on the machine.
	Parallel int
	// Nodes bounds the nodes each case run runs at once (default
	// DefaultNodes); outage cases run one at a time whatever it says.
	// Results do not depend on it.
	Nodes int
	// Logger receives every run's log records, each with the case and the
	// target it belongs to (default: discard). Nothing is lost without it:
	// every diagnostic of every run is in the journal.
	Logger *slog.Logger
	Getenv func(string) string
	// Started, if set, is told each case run as it starts, and Progress
	// each result as it is known. They are called one at a time, never
	// concurrently, in the order things happen; they must not block.
	Started  func(Start)
	Progress func(Result)
	// OnProgress, if set, is told what each case run's nodes report as
	// they run (runner.Options.OnProgress: what the live view shows), with
	// the case and the target node of the run. Case runs overlap: it is
	// called from their goroutines at once, and must not block.
	OnProgress func(caseName, target string, p runner.Progress)
}

// Start is a case run beginning, for Options.Started.
type Start struct {
	Case string
	Node string
	// Total is how many case runs the chaos run has.
	Total int
	At    time.Time
	// Expected is what the case is expected to take at least, from what
	// its fault makes the target wait for: a silence until the idle window
	// (or, on a stream it polls, poll_after), a Retry-After, a breaker's
	// cool-down. 0 when the fault makes it wait for nothing in particular.
	Expected time.Duration
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
	Codes []string `json:"codes"`
	// RecoverySteps, Retries and Reconnects are the target's, as the
	// ledger counts them (ledger.Figures.Steps, Retries, Reconnects): what
	// diagnose and NR108 say of it too.
	RecoverySteps int `json:"recovery_steps"`
	Retries       int `json:"retries"`
	Reconnects    int `json:"reconnects"`
	// Regenerated is how many output tokens the simulator generated for
	// the node beyond the reference run.
	Regenerated int64 `json:"tokens_regenerated"`
	// Failures say why the case did not hold (empty when it passed).
	Failures []string `json:"failures,omitempty"`
	RunID    string   `json:"run_id"`
	// Stats are the simulator's counters for the case's run alone (the
	// independent count its figures are checked against).
	Stats sim.Stats `json:"-"`
	// Started is when the case run began (its simulator included), Ended
	// when it was judged, Time how long it took: its own duration, however
	// many other case runs overlapped it.
	Started time.Time     `json:"started"`
	Ended   time.Time     `json:"-"`
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
	Parallel int       `json:"parallel"` // case runs at once, at most
	Runs     int       `json:"runs"`     // case-and-node runs
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

// Run runs the reference, then every case against every node it aims at,
// up to opts.Parallel case runs at once. The report lists the results in
// the order of the cases and the graph's nodes, however the runs
// overlapped. When ctx ends, the runs under way stop, and the report holds
// the results known before.
func Run(ctx context.Context, g *runner.Graph, opts Options) (*Report, error) {
	if opts.Journal == nil {
		return nil, errors.New("chaos: no journal")
	}
	if opts.Tokens <= 0 {
		opts.Tokens = DefaultTokens
	}
	if opts.Parallel <= 0 {
		opts.Parallel = defaultParallel(g)
	}
	if opts.Nodes <= 0 {
		opts.Nodes = DefaultNodes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ropts := runner.Options{Journal: opts.Journal, Profiles: opts.Profiles, Profile: opts.Profile,
		Parallel: opts.Nodes, Logger: opts.Logger, Getenv: opts.Getenv,
		Cache: runner.CacheOptions{Off: true}} // every case must call the provider it breaks
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
	x := &caseRun{g: g, prof: prof, ropts: ropts, sim: sim.Config{Seed: opts.Seed, Tokens: opts.Tokens}, onProgress: opts.OnProgress}
	rep := &Report{Graph: g.Name, Profile: prof.Name, Seed: opts.Seed, Started: time.Now(), Journal: opts.Journal.Path()}
	ref, err := x.reference(ctx, opts.Logger)
	if ref != nil {
		rep.RefRunID = ref.RunID
	}
	if err != nil {
		return rep, err
	}
	var jobs []job
	for _, c := range cases {
		for _, n := range g.Nodes {
			if c.Aims(g, n) {
				jobs = append(jobs, job{i: len(jobs), c: c, n: n, expected: x.expected(c, n)})
			}
		}
	}
	rep.Parallel = min(opts.Parallel, len(jobs))
	results, err := x.runAll(ctx, jobs, opts, rep.Started)
	for _, r := range results {
		if r == nil {
			continue // not run: ctx ended or another run failed first
		}
		rep.Results = append(rep.Results, *r)
		if r.Pass {
			rep.Passed++
		} else {
			rep.Failed++
		}
	}
	rep.Runs = len(rep.Results)
	rep.Seconds = time.Since(rep.Started).Seconds() // monotonic, as runAll's instants
	return rep, err
}

// defaultParallel is Options.Parallel's default for g.
func defaultParallel(g *runner.Graph) int {
	for _, spec := range g.Providers {
		if spec.Kind == runner.ProviderKindHarness {
			return max(1, runtime.NumCPU()/2)
		}
	}
	return DefaultParallel
}

// job is one case aimed at one node; i is its place in the report.
type job struct {
	i        int
	c        Case
	n        *runner.Node
	expected time.Duration
}

// runAll runs the jobs, up to opts.Parallel at once, and returns their
// results by job index (nil for a job that did not run to a verdict). The
// jobs expected to take longest start first (their order is otherwise
// kept): the wall time then approaches the longest case's, rather than a
// long case starting last and running alone. The first error a run returns
// (the journal, the simulator; not a case that failed) stops the others.
//
// Every instant is origin plus the monotonic time since it: the report's
// times then lie on one line, so that a case ends within the report's span
// in its JSON and JUnit too, even if the wall clock is stepped mid-run (a
// VM's clock sync was seen to move it 10 ms).
func (x *caseRun) runAll(ctx context.Context, jobs []job, opts Options, origin time.Time) ([]*Result, error) {
	now := func() time.Time { return origin.Add(time.Since(origin)) }
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	order := slices.Clone(jobs)
	slices.SortStableFunc(order, func(a, b job) int { return cmp.Compare(b.expected, a.expected) })

	results := make([]*Result, len(jobs))
	var (
		mu   sync.Mutex // results, and the callbacks: called one at a time
		wg   sync.WaitGroup
		slot = make(chan struct{}, opts.Parallel)
	)
dispatch:
	for _, jb := range order {
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			break dispatch
		}
		// Taken in the dispatch order, so that the runs' start times keep it.
		start := now()
		if opts.Started != nil {
			mu.Lock()
			opts.Started(Start{Case: jb.c.Name, Node: jb.n.ID, Total: len(jobs), At: start, Expected: jb.expected})
			mu.Unlock()
		}
		wg.Go(func() {
			defer func() { <-slot }()
			r, err := x.run(ctx, jb.c, jb.n, opts.Logger.With("case", jb.c.Name, "target", jb.n.ID))
			r.Started, r.Ended = start, now()
			r.Time = r.Ended.Sub(start)
			r.Seconds = r.Time.Seconds()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				stop(err)
			case ctx.Err() != nil:
				// stopped midway: whatever its journal says, it is no verdict
			default:
				results[jb.i] = &r
				if opts.Progress != nil {
					opts.Progress(r)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return results, err
	}
	return results, nil
}

// caseRun is what every case of one chaos run shares; it is read-only once
// the reference has run, so that case runs may share it.
type caseRun struct {
	g       *runner.Graph
	prof    profile.Profile
	ropts   runner.Options
	sim     sim.Config        // each run's simulator: the same text for the same request
	ref     sim.Stats         // the reference run's counters
	outputs map[string]string // the reference run's outputs, by node

	onProgress func(caseName, target string, p runner.Progress) // Options.OnProgress
}

// startSim starts a simulator of x's config with faults armed, logging to lg.
func (x *caseRun) startSim(lg *slog.Logger, faults ...sim.Fault) (*sim.Server, error) {
	cfg := x.sim
	cfg.Faults = faults
	cfg.Logger = lg.With("sim", "chaos")
	srv := sim.New(cfg)
	if err := srv.Start(""); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// reference runs the graph undisturbed, on a simulator of its own, and
// keeps its outputs and the simulator's counters: what every case is
// compared to.
func (x *caseRun) reference(ctx context.Context, lg *slog.Logger) (*runner.Result, error) {
	lg = lg.With("case", "reference")
	srv, err := x.startSim(lg)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	opts := x.ropts
	opts.Logger = lg
	opts.Sim = &runner.SimOptions{Server: srv}
	ref, err := runner.Run(ctx, x.g, opts)
	if err != nil && !errors.Is(err, runner.ErrInterrupted) { // an interrupted reference shows in its nodes' states
		return nil, err
	}
	var bad []string
	x.outputs = map[string]string{}
	for _, nr := range ref.Nodes {
		if nr.State != journal.NodeCompleted {
			bad = append(bad, fmt.Sprintf("node %q %s: %s", nr.ID, nr.State, nr.Reason))
		}
		x.outputs[nr.ID] = nr.Output
	}
	if len(bad) > 0 {
		return ref, fmt.Errorf("%w (run %s): %s", ErrReference, ref.RunID, strings.Join(bad, "; "))
	}
	x.ref = srv.Stats()
	return ref, nil
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
	case spec.Kind == runner.ProviderKindAnthropic:
		return sim.EndpointMessages
	case spec.Kind == runner.ProviderKindGemini:
		return sim.EndpointInteractionsCreate
	}
	return sim.EndpointResponsesCreate
}

// resumable reports whether n's provider re-attaches (Responses, Gemini) or
// continues (a chat server with a continuation form) without regenerating.
func (x *caseRun) resumable(n *runner.Node) bool {
	spec := x.g.Providers[n.Provider]
	if spec.Continuation != "" && spec.Continuation != "none" {
		return true
	}
	return spec.Kind == runner.ProviderKindResponses || spec.Kind == runner.ProviderKindSim && spec.API == runner.SimAPIResponses ||
		spec.Kind == runner.ProviderKindGemini
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

// run runs the graph with c aimed at n, on a simulator of its own, and
// judges n. lg receives the run's log records.
func (x *caseRun) run(ctx context.Context, c Case, n *runner.Node, lg *slog.Logger) (Result, error) {
	r := Result{Case: c.Name, Description: c.Description, Node: n.ID, Expect: c.Expect}
	f, err := x.aim(c, n)
	r.Fault = f
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r, nil
	}
	// A simulator per case run: its fault is the only one armed, its
	// counters count this run alone, and an outage closes nothing another
	// case run talks to. Its text is the reference's (a pure function of
	// seed, model and prompt).
	srv, err := x.startSim(lg, f)
	if err != nil {
		return r, err
	}
	defer srv.Close()
	opts := x.ropts
	opts.Logger = lg
	opts.Sim = &runner.SimOptions{Server: srv}
	if obs := x.onProgress; obs != nil {
		opts.OnProgress = func(p runner.Progress) { obs(c.Name, n.ID, p) }
	}
	// Ending an outage listens again on the simulator's port, which another
	// socket of this busy process may have taken meanwhile (rarely: a new
	// listener picks a free port at random). The case then says so rather
	// than judge a node that ran against a server that never came back.
	var (
		upMu  sync.Mutex
		upErr error
	)
	up := func() {
		if err := srv.SetOutage(false); err != nil {
			upMu.Lock()
			upErr = cmp.Or(upErr, err)
			upMu.Unlock()
		}
	}
	if f.Kind == sim.FaultOutage {
		// An outage takes the case's simulator down, for every node of the
		// run. One node at a time, so that it hits the target only; it ends
		// once the target has retried into it (a brief outage) or has given
		// up, so that the nodes after it run against a live server. A target
		// that gave up has opened its provider's circuit breaker: the next
		// node starts after the breaker's cool-down, as it would once a real
		// outage is over, and not while the breaker still fails every
		// attempt without dialing. Other case runs have simulators of their
		// own and go on meanwhile.
		opts.Parallel = 1
		if c.Expect == ExpectRecover {
			// the target ran into the outage: noderun saw a refused
			// connection, or the harness is retrying one by itself, or
			// failed its turn (a harness without retries of its own)
			opts.Logger = slog.New(&tap{next: lg.Handler(), watch: func(node string, code diagnostics.Code) {
				if node == n.ID && (code == diagnostics.ConnectFailed || code == diagnostics.HarnessRetrying || code == diagnostics.HarnessFailed) {
					up()
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
			up()
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
	res, err := runner.Run(ctx, x.g, opts)
	if err != nil && !errors.Is(err, runner.ErrInterrupted) { // judged by its nodes' states, as before
		return r, err
	}
	r.RunID = res.RunID
	st := srv.Stats()
	r.Stats = st
	if err := x.judge(ctx, &r, c, n, st); err != nil {
		return r, err
	}
	upMu.Lock()
	if upErr != nil {
		r.Failures = append(r.Failures, fmt.Sprintf("the simulator could not end the outage (%v): the nodes after it met a dead server; run chaos again", upErr))
	}
	upMu.Unlock()
	r.Pass = len(r.Failures) == 0
	return r, nil
}

// expected estimates the least that c aimed at n takes: what its fault
// makes n wait for. It orders the case runs (longest first) and gives a
// progress display something better than an average to estimate with.
func (x *caseRun) expected(c Case, n *runner.Node) time.Duration {
	f := c.Fault
	switch f.Kind {
	case sim.FaultSilence:
		// the node waits out the silence or its idle window; a Responses
		// stream is let go after poll_after and polled instead
		d := min(f.Duration, x.prof.IdleTimeout.D())
		if ep := x.streamEndpoint(n); ep == sim.EndpointResponsesCreate && x.g.Providers[n.Provider].Kind != runner.ProviderKindHarness ||
			ep == sim.EndpointInteractionsCreate {
			d = min(d, x.prof.PollAfter.D())
		}
		return d
	case sim.FaultStatus:
		if s, err := strconv.Atoi(f.RetryAfter); err == nil && s > 0 {
			return min(time.Duration(s)*time.Second, x.prof.MaxRetryAfter.D())
		}
	case sim.FaultOutage:
		if c.Expect == ExpectFail { // the target gives up; the next node waits out the breaker
			return x.prof.BreakerCooldown.D()
		}
	}
	return 0
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
	// the figures every surface prints: the ledger's account of the node
	na := ledger.AccountNode(target, nil)
	r.Retries, r.Reconnects, r.RecoverySteps, r.Verdict = na.Retries(), na.Reconnects(), na.Steps(), na.Verdict.Text
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
		fail("node %q is side_effects: unsafe but its request was sent again: %s", n.ID, textfit.Count(t.replays, "time"))
	}
	// a node moved to a fallback has its budgets afresh there
	if providers := 1 + na.RecoverySteps[ledger.CodeName(diagnostics.FailedOver.Name)]; r.Retries > budget*providers {
		fail("node %q used %d retries, more than its budget of %d on each of the %s it ran on", n.ID, r.Retries, budget, textfit.Count(providers, "provider"))
	}
	if limit := x.prof.Reconnects * (r.Retries + 1); r.Reconnects > limit {
		fail("node %q reconnected %d times, more than the profile allows (%d per attempt)", n.ID, r.Reconnects, x.prof.Reconnects)
	}
	refTokens := x.ref.Nodes[n.ID].TokensGenerated
	switch steps := r.Retries + r.Reconnects + t.ownRetries; {
	case x.resumable(n) && r.Retries == 0 && r.Regenerated != 0:
		fail("node %q regenerated %d tokens; its provider resumes, so none should be", n.ID, r.Regenerated)
	case !x.resumable(n) && r.Regenerated > refTokens*int64(steps):
		fail("node %q regenerated %d tokens, more than %s of %d tokens can explain", n.ID, r.Regenerated, textfit.Count(steps, "recovery step"), refTokens)
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

func oneLine(s string) string { return textfit.Text(s, 300) }
