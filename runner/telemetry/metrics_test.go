package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/telemetry"
)

// TestDemoMetricsEqualDiagnose runs the demo with --metrics and
// --metrics-linger, scrapes /metrics once the run has ended, has promtool
// check it, and compares its counters with `noderun diagnose --json`: the
// same attempts, recovery steps and faults by name, tokens and time.
func TestDemoMetricsEqualDiagnose(t *testing.T) {
	promtool := testkit.Tool(t, "promtool")
	bin := noderun.Path(t)
	db := filepath.Join(t.TempDir(), "run.db")
	cmd := exec.Command(bin, "run", "--db", db, "--metrics", "127.0.0.1:0", "--metrics-linger", "2m", demoGraph(t))
	cmd.Env = withoutOTEL()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := lines(stderr)
	url := metricsURL(ctx, t, out)
	if _, seen, err := waitLine(ctx, out, "stays up"); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(seen, "\n"))
	}
	go func() { // keep the pipe drained
		for range out {
		}
	}()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}

	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// Ctrl-C ends the linger; the run completed: exit 0.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("noderun run after SIGINT in the linger: %v (want exit 0: the run completed)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("noderun run did not stop lingering on SIGINT")
	}

	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range telemetry.MetricNames {
		if fams[name] == nil {
			t.Errorf("metric %s is not in the scrape", name)
		}
	}

	dj, err := exec.Command(bin, "diagnose", "last", "--db", db, "--json").Output()
	if err != nil {
		t.Fatalf("diagnose: %v", err)
	}
	var d ledger.Account
	if err := json.Unmarshal(dj, &d); err != nil {
		t.Fatal(err)
	}
	tot := d.Totals
	if tot.Attempts == 0 || tot.Steps() == 0 {
		t.Fatalf("the demo should have recovered: %s", dj)
	}
	eq := func(what string, got float64, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: /metrics %v, diagnose --json %v", what, got, want)
		}
	}
	eq("attempts", sum(fams, "noderun_attempts_total", nil), float64(tot.Attempts))
	eq("node calls", sum(fams, "noderun_node_calls_total", nil), float64(len(d.Nodes)))
	for name, n := range tot.RecoverySteps {
		eq("recovery step "+string(name), sum(fams, "noderun_recovery_steps_total", map[string]string{"name": string(name)}), float64(n))
	}
	eq("recovery steps", sum(fams, "noderun_recovery_steps_total", nil), float64(tot.Steps()))
	for name, n := range tot.Faults {
		eq("fault "+string(name), sum(fams, "noderun_faults_total", map[string]string{"name": string(name)}), float64(n))
	}
	tk := tot.Tokens
	for kind, n := range map[string]int{"generated": tk.Generated, "needed": tk.Needed, "regenerated": tk.Regenerated,
		"preserved": tk.Preserved, "unfinished": tk.Unfinished, "input": tk.Input, "reasoning": tk.Reasoning, "from_cache": tot.Saved.Output} {
		eq("tokens "+kind, sum(fams, "noderun_tokens_total", map[string]string{"kind": kind}), float64(n))
	}
	for kind, ms := range map[string]int64{"wall": tot.WallMS, "useful": tot.UsefulMS, "lost": tot.TimeLostMS, "quota_wait": tot.QuotaWaitMS} {
		got := sum(fams, "noderun_node_seconds_total", map[string]string{"kind": kind})
		eq("seconds "+kind, math.Round(got*1000), float64(ms))
	}
	eq("nodes done", sum(fams, "noderun_nodes_settled_total", map[string]string{"state": "done"}), float64(len(d.Nodes)))
	eq("streams in flight after the run", sum(fams, "noderun_streams_in_flight", nil), 0)
	if n := sum(fams, "noderun_journal_write_seconds", nil); n == 0 {
		t.Error("noderun_journal_write_seconds observed no commit")
	}
}

// sum adds the values of the family's samples whose labels include want
// (a histogram: its count).
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var v float64
next:
	for _, m := range f.GetMetric() {
		for k, w := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == w {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}

// TestDashboardQueriesExistingMetrics: every metric the committed Grafana
// dashboard queries is one noderun exports (TestDemoMetricsEqualDiagnose
// checks that each of those is in a real scrape), and the dashboard is
// valid JSON with panels.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatal("docs/grafana-dashboard.json: no title or no panels")
	}
	name := regexp.MustCompile(`noderun_[a-z_]+`)
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(m, suffix); ok && slices.Contains(telemetry.MetricNames, base) {
						m = base
					}
				}
				queried[m] = true
				if !slices.Contains(telemetry.MetricNames, m) {
					t.Errorf("panel %q queries %s, which noderun does not export", p.Title, m)
				}
			}
		}
	}
	for _, m := range telemetry.MetricNames {
		if !queried[m] {
			t.Logf("the dashboard does not show %s", m)
		}
	}
	// The docs name every metric too.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range telemetry.MetricNames {
		if !strings.Contains(string(doc), m) {
			t.Errorf("docs/observability.md does not name %s", m)
		}
	}
}
