package runner

import (
	"fmt"
	"os"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/sim"
)

// SimOptions make a run talk to a simulator instead of the providers the
// graph names (`noderun run --sim`, `noderun chaos`): no file edits, no API
// keys. Every provider keeps its API: openai and chat sims are served the
// Chat Completions API, responses and responses sims the Responses API, and
// Codex harness nodes run the real Codex CLI pointed at the simulator.
type SimOptions struct {
	// Server is a running simulator every provider talks to, kind sim
	// included (their own sim blocks are then ignored). Nil starts one
	// simulator from Config for the run and leaves kind sim providers on
	// their own embedded simulators, scripted faults and all.
	Server *sim.Server
	Config sim.Config
}

// The Codex model provider a simulated run points Codex at.
const (
	codexSimProvider = "noderun_sim"
	codexSimKeyEnv   = "NODERUN_SIM_KEY"
)

// simulate rewrites spec for a run on srv: the API it keeps and, for a
// harness, the settings that point it at srv. It fails for a harness whose
// descriptor gives no way to change its model server.
func simulate(spec *ProviderSpec, srv *sim.Server) (api string, out *ProviderSpec, cleanup func(), err error) {
	cp := *spec
	cleanup = func() {}
	switch spec.Kind {
	case ProviderKindOpenAI:
		return ProviderKindOpenAI, &cp, cleanup, nil
	case ProviderKindResponses:
		return ProviderKindResponses, &cp, cleanup, nil
	case ProviderKindSim:
		if spec.API == SimAPIResponses {
			return ProviderKindResponses, &cp, cleanup, nil
		}
		return ProviderKindOpenAI, &cp, cleanup, nil
	case ProviderKindHarness:
		if spec.Harness != "" && spec.Harness != "codex" {
			return "", nil, nil, fmt.Errorf("harness %q cannot be pointed at the simulator: only the Codex descriptor says how (model_providers); run this graph without --sim", spec.Harness)
		}
		home, err := os.MkdirTemp("", "noderun-sim-codex-")
		if err != nil {
			return "", nil, nil, fmt.Errorf("codex home for the simulator: %w", err)
		}
		// Codex's own retries stay off so that every drop reaches noderun,
		// and it names the node in a header the simulator aims faults with.
		settings := fmt.Sprintf(`model_providers.%s={name="noderun sim",base_url=%q,wire_api="responses",env_key=%q,`+
			`stream_max_retries=0,request_max_retries=0,env_http_headers={%q=%q}}`,
			codexSimProvider, srv.BaseURL(), codexSimKeyEnv, provider.NodeHeader, harness.NodeEnv)
		cp.Args = append(append([]string{}, spec.Args...), "-c", "model_provider="+codexSimProvider, "-c", settings)
		cp.Env = map[string]string{}
		for k, v := range spec.Env {
			cp.Env[k] = v
		}
		cp.Env["CODEX_HOME"] = home
		cp.Env[codexSimKeyEnv] = "sim"
		if cp.Model == "" {
			cp.Model = "sim"
		}
		return ProviderKindHarness, &cp, func() { _ = os.RemoveAll(home) }, nil
	}
	return "", nil, nil, fmt.Errorf("unknown provider kind %q", spec.Kind)
}
