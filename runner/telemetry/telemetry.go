// Package telemetry shows noderun's runs in the tools operators already
// watch: OpenTelemetry traces (a span per run, node and attempt, with the
// GenAI semantic conventions' attributes and each diagnostic as a span
// event) and Prometheus metrics (nodes, attempts, recovery steps, tokens,
// time lost, quota waits, streams in flight, journal write latency).
//
// A Telemetry is a runner.Observer: set it as runner.Options.Observer. It
// holds no global state: the tracer provider and the metrics registry are
// the caller's (TracesFromEnv, NewMetrics; Start sets both up as noderun's
// commands do). Everything it reports about a node is read from the journal
// when the node settles (ledger.LoadNodeOf, ledger.AccountNode), the account
// `noderun diagnose` prints: the figures agree with diagnose, a retried
// request is one node call with its attempts labelled, and no chunk costs
// anything more.
// docs/observability.md lists the names.
package telemetry

import (
	"context"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// ScopeName is the instrumentation scope of noderun's spans.
const ScopeName = "github.com/noderun/noderun/runner/telemetry"

// Options configure New. Either part may be nil.
type Options struct {
	// Traces, when set, gets the spans (TracesFromEnv builds one from the
	// OpenTelemetry environment variables).
	Traces trace.TracerProvider
	// Metrics, when set, is updated (NewMetrics).
	Metrics *Metrics
	// Logger gets what could not be reported (a journal read that failed).
	Logger *slog.Logger
}

// Telemetry reports runs as traces and metrics (a runner.Observer).
type Telemetry struct {
	tracer  trace.Tracer // nil: no traces
	metrics *Metrics     // nil: no metrics
	log     *slog.Logger

	mu sync.Mutex
	// seen is what was already reported of each node (run/node) in this
	// process: a node settles again when it is resumed in the same process,
	// and only what is new since is added (counters) or exported (spans).
	seen map[string]*nodeSeen
	// states is each live node's current state, for the gauges.
	states map[string]runner.ProgressState
}

// nodeSeen is what was reported of a node so far.
type nodeSeen struct {
	counted  map[string]float64 // counter sample key → value added so far
	attempts int                // attempts exported as spans
	records  int                // records exported as span events
}

// New returns a Telemetry reporting to what opts gives; nil when it gives
// nothing, so that the caller can set Options.Observer only when there is
// something to observe.
func New(opts Options) *Telemetry {
	if opts.Traces == nil && opts.Metrics == nil {
		return nil
	}
	t := &Telemetry{metrics: opts.Metrics, log: opts.Logger, seen: map[string]*nodeSeen{}, states: map[string]runner.ProgressState{}}
	if opts.Traces != nil {
		t.tracer = opts.Traces.Tracer(ScopeName)
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t
}

var _ runner.Observer = (*Telemetry)(nil)

// RunStarted starts the run's span (its nodes' parent) when tracing.
func (t *Telemetry) RunStarted(ctx context.Context, runID string, g *runner.Graph) (context.Context, func(journal.RunStatus)) {
	if t.metrics != nil {
		t.metrics.runs.Inc()
	}
	name := ""
	if g != nil {
		name = g.Name
	}
	ctx, span := t.StartRun(ctx, runID, name)
	return ctx, func(st journal.RunStatus) {
		if t.metrics != nil {
			t.metrics.runs.Dec()
		}
		span(st)
	}
}

// Progress keeps the live gauges: nodes by state and streams in flight.
// Counters are not touched here: they come from the journal when the node
// settles, so that nothing is counted twice.
func (t *Telemetry) Progress(runID string, p runner.Progress) {
	if t.metrics == nil {
		return
	}
	switch p.State {
	case runner.ProgressData, runner.ProgressDiagnostic:
		return
	}
	key := runID + "/" + p.Node
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.states[key]; ok {
		t.metrics.leave(old)
	}
	if p.State.Final() {
		delete(t.states, key)
		t.metrics.settled.WithLabelValues(p.State.String()).Inc()
		return
	}
	t.states[key] = p.State
	t.metrics.enter(p.State)
}

// NodeSettled reads the node's account from the journal and reports what
// is new of it: counters, and spans for its attempts with its diagnostics
// as events.
func (t *Telemetry) NodeSettled(ctx context.Context, j *journal.Journal, g *runner.Graph, runID, node string) {
	nd, err := ledger.LoadNodeOf(ctx, j, g, runID, node)
	if err != nil {
		t.log.Warn("telemetry: reading the node from the journal", "run", runID, "node", node, "error", err)
		return
	}
	key := runID + "/" + node
	t.mu.Lock()
	seen := t.seen[key]
	if seen == nil {
		seen = &nodeSeen{counted: map[string]float64{}}
		t.seen[key] = seen
	}
	if nd.State == journal.NodeCompleted || nd.State == journal.NodeFailed || nd.State == journal.NodeSkipped {
		// It will not settle again in this process: forget it, so that a
		// worker that runs for months does not grow.
		delete(t.seen, key)
	}
	t.mu.Unlock()
	if t.metrics != nil {
		t.metrics.count(nd, providerKind(g, nd), seen)
	}
	if t.tracer != nil {
		t.spans(ctx, g, nd, seen)
	}
}
