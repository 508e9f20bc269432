package runner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/conns"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/graph"
)

// Base URL and key come from the graph, else OPENAI_BASE_URL and
// OPENAI_API_KEY; a missing key is an error only where one is needed.
func TestEndpoint(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name     string
		spec     ProviderSpec
		getenv   func(string) string
		url, key string
		err      string
	}{
		{"graph wins", ProviderSpec{Kind: "openai", BaseURL: "http://127.0.0.1:9/v1"}, env("OPENAI_BASE_URL", "http://other/v1", "OPENAI_API_KEY", "k"), "http://127.0.0.1:9/v1", "k", ""},
		{"env base url", ProviderSpec{Kind: "responses"}, env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1", "", ""},
		{"openai needs a key", ProviderSpec{Kind: "openai"}, env(), "", "", "OPENAI_API_KEY"},
		{"openai with key", ProviderSpec{Kind: "openai"}, env("OPENAI_API_KEY", "sk"), defaultOpenAIBaseURL, "sk", ""},
		{"named key must be set", ProviderSpec{Kind: "openai", BaseURL: "http://127.0.0.1:9/v1", APIKeyEnv: "MY_KEY"}, env(), "", "", "MY_KEY"},
		{"named key", ProviderSpec{Kind: "openai", APIKeyEnv: "MY_KEY"}, env("MY_KEY", "x", "OPENAI_API_KEY", "y"), defaultOpenAIBaseURL, "x", ""},
		{"sim needs nothing", ProviderSpec{Kind: "sim"}, env(), "", "", ""},
	}
	for _, c := range cases {
		url, key, err := endpoint(&c.spec, c.getenv)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one naming %s", c.name, err, c.err)
			}
			continue
		}
		if err != nil || url != c.url || key != c.key {
			t.Errorf("%s: got %q %q %v, want %q %q", c.name, url, key, err, c.url, c.key)
		}
	}
}

// The graph reference documents the default of max_dials; it must be the
// one the adapters use (runner/graph may not import provider/conns).
func TestMaxDialsDefaultDocumented(t *testing.T) {
	row := fmt.Sprintf("| `max_dials` | whole number > 0 | %d (kinds:", conns.DefaultMaxDials)
	if !strings.Contains(string(graph.Reference()), row) {
		t.Errorf("the graph reference's max_dials row does not start %q", row)
	}
}

// A run's adapters close their idle keep-alive connections when it ends: a
// program running one graph after another would otherwise keep every run's
// connections, and the server's goroutines behind them, until they time out
// (90 s), and they would add up with every run.
func TestRunLeavesNoIdleConnections(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Tokens: 20})
	g := parseTestGraph(t, fmt.Sprintf(`name: t
providers:
  chat: {kind: openai, base_url: %[1]s, model: sim}
  resp: {kind: responses, base_url: %[1]s, model: sim}
nodes:
  - {id: a, provider: chat, prompt: one}
  - {id: b, provider: resp, prompt: two}
`, srv.BaseURL()))
	j := openJournal(t)
	for range 3 {
		if res := runGraph(t, g, j); res.Status != journal.RunCompleted {
			t.Fatalf("run %s: %+v", res.Status, res.Nodes)
		}
	}
	st := srv.Stats()
	if st.Connections < 2 {
		t.Fatalf("the simulator accepted %d connections; the runs cannot have used it", st.Connections)
	}
	// The server learns of a close when it reads the FIN: poll briefly.
	deadline := time.Now().Add(5 * time.Second)
	for st.OpenConnections > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		st = srv.Stats()
	}
	if st.OpenConnections != 0 {
		t.Errorf("%d of the runs' %d connections are still open after they ended", st.OpenConnections, st.Connections)
	}
}
