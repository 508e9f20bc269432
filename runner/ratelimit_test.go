package runner

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// refuseFirst stands before the simulator: the first request to path gets
// refuse's answer, every other goes through. It records when each request
// to path came.
type refuseFirst struct {
	mu    sync.Mutex
	times []time.Time
}

func (rf *refuseFirst) start(t *testing.T, srv *sim.Server, path string, refuse func(w http.ResponseWriter)) string {
	t.Helper()
	target, err := url.Parse(srv.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == path {
			rf.mu.Lock()
			rf.times = append(rf.times, time.Now())
			first := len(rf.times) == 1
			rf.mu.Unlock()
			if first {
				_, _ = io.Copy(io.Discard, r.Body)
				refuse(w)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

func (rf *refuseFirst) requests() []time.Time {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	return append([]time.Time(nil), rf.times...)
}

// Issue 43: a 429 without Retry-After whose anthropic-ratelimit headers say
// the requests are spent (remaining 0) until a reset 3 s away: the node is
// parked and its request goes again at the reset, not before (it went after
// ~1 s, earning another 429). Over real sockets, the simulator answering
// the request that goes again.
func TestAnthropicWaitsForTheSpentLimitsReset(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 20})
	var rf refuseFirst
	var reset time.Time
	base := rf.start(t, srv, "/v1/messages", func(w http.ResponseWriter) {
		reset = time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second) // RFC 3339 to the second, as Anthropic sends it
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("anthropic-ratelimit-requests-limit", "50")
		h.Set("anthropic-ratelimit-requests-remaining", "0")
		h.Set("anthropic-ratelimit-requests-reset", reset.UTC().Format(time.RFC3339))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your per-minute rate limit"}}`)
	})
	g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: patient\nproviders:\n  p: {kind: anthropic, base_url: '%s', model: sim}\nnodes:\n  - {id: a, prompt: hi}\n", base))
	res := runGraph(t, g, openJournal(t))
	if n := res.Nodes[0]; n.State != journal.NodeCompleted {
		t.Fatalf("node %s: %v", n.State, n.Err)
	}
	times := rf.requests()
	if len(times) != 2 {
		t.Fatalf("%d requests, want the refused one and one at the reset", len(times))
	}
	if times[1].Before(reset) {
		t.Errorf("sent again %s before the announced reset (%s after the 429)", reset.Sub(times[1]), times[1].Sub(times[0]).Round(time.Millisecond))
	}
}

// Issue 43: a Gemini 429 whose body says when to come back
// (google.rpc.RetryInfo retryDelay "3s", no Retry-After header): the node
// is parked and its request goes again 3 s later, not before.
func TestGeminiWaitsForRetryInfo(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 20})
	var rf refuseFirst
	base := rf.start(t, srv, "/v1beta/interactions", func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[`+
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},`+
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`)
	})
	g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: patient\nproviders:\n  p: {kind: gemini, base_url: '%s', model: sim}\nnodes:\n  - {id: a, prompt: hi}\n", base))
	res := runGraph(t, g, openJournal(t))
	if n := res.Nodes[0]; n.State != journal.NodeCompleted {
		t.Fatalf("node %s: %v", n.State, n.Err)
	}
	times := rf.requests()
	if len(times) != 2 {
		t.Fatalf("%d creates, want the refused one and one after its retryDelay", len(times))
	}
	if d := times[1].Sub(times[0]); d < 3*time.Second {
		t.Errorf("sent again %s after a 429 that said retryDelay 3s", d.Round(time.Millisecond))
	}
}
