package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider/conns"
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
