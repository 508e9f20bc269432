package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
			tp, err := TracesFromEnv(context.Background(), func(k string) string { return c.env[k] }, "test", nil)
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

// An OTLP collector that refuses the exports (and echoes the credentials
// of OTEL_EXPORTER_OTLP_HEADERS back): the log says so once for the burst,
// without the credentials, and once when exports work again; nothing goes
// to the SDK's handler. A real exporter against a real socket.
func TestExportFailuresAreLoggedOnceRedacted(t *testing.T) {
	const secret = "sk-otel-collector-0123456789abcdef"
	var refuse atomic.Bool
	refuse.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "unauthorized: %s", r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20"+secret)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), nil))
	tp, err := TracesFromEnv(context.Background(), nil, "test", log)
	if err != nil || tp == nil {
		t.Fatalf("%v %v", tp, err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	span := func() {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
		_ = tp.ForceFlush(context.Background())
	}
	for range 3 {
		span()
	}
	refuse.Store(false)
	span()
	span()
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if n := strings.Count(text, "exporting spans failed"); n != 1 {
		t.Errorf("%d failure lines, want 1:\n%s", n, text)
	}
	if n := strings.Count(text, "exporting spans works again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, text)
	}
	for i := 0; i+12 <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+12]) {
			t.Fatalf("the log holds %q of the credentials:\n%s", secret[i:i+12], text)
		}
	}
	t.Logf("log:\n%s", text)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
