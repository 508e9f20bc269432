package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/noderun/noderun/runner"
)

// The gauges follow each node's state: a node streaming is a stream in
// flight until it recovers, waits or ends; an end counts once by its state.
func TestGauges(t *testing.T) {
	m := NewMetrics()
	tel := New(Options{Metrics: m})
	check := func(when string, streaming, recovering, inFlight, done float64) {
		t.Helper()
		got := []float64{testutil.ToFloat64(m.nodes.WithLabelValues("streaming")), testutil.ToFloat64(m.nodes.WithLabelValues("recovering")),
			testutil.ToFloat64(m.streams), testutil.ToFloat64(m.settled.WithLabelValues("done"))}
		if want := []float64{streaming, recovering, inFlight, done}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
			t.Errorf("%s: streaming, recovering, in flight, done = %v, want %v", when, got, want)
		}
	}
	tel.Progress("r", runner.Progress{Node: "a", State: runner.ProgressStreaming})
	tel.Progress("r", runner.Progress{Node: "b", State: runner.ProgressStreaming})
	tel.Progress("r", runner.Progress{Node: "a", State: runner.ProgressData})
	check("two streaming", 2, 0, 2, 0)
	tel.Progress("r", runner.Progress{Node: "a", State: runner.ProgressRecovering})
	check("one recovering", 1, 1, 1, 0)
	tel.Progress("r", runner.Progress{Node: "a", State: runner.ProgressStreaming})
	tel.Progress("r", runner.Progress{Node: "a", State: runner.ProgressDone})
	tel.Progress("r", runner.Progress{Node: "b", State: runner.ProgressDone})
	check("both done", 0, 0, 0, 2)
	tel.Progress("r2", runner.Progress{Node: "a", State: runner.ProgressSkipped})
	if n := testutil.ToFloat64(m.settled.WithLabelValues("skipped")); n != 1 {
		t.Errorf("skipped %v, want 1", n)
	}
}
