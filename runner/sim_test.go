package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/journal"
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

// A simulated Codex node talks to the simulator and to nothing else, and
// starts no login shell: Codex's shell snapshot, plugin sync and analytics
// are off (harness.CodexQuietArgs). Codex runs with a HOME whose rc files
// leave a mark, and with every proxy variable pointing at a listener here
// that counts what reaches it (git and Codex's HTTP client go through the
// proxy instead of resolving a name); the simulator is exempt (NO_PROXY).
func TestSimulatedCodexStaysOffTheNetwork(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	bin := codexbin.Path(t)
	srv := simtest.Start(t, sim.Config{})
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = proxy.Close() })
	home := t.TempDir()
	mark := filepath.Join(home, "login-shell-ran")
	for _, rc := range []string{".bashrc", ".bash_profile", ".profile"} {
		if err := os.WriteFile(filepath.Join(home, rc), []byte("touch "+mark+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"HOME": home, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		env[v] = "http://" + proxy.Addr().String()
	}
	envJSON, _ := json.Marshal(env)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	g := parseTestGraph(t, fmt.Sprintf("name: quiet\nproviders:\n  codex: {kind: harness, harness: codex, command: %s, model: sim, workdir: %s, env: %s}\nnodes:\n  - {id: a, provider: codex, prompt: say it}\n",
		q(bin), q(t.TempDir()), envJSON))
	j := openJournal(t)
	res := runSimGraph(t, g, j, srv)
	if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != simAnswer("say it") {
		t.Fatalf("node a: %s, output %q (%v)", n.State, head(n.Output), n.Err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("Codex made %d connections through the proxy: it reached for the network beyond the simulator", n)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("Codex started a login shell (its rc files ran): the shell snapshot is on")
	}
}
