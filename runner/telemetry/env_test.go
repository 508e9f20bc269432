package telemetry

import (
	"context"
	"testing"
)

// Without the variables nothing is built: the caller sets no Observer and
// the run takes the path it takes without telemetry.
func TestTracesFromEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		on   bool
		err  bool
	}{
		{"unset", nil, false, false},
		{"service name alone", map[string]string{"OTEL_SERVICE_NAME": "x"}, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, false},
		{"traces endpoint, grpc", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, false},
		{"exporter none wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}, false, false},
		{"sdk disabled wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false, false},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true, false},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
		{"unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp, err := TracesFromEnv(context.Background(), func(k string) string { return c.env[k] }, "test")
			if (err != nil) != c.err || (tp != nil) != c.on {
				t.Fatalf("provider %v, error %v; want on %v, error %v", tp != nil, err, c.on, c.err)
			}
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
	if New(Options{}) != nil {
		t.Error("New with nothing to report is not nil")
	}
}
