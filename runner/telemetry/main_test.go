package telemetry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
)

// The tests run the real noderun command against a real OTLP receiver:
// Jaeger v2 (all-in-one, in-memory storage), built from the Go module proxy
// by `make tools` into .tools/bin like promtool and the Temporal CLI. One
// Jaeger serves every test of the package, on 127.0.0.1 ports of its own;
// TestMain stops it. Tests that need a tool fail, never skip, when it is
// missing.
var (
	noderun testkit.CLI
	jaeger  struct {
		once   sync.Once
		err    error
		cmd    *exec.Cmd
		exited chan struct{}
		otlp   struct{ grpc, http string } // receivers, HOST:PORT
		query  string                      // the query API's base URL
		log    *testkit.Buffer
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopJaeger()
	temporalDev.Stop()
	noderun.Remove()
	os.Exit(code)
}

// temporalDev is a Temporal dev server for the test that follows a trace
// from run --temporal to the workers.
var temporalDev testkit.TemporalDev

// startTemporal starts the shared dev server on first use and returns its
// frontend's address once it answers.
func startTemporal(t *testing.T) string { return temporalDev.HostPort(t) }

// jaegerConfig puts every listener of Jaeger's on 127.0.0.1 and turns off
// its own metrics endpoint (8888 by default).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// startJaeger starts the shared Jaeger on first use and returns it ready.
func startJaeger(t *testing.T) {
	t.Helper()
	bin := testkit.Tool(t, "jaeger")
	jaeger.once.Do(func() { jaeger.err = launchJaeger(bin) })
	if jaeger.err != nil {
		t.Fatal(jaeger.err)
	}
}

func launchJaeger(bin string) error {
	ports, err := testkit.FreePorts(4)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "noderun-jaeger-")
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, ports[0], ports[1], ports[2], ports[3]), 0o600); err != nil {
		return err
	}
	jaeger.query = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	jaeger.otlp.grpc = fmt.Sprintf("127.0.0.1:%d", ports[2])
	jaeger.otlp.http = fmt.Sprintf("127.0.0.1:%d", ports[3])
	jaeger.log = &testkit.Buffer{}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = jaeger.log, jaeger.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("jaeger: %w", err)
	}
	jaeger.cmd, jaeger.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = os.RemoveAll(dir); close(jaeger.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-jaeger.exited:
			return fmt.Errorf("jaeger exited at start:\n%s", jaeger.log)
		default:
		}
		if resp, err := http.Get(jaeger.query + "/api/services"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && dialable(jaeger.otlp.grpc) && dialable(jaeger.otlp.http) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("jaeger not ready in 60s:\n%s", jaeger.log)
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// stopJaeger ends the shared Jaeger, if started, and waits for it.
func stopJaeger() {
	if jaeger.cmd == nil {
		return
	}
	_ = jaeger.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-jaeger.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-jaeger.cmd.Process.Pid, syscall.SIGKILL)
		<-jaeger.exited
	}
}

// jaegerTrace is a trace as Jaeger's query API (/api/traces) returns it.
type jaegerTrace struct {
	TraceID   string                                  `json:"traceID"`
	Processes map[string]struct{ ServiceName string } `json:"processes"`
	Spans     []struct {
		SpanID        string     `json:"spanID"`
		ProcessID     string     `json:"processID"`
		OperationName string     `json:"operationName"`
		References    []struct{} `json:"references"`
		Tags          []kv       `json:"tags"`
		Logs          []struct {
			Fields []kv `json:"fields"`
		} `json:"logs"`
	} `json:"spans"`
}

type kv struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

func tagOf(tags []kv, key string) (any, bool) {
	for _, t := range tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return nil, false
}

// traces polls Jaeger for service's traces until ok says they are all
// there (the exporter batches; the receiver stores asynchronously).
func traces(t *testing.T, service string, ok func([]jaegerTrace) bool) []jaegerTrace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got []jaegerTrace
	for {
		resp, err := http.Get(jaeger.query + "/api/traces?limit=50&service=" + service)
		if err == nil {
			var body struct {
				Data []jaegerTrace `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			got = body.Data
			if err == nil && ok(got) {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger: service %s: the traces did not arrive in 30s (last answer: %d traces, %v)\n%s", service, len(got), err, jaeger.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lines reads r line by line into a channel, closed at EOF.
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 256)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// waitLine returns the first line from ch containing want, and every line
// read until then.
func waitLine(ctx context.Context, ch <-chan string, want string) (string, []string, error) {
	var seen []string
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return "", seen, errors.New("the output ended before " + want)
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				return l, seen, nil
			}
		case <-ctx.Done():
			return "", seen, fmt.Errorf("waiting for %q: %w", want, ctx.Err())
		}
	}
}

// withoutOTEL is this process's environment without the OpenTelemetry
// variables, for a run that must not export (whatever the CI sets).
func withoutOTEL() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "OTEL_") {
			env = append(env, e)
		}
	}
	return env
}

// metricsURL waits for the line where a noderun command says where it
// serves its metrics, and returns that URL.
func metricsURL(ctx context.Context, t *testing.T, out <-chan string) string {
	t.Helper()
	line, seen, err := waitLine(ctx, out, "metrics on http://")
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(seen, "\n"))
	}
	return strings.Fields(line[strings.Index(line, "http://"):])[0]
}
