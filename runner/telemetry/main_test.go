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
	stopTemporal()
	noderun.Remove()
	os.Exit(code)
}

// temporalDev is a Temporal dev server (the pinned Temporal CLI, in memory),
// for the test that follows a trace from run --temporal to the workers.
var temporalDev struct {
	once     sync.Once
	err      error
	cmd      *exec.Cmd
	exited   chan struct{}
	hostPort string
	log      *testkit.Buffer
}

// startTemporal starts the shared dev server on first use and returns its
// frontend's address once it accepts connections.
func startTemporal(t *testing.T) string {
	t.Helper()
	bin := tool(t, "temporal")
	temporalDev.once.Do(func() { temporalDev.err = launchTemporal(bin) })
	if temporalDev.err != nil {
		t.Fatal(temporalDev.err)
	}
	return temporalDev.hostPort
}

func launchTemporal(bin string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	temporalDev.hostPort = fmt.Sprintf("127.0.0.1:%d", ports[0])
	temporalDev.log = &testkit.Buffer{}
	cmd := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", fmt.Sprint(ports[0]),
		"--ui-port", fmt.Sprint(ports[1]), "--http-port", fmt.Sprint(ports[2]), "--metrics-port", fmt.Sprint(ports[3]), "--log-level", "error")
	cmd.Stdout, cmd.Stderr = temporalDev.log, temporalDev.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	temporalDev.cmd, temporalDev.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(temporalDev.exited) }()
	// The frontend takes connections a little before it serves: the first
	// command's dial retries (the CLI waits 30 s for it).
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-temporalDev.exited:
			return fmt.Errorf("temporal dev server exited at start:\n%s", temporalDev.log)
		default:
		}
		if dialable(temporalDev.hostPort) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("temporal dev server not ready in 90s:\n%s", temporalDev.log)
}

func stopTemporal() {
	if temporalDev.cmd == nil {
		return
	}
	_ = temporalDev.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-temporalDev.exited:
	case <-time.After(10 * time.Second):
		_ = temporalDev.cmd.Process.Kill()
		<-temporalDev.exited
	}
}

// tool is the path of a tool `make tools` builds into .tools/bin.
func tool(t *testing.T, name string) string {
	t.Helper()
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".tools", "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make tools` (it builds it from the Go module proxy): %v", name, err)
	}
	return p
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1,
// holding each until it has them all (a port closed at once may be handed
// out again by the next ask).
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

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
	bin := tool(t, "jaeger")
	jaeger.once.Do(func() { jaeger.err = launchJaeger(bin) })
	if jaeger.err != nil {
		t.Fatal(jaeger.err)
	}
}

func launchJaeger(bin string) error {
	ports, err := freePorts(4)
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
