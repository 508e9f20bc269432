package telemetry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// Metrics are noderun's Prometheus metrics, in a registry of their own (no
// global default registry): serve them with Handler or Serve.
type Metrics struct {
	reg *prometheus.Registry

	runs     prometheus.Gauge
	nodes    *prometheus.GaugeVec
	streams  prometheus.Gauge
	settled  *prometheus.CounterVec
	calls    *prometheus.CounterVec
	attempts *prometheus.CounterVec
	steps    *prometheus.CounterVec
	faults   *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	seconds  *prometheus.CounterVec
	quota    *prometheus.CounterVec
	cached   prometheus.Counter
	writes   prometheus.Histogram
	wErrors  prometheus.Counter
}

// MetricNames are the names of the metrics noderun exports (without the
// _bucket, _sum and _count series of its histogram): what a dashboard may
// query (docs/observability.md).
var MetricNames = []string{
	"noderun_runs_active", "noderun_nodes", "noderun_streams_in_flight", "noderun_nodes_settled_total",
	"noderun_node_calls_total", "noderun_attempts_total", "noderun_recovery_steps_total", "noderun_faults_total",
	"noderun_tokens_total", "noderun_node_seconds_total", "noderun_quota_waits_total", "noderun_cache_hits_total",
	"noderun_journal_write_seconds", "noderun_journal_write_errors_total",
}

// NewMetrics registers noderun's metrics, and the Go runtime's and the
// process's, in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.runs = prometheus.NewGauge(prometheus.GaugeOpts{Name: "noderun_runs_active",
		Help: "Runs this process is running now."})
	m.nodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "noderun_nodes",
		Help: "Nodes under way in this process, by state (streaming, recovering, waiting for quota)."}, []string{"state"})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "noderun_streams_in_flight",
		Help: "Attempts streaming now (a node's request or re-attachment open at its provider)."})
	m.settled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_nodes_settled_total",
		Help: "Nodes that ended in this process, by final state (done, failed, skipped, interrupted, attention)."}, []string{"state"})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_node_calls_total",
		Help: "Logical node calls settled (one per node however many attempts it took), by provider kind, model and node state."},
		[]string{"provider", "model", "state"})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_attempts_total",
		Help: "Attempts of node calls (requests and re-attachments), by provider kind, model, mode (start, retry, reattach, resume) and outcome (ok, error, running)."},
		[]string{"provider", "model", "mode", "outcome"})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_recovery_steps_total",
		Help: "Recovery steps taken, by diagnostic code and name (docs/diagnostics.md)."}, []string{"code", "name"})
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_faults_total",
		Help: "Faults recovered from or ended by, by diagnostic code and name (docs/diagnostics.md)."}, []string{"code", "name"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_tokens_total",
		Help: "Tokens, by kind: generated = needed + regenerated + unfinished (output, without reasoning); preserved (kept by a re-attach or continue); input, reasoning, cache_read, cache_write; from_cache (output a cache hit reused)."},
		[]string{"kind", "model"})
	m.seconds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_node_seconds_total",
		Help: "Node time, by kind: wall = useful + lost + quota_wait (lost: to faults, attempts thrown away and backoff)."}, []string{"kind"})
	m.quota = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noderun_quota_waits_total",
		Help: "Waits for a provider's quota, by diagnostic code and name: quota_wait (paced before sending), quota_parked (after a 429)."},
		[]string{"code", "name"})
	m.cached = prometheus.NewCounter(prometheus.CounterOpts{Name: "noderun_cache_hits_total",
		Help: "Nodes completed from the node cache, without a provider call."})
	m.writes = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "noderun_journal_write_seconds",
		Help:    "Time of each journal group commit (one SQLite transaction of many events).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	m.wErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "noderun_journal_write_errors_total",
		Help: "Journal group commits that failed."})
	m.reg.MustRegister(m.runs, m.nodes, m.streams, m.settled, m.calls, m.attempts, m.steps, m.faults, m.tokens,
		m.seconds, m.quota, m.cached, m.writes, m.wErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series whose labels are known now starts at 0: a dashboard
	// shows "0 retries" rather than "no data", and an alert on a rate
	// sees the first one.
	for _, s := range []runner.ProgressState{runner.ProgressStreaming, runner.ProgressRecovering, runner.ProgressWaiting} {
		m.nodes.WithLabelValues(s.String())
	}
	for _, s := range []runner.ProgressState{runner.ProgressDone, runner.ProgressFailed, runner.ProgressSkipped,
		runner.ProgressInterrupted, runner.ProgressAttention} {
		m.settled.WithLabelValues(s.String())
	}
	for _, c := range diagnostics.Codes() {
		switch {
		case c.IsFault():
			m.faults.WithLabelValues(c.ID, c.Name)
		case c.Role == diagnostics.RoleStep:
			m.steps.WithLabelValues(c.ID, c.Name)
		}
		if c == diagnostics.QuotaWait || c == diagnostics.QuotaParked {
			m.quota.WithLabelValues(c.ID, c.Name)
		}
	}
	for _, k := range []string{"wall", "useful", "lost", "quota_wait"} {
		m.seconds.WithLabelValues(k)
	}
	return m
}

// Registry is the metrics' registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// JournalWrites is the journal's write observer (journal.WithWriteObserver).
func (m *Metrics) JournalWrites(d time.Duration, _ int, err error) {
	m.writes.Observe(d.Seconds())
	if err != nil {
		m.wErrors.Inc()
	}
}

// enter counts a live node in state s: the nodes by state, and the streams
// in flight while it streams (the one state with an attempt open).
func (m *Metrics) enter(s runner.ProgressState) {
	m.nodes.WithLabelValues(s.String()).Inc()
	if s == runner.ProgressStreaming {
		m.streams.Inc()
	}
}

// leave undoes enter.
func (m *Metrics) leave(s runner.ProgressState) {
	m.nodes.WithLabelValues(s.String()).Dec()
	if s == runner.ProgressStreaming {
		m.streams.Dec()
	}
}

// sample is one counter increment, keyed to tell it from what was already
// added of the node.
type sample struct {
	vec    *prometheus.CounterVec
	labels []string
	v      float64
}

// count adds the node's account, less what was already counted of it in
// this process.
func (m *Metrics) count(nd *ledger.Node, kind string, seen *nodeSeen) {
	na := ledger.AccountNode(nd, nil)
	model := na.Model
	var ss []sample
	add := func(vec *prometheus.CounterVec, v float64, labels ...string) {
		ss = append(ss, sample{vec, labels, v})
	}
	if na.Cached > 0 {
		if seen.counted["cached"] == 0 {
			m.cached.Add(float64(na.Cached))
			seen.counted["cached"] = float64(na.Cached)
		}
	} else if len(nd.Attempts) > 0 {
		add(m.calls, 1, kind, model, string(nd.State))
	}
	for _, a := range nd.Attempts {
		add(m.attempts, 1, kind, model, string(a.Mode), string(a.Outcome))
	}
	for _, r := range nd.Records {
		switch {
		case r.Code == diagnostics.QuotaWait || r.Code == diagnostics.QuotaParked:
			add(m.quota, 1, r.Code.ID, r.Code.Name)
		}
		switch {
		case r.Code.IsFault():
			add(m.faults, 1, r.Code.ID, r.Code.Name)
		case r.Code.Role == diagnostics.RoleStep:
			add(m.steps, 1, r.Code.ID, r.Code.Name)
		}
	}
	tk := na.Tokens
	for _, t := range []struct {
		kind string
		n    int
	}{{"generated", tk.Generated}, {"needed", tk.Needed}, {"regenerated", tk.Regenerated}, {"preserved", tk.Preserved},
		{"unfinished", tk.Unfinished}, {"input", tk.Input}, {"reasoning", tk.Reasoning}, {"cache_read", tk.CacheRead},
		{"cache_write", tk.CacheWrite}, {"from_cache", na.Saved.Output}} {
		add(m.tokens, float64(t.n), t.kind, model)
	}
	for _, s := range []struct {
		kind string
		ms   int64
	}{{"wall", na.WallMS}, {"useful", na.UsefulMS}, {"lost", na.TimeLostMS}, {"quota_wait", na.QuotaWaitMS}} {
		add(m.seconds, float64(s.ms)/1000, s.kind)
	}
	// Same labels, same key: the node's total so far; only the difference
	// with what was added before is new. A figure that shrank (a resumed
	// node's unfinished tokens becoming needed ones) adds nothing: counters
	// only go up.
	total := map[string]float64{}
	first := map[string]sample{}
	for _, s := range ss {
		k := fmt.Sprintf("%p|%s", s.vec, strings.Join(s.labels, "\x00"))
		total[k] += s.v
		if _, ok := first[k]; !ok {
			first[k] = s
		}
	}
	for k, v := range total {
		// The series is made even at 0, so that a dashboard shows "0
		// regenerated" rather than "no data".
		s := first[k]
		c := s.vec.WithLabelValues(s.labels...)
		if d := v - seen.counted[k]; d > 0 {
			c.Add(d)
			seen.counted[k] = v
		}
	}
}

// Serve serves the metrics on addr (HOST:PORT; :0 picks a port) at
// /metrics until ctx ends or stop is called; it returns the address it
// listens on. Only the listen can fail the caller: a scrape that fails
// later is the scraper's to see, and never stops a run.
func (m *Metrics) Serve(ctx context.Context, addr string) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed once stopped
	}()
	stopCtx := context.AfterFunc(ctx, func() { _ = srv.Close() })
	return ln.Addr().String(), func() {
		stopCtx()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}
