package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// demoGraph is the demo: four nodes on the embedded simulator, whose
// faults drop three streams (a clean close, a reset, a cut mid-line).
func demoGraph(t *testing.T) string {
	t.Helper()
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "graphs", "demo.yaml")
}

// TestDemoTraceInJaeger runs the demo with the OTEL_* variables pointing at
// a real Jaeger, over each OTLP protocol, and reads the run's trace back
// from Jaeger's query API: one trace; a span for the run, each node and
// each attempt (as many attempt spans as the journal has attempts); an
// event per diagnostic the journal holds for a node, with its code; and
// the GenAI attributes on every attempt.
func TestDemoTraceInJaeger(t *testing.T) {
	startJaeger(t)
	bin := noderun.Path(t)
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(proto, "/", "_"), func(t *testing.T) {
			service := fmt.Sprintf("noderun-test-%s-%d", strings.ReplaceAll(proto, "/", "-"), time.Now().UnixNano())
			endpoint := "http://" + jaeger.otlp.http
			if proto == "grpc" {
				endpoint = "http://" + jaeger.otlp.grpc
			}
			db := filepath.Join(t.TempDir(), "run.db")
			cmd := exec.Command(bin, "run", "--db", db, demoGraph(t))
			cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL="+proto,
				"OTEL_SERVICE_NAME="+service, "OTEL_TRACES_EXPORTER=otlp")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("noderun run: %v\n%s", err, out)
			}

			// The independent count: the journal's.
			ctx := context.Background()
			j, err := journal.OpenReadOnly(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			runs, err := j.Runs(ctx, 0)
			if err != nil || len(runs) != 1 {
				t.Fatalf("runs: %v %v", runs, err)
			}
			runID := runs[0].ID
			atts, err := j.Attempts(ctx, runID, "")
			if err != nil {
				t.Fatal(err)
			}
			evs, err := j.Events(ctx, runID, journal.EventFilter{AfterSeq: -1, Kinds: []string{journal.KindDiagnostic}})
			if err != nil {
				t.Fatal(err)
			}
			var codes []string // the nodes' diagnostics; the run's own are not a node's events
			for _, e := range evs {
				if e.NodeID != "" {
					codes = append(codes, e.Code)
				}
			}
			nodes, err := j.Nodes(ctx, runID)
			if err != nil {
				t.Fatal(err)
			}
			if len(atts) < len(nodes) || len(codes) == 0 {
				t.Fatalf("the demo should have recovered from faults: %d attempts, %d node diagnostics", len(atts), len(codes))
			}

			want := 1 + len(nodes) + len(atts)
			got := traces(t, service, func(ts []jaegerTrace) bool { return len(ts) == 1 && len(ts[0].Spans) >= want })
			tr := got[0]
			if len(tr.Spans) != want {
				t.Fatalf("trace has %d spans, want %d (1 run, %d nodes, %d attempts)", len(tr.Spans), want, len(nodes), len(atts))
			}
			var runSpans, nodeSpans, attemptSpans int
			var evCodes []string
			for _, s := range tr.Spans {
				for _, l := range s.Logs {
					if c, ok := tagOf(l.Fields, "noderun.code"); ok {
						evCodes = append(evCodes, c.(string))
					}
				}
				switch {
				case strings.HasPrefix(s.OperationName, "run "):
					runSpans++
					if id, _ := tagOf(s.Tags, "noderun.run.id"); id != runID {
						t.Errorf("run span: noderun.run.id %v, want %s", id, runID)
					}
				case strings.HasPrefix(s.OperationName, "node "):
					nodeSpans++
				case strings.HasPrefix(s.OperationName, "chat "):
					attemptSpans++
					for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system", "gen_ai.request.model",
						"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "noderun.attempt"} {
						if _, ok := tagOf(s.Tags, k); !ok {
							t.Errorf("attempt span %s: no %s (tags %v)", s.OperationName, k, s.Tags)
						}
					}
					if op, _ := tagOf(s.Tags, "gen_ai.operation.name"); op != "chat" {
						t.Errorf("attempt span: gen_ai.operation.name %v", op)
					}
					if n, _ := tagOf(s.Tags, "gen_ai.usage.output_tokens"); n == nil || n.(float64) <= 0 {
						t.Errorf("attempt span %s: gen_ai.usage.output_tokens %v", s.OperationName, n)
					}
				default:
					t.Errorf("unexpected span %q", s.OperationName)
				}
				if !strings.HasPrefix(s.OperationName, "run ") && len(s.References) == 0 {
					t.Errorf("span %s has no parent", s.OperationName)
				}
			}
			if runSpans != 1 || nodeSpans != len(nodes) || attemptSpans != len(atts) {
				t.Errorf("spans: %d run, %d node, %d attempt; want 1, %d, %d (the journal's)", runSpans, nodeSpans, attemptSpans, len(nodes), len(atts))
			}
			slices.Sort(codes)
			slices.Sort(evCodes)
			if !slices.Equal(codes, evCodes) {
				t.Errorf("span events' codes %v,\nthe journal's diagnostics %v", evCodes, codes)
			}
			// The Responses node re-attached by id: its attempt names the response.
			var ids int
			for _, s := range tr.Spans {
				if _, ok := tagOf(s.Tags, "gen_ai.response.id"); ok {
					ids++
				}
			}
			if ids == 0 {
				b, _ := json.Marshal(tr)
				t.Errorf("no attempt span has gen_ai.response.id: %s", b)
			}
		})
	}
}

// TestNoTracesWithoutEnvironment: without OTEL_* variables nothing is
// exported and the run is as before (the telemetry is not even built).
func TestNoTracesWithoutEnvironment(t *testing.T) {
	bin := noderun.Path(t)
	db := filepath.Join(t.TempDir(), "run.db")
	cmd := exec.Command(bin, "run", "--db", db, demoGraph(t))
	cmd.Env = withoutOTEL()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("noderun run: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "traces") || strings.Contains(string(out), "metrics on") {
		t.Errorf("a run without telemetry mentions it:\n%s", out)
	}
}

// TestTemporalTraceFromRunToWorkers: `run --temporal` and a `worker`, each
// a process of its own with the OTEL_* variables set, make one trace in
// Jaeger: the client's run span, the interceptor's workflow and activity
// spans, and the worker's node and attempt spans (as many as the worker's
// journal has attempts), the worker's under the activities. The worker's
// /metrics counts each node once.
func TestTemporalTraceFromRunToWorkers(t *testing.T) {
	startJaeger(t)
	hostPort := startTemporal(t)
	bin := noderun.Path(t)
	dir := t.TempDir()
	stamp := time.Now().UnixNano()
	queue := fmt.Sprintf("traces-%d", stamp)
	client, workerSvc := fmt.Sprintf("noderun-client-%d", stamp), fmt.Sprintf("noderun-worker-%d", stamp)
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + jaeger.otlp.grpc, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}

	wdb := filepath.Join(dir, "worker.db")
	w := exec.Command(bin, "worker", "--temporal", hostPort, "--task-queue", queue, "--db", wdb, "--metrics", "127.0.0.1:0")
	w.Env = append(append(os.Environ(), otel...), "OTEL_SERVICE_NAME="+workerSvc)
	stderr, err := w.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = w.Process.Signal(syscall.SIGINT) // a worker exports its last spans as it stops
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = w.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := lines(stderr)
	murl := metricsURL(ctx, t, out)
	go func() {
		for range out {
		}
	}()

	run := exec.CommandContext(ctx, bin, "run", "--temporal", hostPort, "--task-queue", queue, demoGraph(t))
	run.Env = append(append(os.Environ(), otel...), "OTEL_SERVICE_NAME="+client)
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("noderun run --temporal: %v\n%s", err, b)
	}
	body := scrape(t, murl)
	stop()

	j, err := journal.OpenReadOnly(context.Background(), wdb)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	runs, err := j.Runs(context.Background(), 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("worker's runs: %v %v", runs, err)
	}
	atts, err := j.Attempts(context.Background(), runs[0].ID, "")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := j.Nodes(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}

	want := func(tr jaegerTrace) (runs, nodeSpans, attempts, activities int, services map[string]bool) {
		services = map[string]bool{}
		for _, s := range tr.Spans {
			services[tr.Processes[s.ProcessID].ServiceName] = true
			switch {
			case strings.HasPrefix(s.OperationName, "run "):
				runs++
			case strings.HasPrefix(s.OperationName, "node "):
				nodeSpans++
			case strings.HasPrefix(s.OperationName, "chat "):
				attempts++
			case strings.HasPrefix(s.OperationName, "RunActivity"):
				activities++
			}
		}
		return
	}
	got := traces(t, client, func(ts []jaegerTrace) bool {
		if len(ts) != 1 {
			return false
		}
		// Wait for every span the checks below count: the client exports
		// the run span when the run ends, in a batch of its own, and Jaeger
		// has answered with the workers' spans before it had that one.
		r, n, a, act, _ := want(ts[0])
		return r == 1 && n == len(nodes) && a == len(atts) && act >= len(nodes)
	})
	r, n, a, act, services := want(got[0])
	if r != 1 || n != len(nodes) || a != len(atts) || act < len(nodes) || !services[client] || !services[workerSvc] {
		t.Errorf("one trace with %d run span, %d node spans, %d attempt spans, %d activity spans, services %v; want 1, %d, %d (the worker's journal), >= %d, both",
			r, n, a, act, services, len(nodes), len(atts), len(nodes))
	}
	if c := strings.Count(body, "\nnoderun_node_calls_total{"); c == 0 || !strings.Contains(body, fmt.Sprintf(`noderun_nodes_settled_total{state="done"} %d`, len(nodes))) {
		t.Errorf("worker /metrics does not count %d nodes done:\n%s", len(nodes), body)
	}
}

// scrape GETs a /metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
