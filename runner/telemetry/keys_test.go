package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
)

// Issue 42, point 3: no 12 characters of an API key anywhere a run writes
// or prints, when a server echoes the key into its error bodies with the key
// straddling the 8 KiB cut of the body kept at every offset, glued to word
// characters on both sides. One node per offset; the key is looked for in
// the journal's file, the run's stdout and stderr, the report, events
// --json, show and diagnose --json, the OTLP export the run sent, and
// /metrics scraped after the run.
func TestNoPieceOfAKeyAnywhere(t *testing.T) {
	const key = "sk-proj-Qx7Lm2Vb9Ns4Kd8Hf3Jw6Pz1Rt5Yc0GgAaUe"
	const cut = 8 << 10 // provider/guard.MaxErrorBody
	offsets := []int{0, 100, cut - len(key) - 3}
	for o := cut - len(key) - 2; o <= cut+2; o++ {
		offsets = append(offsets, o) // the key's first byte at o
	}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.Header.Get("X-Noderun-Node"), "n"))
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest) // deterministic: not retried
		o := offsets[i]
		_, _ = io.WriteString(w, strings.Repeat("f", max(o-2, 0))+"ab"[:min(o, 2)]+got+"cdZ9"+strings.Repeat("g", 40))
	}))
	defer echo.Close()
	var otlpMu sync.Mutex
	var otlp bytes.Buffer
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("otlp: %v", err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		otlpMu.Lock()
		otlp.Write(b)
		otlpMu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	dir := t.TempDir()
	var src strings.Builder
	fmt.Fprintf(&src, "name: keys\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s/v1, api_key_env: NR_KEY_TEST, model: m}\nnodes:\n", echo.URL)
	for i := range offsets {
		fmt.Fprintf(&src, "  - {id: n%d, prompt: hi}\n", i)
	}
	graph, db := filepath.Join(dir, "g.yaml"), filepath.Join(dir, "j.db")
	if err := os.WriteFile(graph, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(withoutOTEL(), "NR_KEY_TEST="+key, "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	cmd := exec.Command(noderun.Path(t), "run", "--db", db, "--metrics", "127.0.0.1:0", "--metrics-linger", "1m", graph)
	cmd.Env = env
	var stdout testkit.Buffer
	cmd.Stdout = &stdout
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := lines(stderrPipe)
	url := metricsURL(ctx, t, out)
	_, seen, err := waitLine(ctx, out, "stays up")
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(seen, "\n"))
	}
	stderr := strings.Join(seen, "\n")
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	metricsBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_ = cmd.Process.Signal(os.Interrupt) // ends the linger
	for l := range out {
		stderr += "\n" + l
	}
	<-exited
	if !strings.Contains(stdout.String(), "failed") {
		t.Fatalf("the run did not fail:\n%s\n%s", stdout.String(), stderr)
	}

	surfaces := map[string]string{"stdout": stdout.String(), "stderr": stderr, "/metrics": string(metricsBody)}
	otlpMu.Lock()
	surfaces["OTLP export"] = otlp.String()
	otlpMu.Unlock()
	if len(surfaces["OTLP export"]) == 0 {
		t.Error("the run exported no spans: the OTLP surface tests nothing")
	}
	dbBytes, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	surfaces["journal file"] = string(dbBytes)
	for _, args := range [][]string{{"report", "last", "-o", "-"}, {"events", "last", "--json"}, {"diagnose", "last", "--json"},
		{"show", "last", "n0"}, {"show", "last", fmt.Sprintf("n%d", len(offsets)-3), "--json"}} {
		c := exec.Command(noderun.Path(t), append(args, "--db", db)...)
		c.Env = withoutOTEL()
		b, _ := c.CombinedOutput()
		surfaces[strings.Join(args, " ")] = string(b)
	}
	if n := strings.Count(surfaces["events last --json"], "[redacted]"); n < len(offsets)-4 {
		t.Errorf("events --json masks the key %d times, want about once per node (%d): the server's echo tests nothing", n, len(offsets))
	}
	for name, text := range surfaces {
		for i := 0; i+12 <= len(key); i++ {
			if j := strings.Index(text, key[i:i+12]); j >= 0 {
				t.Errorf("%s holds %q, 12 characters of the key: …%s…", name, key[i:i+12], text[max(j-40, 0):min(j+52, len(text))])
				break
			}
		}
	}
}
