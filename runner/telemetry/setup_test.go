package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// What Start sets up is what the environment and the metrics address ask
// for: nothing at all without them (no Observer, no journal option), the
// metrics served where asked, and an address it cannot listen on a
// *ListenError naming it, with nothing left running.
func TestStart(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name            string
		env             map[string]string
		metrics         string
		traces, served  bool
		listenErr, fail bool
	}{
		{name: "nothing asked"},
		{name: "traces", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, traces: true},
		{name: "metrics", metrics: "127.0.0.1:0", served: true},
		{name: "both", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, metrics: "127.0.0.1:0", traces: true, served: true},
		{name: "an unusable variable", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, fail: true},
		{name: "an address it cannot listen on", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, metrics: "127.0.0.1:nope",
			fail: true, listenErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Start(context.Background(), SetupOptions{Getenv: env(c.env), Version: "test", MetricsAddr: c.metrics})
			if c.fail {
				le, isListen := errors.AsType[*ListenError](err)
				if s != nil || err == nil || isListen != c.listenErr || isListen && (le.Addr != c.metrics || !strings.Contains(err.Error(), c.metrics)) {
					t.Fatalf("Start: %v, %v", s, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					s.Close()
				}
			}()
			if (s.Traces != nil) != c.traces || (s.Metrics != nil) != c.served || (s.MetricsAddr != "") != c.served {
				t.Errorf("set up: traces %v, metrics %v at %q", s.Traces != nil, s.Metrics != nil, s.MetricsAddr)
			}
			on := c.traces || c.served
			if (s.Telemetry != nil) != on || (s.Observer() != nil) != on {
				t.Errorf("Telemetry %v, Observer %v; want them only with something on", s.Telemetry, s.Observer())
			}
			if len(s.JournalOptions()) != map[bool]int{false: 0, true: 1}[c.served] {
				t.Errorf("%d journal options", len(s.JournalOptions()))
			}
			if !c.served {
				return
			}
			resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
				t.Errorf("/metrics: %s\n%.300s", resp.Status, body)
			}
			s.Close()
			closed = true
			if _, err := http.Get("http://" + s.MetricsAddr + "/metrics"); err == nil {
				t.Error("/metrics still served after Close")
			}
		})
	}
}
