package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// chatGraph is a graph of independent chat nodes against baseURL.
func chatGraph(t *testing.T, baseURL string, nodes ...string) *Graph {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: t\nprofile: ci\nproviders:\n  p:\n    kind: openai\n    base_url: %s\n    model: sim\nnodes:\n", baseURL)
	for _, n := range nodes {
		fmt.Fprintf(&b, "  - id: %s\n    prompt: write about %s\n", n, n)
	}
	return parseTestGraph(t, b.String())
}

func parseTestGraph(t *testing.T, src string) *Graph {
	t.Helper()
	path := filepath.Join(t.TempDir(), "graph.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := LoadGraph(path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func openJournal(t *testing.T) *journal.Journal {
	t.Helper()
	return testkit.TempJournal(t, "j.db")
}

func runGraph(t *testing.T, g *Graph, j *journal.Journal) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, g, Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runSimGraph runs g on the simulator srv (as `run --sim` does), failing t
// on a run error.
func runSimGraph(t *testing.T, g *Graph, j *journal.Journal, srv *sim.Server) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, g, Options{Journal: j, Sim: &SimOptions{Server: srv}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// codes lists the diagnostic codes journaled for a node, in order.
func codes(t *testing.T, j *journal.Journal, run, node string) []string {
	t.Helper()
	var out []string
	for _, d := range diagRecs(t, j, run, node) {
		out = append(out, d.Code)
	}
	return out
}

// diagRec is one journaled diagnostic, as `noderun events` shows it.
type diagRec struct {
	Code    string
	Attempt int
	Message string
	Attrs   map[string]any
	Time    time.Time
}

// diagRecs returns the node's journaled diagnostics, in order.
func diagRecs(t *testing.T, j *journal.Journal, run, node string) []diagRec {
	t.Helper()
	evs, err := j.Events(context.Background(), run, journal.EventFilter{Node: node, Kinds: []string{"diagnostic"}, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]diagRec, 0, len(evs))
	for _, e := range evs {
		var p struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Attrs   map[string]any `json:"attrs"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("diagnostic payload %q: %v", e.Payload, err)
		}
		if p.Code != e.Code {
			t.Fatalf("diagnostic event code %q, payload code %q", e.Code, p.Code)
		}
		out = append(out, diagRec{Code: e.Code, Attempt: e.Attempt, Message: p.Message, Attrs: p.Attrs, Time: e.Time})
	}
	return out
}

func has(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, x := range list {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

// undisturbed is the output of the node on a simulator without faults.
func undisturbed(t *testing.T, node string) string {
	t.Helper()
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200})
	res := runGraph(t, chatGraph(t, srv.BaseURL(), node), openJournal(t))
	if res.Status != journal.RunCompleted {
		t.Fatalf("undisturbed run %s: %+v", res.Status, res.Nodes)
	}
	return res.Nodes[0].Output
}

// The acceptance test of the chat path: every kind of mid-stream drop leaves
// the node completed with exactly the undisturbed output, and the journal
// shows the disconnect and the retry under their codes.
func TestChatNodeSurvivesDisconnects(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	want := undisturbed(t, "essay")
	if len(want) < 500 {
		t.Fatalf("undisturbed output too short to test with: %d bytes", len(want))
	}
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut} {
		for _, after := range []int{0, 1, 57, 199} {
			t.Run(fmt.Sprintf("%s_after_%d", kind, after), func(t *testing.T) {
				srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200, Faults: []sim.Fault{
					{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: kind, AfterEvents: after}}})
				j := openJournal(t)
				res := runGraph(t, chatGraph(t, srv.BaseURL(), "essay"), j)
				n := res.Nodes[0]
				if n.State != journal.NodeCompleted {
					t.Fatalf("node %s: %v", n.State, n.Err)
				}
				if n.Output != want {
					t.Fatalf("output differs from the undisturbed run:\n got %d bytes %q\nwant %d bytes %q", len(n.Output), head(n.Output), len(want), head(want))
				}
				got := codes(t, j, res.RunID, "essay")
				if !has(got, diagnostics.DisconnectDetected.ID, diagnostics.RetryStarted.ID, diagnostics.Recovered.ID) {
					t.Errorf("journal codes %v lack disconnect/retry/recovered", got)
				}
				if st := srv.Stats(); st.Requests[sim.EndpointChat] != 2 {
					t.Errorf("chat requests = %d, want 2 (one drop, one retry)", st.Requests[sim.EndpointChat])
				}
				// The failed attempt's partial output stays in the journal, apart from the output.
				atts, err := j.Attempts(context.Background(), res.RunID, "essay")
				if err != nil || len(atts) != 2 || atts[0].Outcome != "error" || atts[0].ErrClass != diagnostics.ClassDisconnect {
					t.Fatalf("attempts = %+v, %v", atts, err)
				}
				part, err := j.RebuildOutput(context.Background(), res.RunID, "essay", 1)
				if err != nil || !strings.HasPrefix(want, part) {
					t.Errorf("attempt 1 journal holds %q, not a prefix of the output (%v)", head(part), err)
				}
				full, err := j.RebuildOutput(context.Background(), res.RunID, "essay", 2)
				if err != nil || full != want {
					t.Errorf("output rebuilt from attempt 2's deltas differs (%v)", err)
				}
			})
		}
	}
}

func TestChatNodeIdleSilenceIsADisconnect(t *testing.T) {
	t.Parallel()
	want := undisturbed(t, "essay")
	// ci's idle window is 2s: a 30s silence on the first request must be cut, not waited out.
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200, Faults: []sim.Fault{
		{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultSilence, AfterEvents: 10, Duration: 30 * time.Second}}})
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, chatGraph(t, srv.BaseURL(), "essay"), j)
	if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != want {
		t.Fatalf("node %s (%v), output equal: %v", n.State, n.Err, n.Output == want)
	}
	if took := time.Since(start); took > 25*time.Second {
		t.Errorf("took %s: the silence was waited out instead of cut", took)
	}
	if got := codes(t, j, res.RunID, "essay"); !has(got, diagnostics.IdleTimeout.ID, diagnostics.RetryStarted.ID) {
		t.Errorf("codes %v lack idle timeout + retry", got)
	}
}

func TestOutageFailsWithinDeadline(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1})
	res, j := runOutage(t, srv, chatGraph(t, srv.BaseURL(), "a"))
	got := codes(t, j, res.RunID, "a")
	if !has(got, diagnostics.ConnectFailed.ID, diagnostics.NodeFailed.ID) {
		t.Errorf("codes %v lack connect_failed and node_failed", got)
	}
}

// runOutage runs g's single node with nothing listening at srv, and checks
// that it fails as connect_failed within the ci profile's deadline.
func runOutage(t *testing.T, srv *sim.Server, g *Graph) (*Result, *journal.Journal) {
	t.Helper()
	if err := srv.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, g, j)
	took := time.Since(start)
	n := res.Nodes[0]
	if n.State != journal.NodeFailed || res.Status != journal.RunFailed {
		t.Fatalf("node %s, run %s", n.State, res.Status)
	}
	var ne *NodeError
	if !errors.As(n.Err, &ne) || ne.Class != diagnostics.ClassConnect {
		t.Fatalf("error = %v, want a connect_failed NodeError", n.Err)
	}
	if deadline := 5 * time.Second; took > deadline { // the ci profile's deadline
		t.Errorf("outage took %s to fail, more than the profile's deadline %s", took, deadline)
	}
	return res, j
}

func TestUnauthorizedIsNotRetried(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: sim.FaultStatus, Status: 401}}})
	j := openJournal(t)
	res := runGraph(t, chatGraph(t, srv.BaseURL(), "a"), j)
	n := res.Nodes[0]
	if n.State != journal.NodeFailed {
		t.Fatalf("node %s", n.State)
	}
	if st := srv.Stats(); st.Requests[sim.EndpointChat] != 1 {
		t.Errorf("401 sent %d requests, want exactly 1", st.Requests[sim.EndpointChat])
	}
	msg := n.Err.Error()
	for _, want := range []string{"401", "authentication", "not", diagnostics.DeterministicError.ID} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

// Without pacing, a 429 is retried after its Retry-After, in both forms:
// delay-seconds and HTTP-date (with pacing it parks: TestA429ParksTheNode).
func TestRateLimitWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	want := undisturbed(t, "essay")
	for _, form := range []string{"seconds", "http-date"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel() // each waits out its Retry-After
			ra := "2"
			if form == "http-date" {
				ra = time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) // whole seconds: waits 2-3s
			}
			srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200, Faults: []sim.Fault{
				{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultStatus, Status: 429, RetryAfter: ra}}})
			start := time.Now()
			res, j := runOwn(t, chatGraph(t, srv.BaseURL(), "essay"), Options{Quota: QuotaOptions{Off: true}})
			if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != want {
				t.Fatalf("node %s (%v)", n.State, n.Err)
			}
			// ci's own backoff is at most 50ms: only Retry-After explains a wait of over a second.
			if took := time.Since(start); took < 1500*time.Millisecond {
				t.Errorf("retried after %s, before Retry-After %q", took, ra)
			}
			if got := codes(t, j, res.RunID, "essay"); !has(got, diagnostics.RateLimitWait.ID, diagnostics.RetryStarted.ID) {
				t.Errorf("codes %v lack rate_limit_wait + retry_started", got)
			}
		})
	}
}

func TestRetryBudgetIsBounded(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: sim.FaultClose, AfterEvents: 3}}})
	j := openJournal(t)
	res := runGraph(t, chatGraph(t, srv.BaseURL(), "a"), j)
	if n := res.Nodes[0]; n.State != journal.NodeFailed {
		t.Fatalf("node %s", n.State)
	}
	// ci: 3 retries, so 4 requests in all.
	if st := srv.Stats(); st.Requests[sim.EndpointChat] != 4 {
		t.Errorf("requests = %d, want 1 + 3 retries", st.Requests[sim.EndpointChat])
	}
	if got := codes(t, j, res.RunID, "a"); !has(got, diagnostics.BudgetExhausted.ID) {
		t.Errorf("codes %v lack budget_exhausted", got)
	}
}

func head(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Issue 43: a 401 on each API kind fails at once, naming the key variable
// the provider read (its kind's own when api_key_env is left out) and where
// its vendor says how to set a key. Over real sockets, on the simulator.
func TestUnauthorizedNamesTheKindsKey(t *testing.T) {
	for _, c := range []struct {
		kind, endpoint, base, key, docs string
	}{
		{"openai", sim.EndpointChat, "/v1", "OPENAI_API_KEY", "platform.openai.com"},
		{"responses", sim.EndpointResponsesCreate, "/v1", "OPENAI_API_KEY", "platform.openai.com"},
		{"anthropic", sim.EndpointMessages, "", "ANTHROPIC_API_KEY", "docs.anthropic.com"},
		{"gemini", sim.EndpointInteractionsCreate, "", "GEMINI_API_KEY", "ai.google.dev"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Faults: []sim.Fault{{Endpoint: c.endpoint, Kind: sim.FaultStatus, Status: 401}}})
			g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: ci\nproviders:\n  p: {kind: %s, base_url: 'http://%s%s', model: sim}\nnodes:\n  - {id: a, prompt: hi}\n",
				c.kind, srv.Addr(), c.base))
			res := runGraph(t, g, openJournal(t))
			msg := fmt.Sprint(res.Nodes[0].Err)
			if res.Nodes[0].State != journal.NodeFailed || !strings.Contains(msg, "check the API key in "+c.key+" ") || !strings.Contains(msg, c.docs) {
				t.Errorf("node %s: %s; want it to name %s and %s", res.Nodes[0].State, msg, c.key, c.docs)
			}
			if got := srv.Stats().Requests[c.endpoint]; got != 1 {
				t.Errorf("%d requests after a 401, want 1", got)
			}
		})
	}
}
