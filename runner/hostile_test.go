package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// Issue 15: a hostile or broken server, over real sockets. Whatever it
// sends, the node ends with the right diagnostic, memory stays bounded (peak
// heap, from the runtime's metrics), no API key reaches the journal or the
// log, and no node completes with garbage.

const hostileKey = "sk-hostile-0123456789abcdefghij" // the key the provider sends

// heapLimit is far above what a bounded run needs (one 32 MiB event, some
// copies of it) and far below what the unbounded one took (1.5 GB).
const heapLimit = 400 << 20

// peakHeap samples the live heap until stop is called and returns its
// maximum; past heapLimit it cancels the run instead of letting it eat the
// machine.
func peakHeap(cancel context.CancelFunc) (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
				if v > heapLimit {
					cancel()
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// endless writes b forever (until the client goes away).
func endless(w io.Writer, b []byte) {
	for {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

func TestHostileServer(t *testing.T) {
	// Never parallel: peakHeap reads the process's heap, which other tests
	// beside it would fill (under -short, in parallel, it cancelled a run
	// that was within its bound).
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed: %s %s", r.Method, r.URL)
	}))
	defer other.Close()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	piece := strings.Repeat("y", 1000)
	deltas := bytes.Repeat(fmt.Appendf(nil, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}\n\n", piece), 64)
	sse := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	cases := []struct {
		name    string
		kind    string // provider kind
		handler http.HandlerFunc
		code    diagnostics.Code
		class   diagnostics.Class
		max     int    // requests at most (1: not retried)
		says    string // in the node's error
		profile string // default: ci
	}{
		{"chat_endless_data_line", "openai", func(w http.ResponseWriter, r *http.Request) {
			sse(w)
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"")
			endless(w, chunk)
			// The default profile: on a loaded machine reading 32 MiB under the
			// race detector can outlast ci's 2 s idle window, which would cut it first.
		}, diagnostics.LimitExceeded, diagnostics.ClassLimit, 1, "longer than 32 MiB", "default"},
		{"responses_endless_event", "responses", func(w http.ResponseWriter, r *http.Request) {
			sse(w)
			_, _ = io.WriteString(w, "data: ")
			endless(w, chunk)
			// The default profile: reading 32 MiB under the race detector
			// outlasts ci's 1 s poll_after, which would cut it first.
		}, diagnostics.LimitExceeded, diagnostics.ClassLimit, 1, "longer than 32 MiB", "default"},
		// Issue 42: valid deltas without end, each a small event: the node
		// fails at its answer's bound (32 MiB by default), not retried,
		// what it journaled before kept; memory and journal stay bounded.
		{"chat_endless_valid_deltas", "openai", func(w http.ResponseWriter, r *http.Request) {
			sse(w)
			endless(w, deltas)
		}, diagnostics.LimitExceeded, diagnostics.ClassLimit, 1, "its answer passed 32MiB (max_output_bytes)", "default"},
		{"responses_endless_valid_deltas", "responses", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/responses" { // the response given up is cancelled (NR208): no more generated for it
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"resp_1","object":"response","status":"cancelled","output":[]}`)
				return
			}
			sse(w)
			_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n")
			for i := 1; ; i++ {
				if _, err := fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"%s\"}\n\n", i, piece); err != nil {
					return
				}
			}
		}, diagnostics.LimitExceeded, diagnostics.ClassLimit, 2, "its answer passed 32MiB (max_output_bytes)", "default"},
		{"chat_500_with_a_huge_body", "openai", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"`)
			endless(w, chunk)
		}, diagnostics.BudgetExhausted, diagnostics.ClassServer, 4, "truncated: the body was more than", ""},
		{"responses_500_with_a_huge_body", "responses", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			endless(w, chunk)
		}, diagnostics.BudgetExhausted, diagnostics.ClassServer, 4, "truncated", ""},
		// Issue 42: the key straddles the cut of the error body kept (8 KiB):
		// what is left of it is still a piece of the key, and masked.
		{"chat_500_key_straddles_the_cut", "openai", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, strings.Repeat("f", 8170)+hostileKey+" and more")
		}, diagnostics.BudgetExhausted, diagnostics.ClassServer, 4, "[redacted] … [truncated", ""},
		{"chat_401_echoes_the_key", "openai", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"bad key: %s (Authorization: %s)","code":"invalid_api_key"}}`, hostileKey, r.Header.Get("Authorization"))
		}, diagnostics.DeterministicError, diagnostics.ClassDeterministic, 1, "[redacted]", ""},
		{"responses_500_echoes_the_key", "responses", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error":{"message":"upstream said: %s"}}`, r.Header.Get("Authorization"))
		}, diagnostics.BudgetExhausted, diagnostics.ClassServer, 4, "[redacted]", ""},
		{"chat_html_portal", "openai", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<!doctype html><title>Sign in to the hotel wifi</title>")
		}, diagnostics.ProtocolViolation, diagnostics.ClassProtocol, 1, `"text/html; charset=utf-8"`, ""},
		{"responses_html_portal", "responses", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>portal</html>")
		}, diagnostics.ProtocolViolation, diagnostics.ClassProtocol, 1, "<html>portal", ""},
		{"chat_undecodable_event", "openai", func(w http.ResponseWriter, r *http.Request) {
			sse(w)
			_, _ = io.WriteString(w, "data: {\"choices\": [nonsense\n\n")
		}, diagnostics.ProtocolViolation, diagnostics.ClassProtocol, 1, "invalid character", ""},
		{"chat_redirect_elsewhere", "openai", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
		}, diagnostics.ProtocolViolation, diagnostics.ClassProtocol, 1, "redirected to " + other.URL, ""},
		{"responses_redirect_elsewhere", "responses", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/v1/responses", http.StatusPermanentRedirect)
		}, diagnostics.ProtocolViolation, diagnostics.ClassProtocol, 1, "redirected to " + other.URL, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.name, "valid_deltas") {
				soak(t, "TestAnswerBounds (the same bound on an answer, at a few KiB rather than 32 MiB)")
			}
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				c.handler(w, r)
			}))
			defer srv.Close()
			prof := c.profile
			if prof == "" {
				prof = "ci"
			}
			g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: %s\nproviders:\n  p: {kind: %s, base_url: %s/v1, api_key_env: NR_KEY, model: m}\nnodes:\n  - {id: a, prompt: hi}\n",
				prof, c.kind, srv.URL))
			dir := t.TempDir()
			db := filepath.Join(dir, "j.db")
			j := testkit.OpenJournal(t, db)
			logs := new(testkit.Buffer)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stop := peakHeap(cancel)
			res, err := Run(ctx, g, Options{Journal: j, Getenv: func(k string) string {
				if k == "NR_KEY" {
					return hostileKey
				}
				return ""
			}, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			peak := stop()
			if err != nil {
				t.Fatal(err)
			}
			ds := diagRecs(t, j, res.RunID, "a")
			_ = j.Close()
			t.Logf("peak heap %d MiB, %d request(s); journal:\n%s", peak>>20, requests.Load(), dumpDiags(ds))
			if peak > heapLimit {
				t.Errorf("peak heap %d MiB: not bounded", peak>>20)
			}
			n := res.Nodes[0]
			if n.State != journal.NodeFailed {
				t.Fatalf("node %s: a hostile answer must not complete a node (output %d bytes)", n.State, len(n.Output))
			}
			if got := diagnostics.Classify(n.Err).Class; got != c.class {
				t.Errorf("class %s, want %s", got, c.class)
			}
			if count(ds, c.code) < 1 {
				t.Errorf("no %s in the journal", c.code)
			}
			if r := requests.Load(); r > int64(c.max) {
				t.Errorf("%d requests, want at most %d", r, c.max)
			}
			if !strings.Contains(n.Reason, c.says) {
				t.Errorf("the node's error does not say %q:\n%s", c.says, n.Reason)
			}
			// Bounded everywhere it is written: the error, every diagnostic, the log.
			if len(n.Reason) > 16<<10 {
				t.Errorf("the node's error is %d bytes", len(n.Reason))
			}
			for _, d := range ds {
				if len(d.Message) > 16<<10 || len(fmt.Sprint(d.Attrs)) > 32<<10 {
					t.Errorf("%s diagnostic of %d bytes", d.Code, len(d.Message)+len(fmt.Sprint(d.Attrs)))
				}
			}
			logged := logs.String()
			if len(logged) > 256<<10 {
				t.Errorf("%d bytes logged", len(logged))
			}
			// No key anywhere, nor 12 characters of it together: the log,
			// the node's error, and every byte of the journal's files.
			secret := []byte(hostileKey)
			piece := func(b []byte) string {
				for i := 0; i+12 <= len(hostileKey); i++ {
					if bytes.Contains(b, []byte(hostileKey[i:i+12])) {
						return hostileKey[i : i+12]
					}
				}
				return ""
			}
			if p := piece([]byte(logged + n.Reason)); p != "" {
				t.Errorf("%q of the key is in the log or the node's error", p)
			}
			size := 0
			for _, f := range []string{db, db + "-wal"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				if bytes.Contains(b, secret) {
					t.Errorf("the key is in %s", filepath.Base(f))
				}
				if p := piece(b); p != "" {
					t.Errorf("%q of the key is in %s", p, filepath.Base(f))
				}
				size += len(b)
			}
			// The journal holds at most the bound (32 MiB of output), twice
			// over (chunks and the WAL), and overhead.
			if size > 80<<20 {
				t.Errorf("the journal's files are %d MiB", size>>20)
			}
			if c.code == diagnostics.LimitExceeded && strings.Contains(c.name, "valid_deltas") {
				out, err := journal.OpenReadOnly(context.Background(), db)
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				kept, err := out.RebuildOutput(context.Background(), res.RunID, "a", 1)
				if err != nil || len(kept) < 31<<20 || len(kept) > 32<<20 {
					t.Errorf("the partial answer journaled is %d bytes (%v), want the bound's worth, up to 32 MiB", len(kept), err)
				}
			}
		})
	}
}
