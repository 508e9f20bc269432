package runner

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// A simulated run keeps each provider's API, points Codex at the simulator
// with the node named in a header, and refuses harnesses it cannot point.
func TestSimulate(t *testing.T) {
	srv := simtest.Start(t, sim.Config{})
	if sim.NodeHeader != provider.NodeHeader {
		t.Fatalf("the simulator reads %q, the adapters send %q", sim.NodeHeader, provider.NodeHeader)
	}
	for _, tc := range []struct {
		spec ProviderSpec
		api  string
	}{
		{ProviderSpec{Kind: ProviderKindOpenAI, BaseURL: "https://x.invalid/v1", APIKeyEnv: "UNSET"}, ProviderKindOpenAI},
		{ProviderSpec{Kind: ProviderKindResponses}, ProviderKindResponses},
		{ProviderSpec{Kind: ProviderKindSim}, ProviderKindOpenAI},
		{ProviderSpec{Kind: ProviderKindSim, API: SimAPIResponses}, ProviderKindResponses},
	} {
		api, _, cleanup, err := simulate(&tc.spec, srv)
		if err != nil || api != tc.api {
			t.Errorf("%+v: api %q, err %v", tc.spec, api, err)
			continue
		}
		cleanup()
	}
	spec := &ProviderSpec{Kind: ProviderKindHarness, Args: []string{"--full-auto"}, Env: map[string]string{"A": "b"}}
	api, out, cleanup, err := simulate(spec, srv)
	if err != nil || api != ProviderKindHarness {
		t.Fatalf("codex: %q %v", api, err)
	}
	home := out.Env["CODEX_HOME"]
	args := strings.Join(out.Args, " ")
	if out.Args[0] != "--full-auto" || !strings.Contains(args, "model_provider="+codexSimProvider) ||
		!strings.Contains(args, srv.BaseURL()) || !strings.Contains(args, `env_http_headers={"X-Noderun-Node"="NODERUN_NODE"}`) ||
		out.Env["A"] != "b" || home == "" || spec.Env["CODEX_HOME"] != "" || len(spec.Args) != 1 {
		t.Fatalf("codex settings: %v %v (spec %v)", out.Args, out.Env, spec)
	}
	if _, err := os.Stat(home); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("CODEX_HOME %s left behind", home)
	}
	for name, keys := range map[string][2]string{"claude": {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}, "gemini": {"GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"}} {
		spec := &ProviderSpec{Kind: ProviderKindHarness, Harness: name, Env: map[string]string{keys[0]: "https://example.invalid", "A": "b"}}
		api, out, cleanup, err := simulate(spec, srv)
		if err != nil || api != ProviderKindHarness || out.Env[keys[0]] != strings.TrimSuffix(srv.BaseURL(), "/v1") ||
			out.Env[keys[1]] == "" || out.Env["A"] != "b" || out.StateDir == "" || spec.Env[keys[0]] != "https://example.invalid" {
			t.Errorf("%s: %v %+v", name, err, out)
			continue
		}
		cleanup()
		if _, err := os.Stat(out.StateDir); !os.IsNotExist(err) {
			t.Errorf("%s: state dir %s left behind", name, out.StateDir)
		}
	}
	if _, _, _, err := simulate(&ProviderSpec{Kind: ProviderKindHarness, Harness: "other.yaml"}, srv); !errors.Is(err, ErrNotSimulated) ||
		strings.Contains(err.Error(), "--sim") {
		t.Errorf("other harness: %v", err)
	}
}
