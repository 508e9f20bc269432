package runner

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/sim"
)

// SimOptions make a run talk to a simulator instead of the providers the
// graph names (`noderun run --sim`, `noderun chaos`): no file edits, no API
// keys. Every provider keeps its API: openai and chat sims are served the
// Chat Completions API, responses and responses sims the Responses API,
// anthropic the Messages API, gemini the Interactions API, and harness nodes
// run the real Codex CLI, Claude Code or Gemini CLI pointed at the simulator.
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
	case ProviderKindAnthropic: // the simulator's Messages API (/v1/messages)
		return ProviderKindAnthropic, &cp, cleanup, nil
	case ProviderKindGemini:
		return ProviderKindGemini, &cp, cleanup, nil
	case ProviderKindSim:
		if spec.API == SimAPIResponses {
			return ProviderKindResponses, &cp, cleanup, nil
		}
		return ProviderKindOpenAI, &cp, cleanup, nil
	case ProviderKindHarness:
		return simulateHarness(spec, &cp, srv)
	}
	return "", nil, nil, fmt.Errorf("unknown provider kind %q", spec.Kind)
}

// simulatedHarnesses are the built-in harnesses a simulated run can point at
// the simulator, each through its CLI's own settings.
var simulatedHarnesses = []string{"codex", "claude", "gemini"}

// HarnessSimEndpoint is the simulator endpoint that carries the model
// stream of a simulated harness node: each CLI speaks its provider's API.
func HarnessSimEndpoint(spec *ProviderSpec) string {
	switch spec.Harness {
	case "claude":
		return sim.EndpointMessages
	case "gemini":
		return sim.EndpointGeminiStream
	}
	return sim.EndpointResponsesCreate // Codex, the default harness
}

// simulateHarness points a harness at srv with a fresh, temporary session
// store, so that a simulated run leaves the user's own store alone: Codex by
// a model provider (its own retries off, so that every drop reaches
// noderun), Claude Code and Gemini CLI by their base-URL variables (their own
// retries are bounded by their descriptors). Each names its node in the
// header the simulator aims faults with.
func simulateHarness(spec, cp *ProviderSpec, srv *sim.Server) (string, *ProviderSpec, func(), error) {
	name := spec.Harness
	if name == "" {
		name = "codex"
	}
	if !slices.Contains(simulatedHarnesses, name) {
		return "", nil, nil, fmt.Errorf("harness %q %w: only the built-in %v can", spec.Harness, ErrNotSimulated, simulatedHarnesses)
	}
	home, err := os.MkdirTemp("", "noderun-sim-"+name+"-")
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s home for the simulator: %w", name, err)
	}
	cp.Env = maps.Clone(spec.Env)
	if cp.Env == nil {
		cp.Env = map[string]string{}
	}
	root := strings.TrimSuffix(srv.BaseURL(), "/v1")
	switch name {
	case "codex":
		settings := fmt.Sprintf(`model_providers.%s={name="noderun sim",base_url=%q,wire_api="responses",env_key=%q,`+
			`stream_max_retries=0,request_max_retries=0,env_http_headers={%q=%q}}`,
			codexSimProvider, srv.BaseURL(), codexSimKeyEnv, provider.NodeHeader, harness.NodeEnv)
		cp.Args = append(append(append([]string{}, spec.Args...), "-c", "model_provider="+codexSimProvider, "-c", settings), harness.CodexQuietArgs()...)
		cp.Env["CODEX_HOME"] = home
		cp.Env[codexSimKeyEnv] = "sim"
	case "claude":
		cp.Env["ANTHROPIC_BASE_URL"], cp.Env["ANTHROPIC_API_KEY"] = root, "sim"
		cp.StateDir = home
	case "gemini":
		cp.Env["GOOGLE_GEMINI_BASE_URL"], cp.Env["GEMINI_API_KEY"] = root, "sim"
		cp.StateDir = home
	}
	if cp.Model == "" {
		cp.Model = "sim"
	}
	return ProviderKindHarness, cp, func() { _ = os.RemoveAll(home) }, nil
}
