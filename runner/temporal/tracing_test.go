package temporal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/telemetry"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// The trace of a run on Temporal is one trace: the client's run span, the
// workflow's and activities' spans the interceptor makes, and under each
// node activity the worker's node span and its attempt spans. The worker's
// metrics count each node once, and no stream stays in flight.
func TestTraceCarriedToWorkers(t *testing.T) {
	dir := t.TempDir()
	g := benchGraph(t, dir)
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(ctx) }()
	icp, err := ntemporal.TracingInterceptor(tp)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ntemporal.Dial(ctx, devServer(t), "default", "trace", nil, icp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := telemetry.NewMetrics()
	tel := telemetry.New(telemetry.Options{Traces: tp, Metrics: m})
	queue := fmt.Sprintf("trace-%d", time.Now().UnixNano())
	acts := &ntemporal.Activities{Identity: "trace", Observer: tel}
	startWorker(t, c, queue, filepath.Join(dir, "worker.db"), acts)
	in := ciInput(t, "trace", g)
	rctx, end := tel.StartRun(ctx, in.RunID, g.Name)
	if _, err := ntemporal.Submit(rctx, c, queue, in); err != nil {
		t.Fatal(err)
	}
	res, err := ntemporal.Follow(ctx, c, in.RunID, 20*time.Millisecond, nil)
	if err != nil || res.Status != string(journal.RunCompleted) {
		t.Fatalf("temporal: %v %+v", err, res)
	}
	end(journal.RunCompleted)
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	var root tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "run "+g.Name {
			root = s
		}
	}
	if !root.SpanContext.IsValid() {
		t.Fatalf("no run span among %d spans", len(spans))
	}
	nodes, attempts, activities := 0, 0, 0
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("span %s is in trace %s, not the run's %s", s.Name, s.SpanContext.TraceID(), root.SpanContext.TraceID())
		}
		switch {
		case strings.HasPrefix(s.Name, "node "):
			nodes++
			if !s.Parent.IsValid() || s.Parent.SpanID() == root.SpanContext.SpanID() {
				t.Errorf("node span %s: parent %v, want the activity's span", s.Name, s.Parent)
			}
		case strings.HasPrefix(s.Name, "chat "):
			attempts++
		case strings.HasPrefix(s.Name, "RunActivity"):
			activities++
		}
	}
	if nodes != len(g.Nodes) || attempts < len(g.Nodes) || activities < len(g.Nodes) {
		names := make([]string, len(spans))
		for i, s := range spans {
			names[i] = s.Name
		}
		t.Errorf("%d node spans, %d attempt spans, %d activity spans for %d nodes: %v", nodes, attempts, activities, len(g.Nodes), names)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mm := range f.GetMetric() {
			v := mm.GetCounter().GetValue() + mm.GetGauge().GetValue()
			for _, l := range mm.GetLabel() {
				if l.GetName() == "state" {
					got[f.GetName()+"/"+l.GetValue()] += v
				}
			}
			got[f.GetName()] += v
		}
	}
	for k, want := range map[string]float64{"noderun_node_calls_total": float64(len(g.Nodes)), "noderun_nodes_settled_total/done": float64(len(g.Nodes)),
		"noderun_streams_in_flight": 0, "noderun_nodes/streaming": 0} {
		if got[k] != want {
			t.Errorf("worker metrics: %s = %v, want %v", k, got[k], want)
		}
	}
}
