package sim

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
)

// sdk runs testdata/sdk/fidelity.cjs: the official JavaScript SDK of a
// provider (@anthropic-ai/sdk, @google/genai, pinned in the Makefile and
// installed by `make tools` into .tools/node_modules) reading base in mode,
// and decodes the JSON line it prints into out. args are passed after base
// (@google/genai's API version). A missing SDK fails the test, never skips
// it.
func sdk(t *testing.T, mode, base string, out any, args ...string) {
	t.Helper()
	testkit.RealPeer(t, "the official SDKs (Node.js)")
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(root, ".tools", "node_modules")
	for _, pkg := range []string{"@anthropic-ai/sdk", "@google/genai"} {
		if _, err := os.Stat(filepath.Join(modules, pkg, "package.json")); err != nil {
			t.Fatalf("%s is missing: run `make tools` (it installs it): %v", pkg, err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "node", append([]string{filepath.Join(root, "testdata", "sdk", "fidelity.cjs"), mode, base}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", mode, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %s", mode, err, b)
	}
}

// Issue 43: the official SDKs read the simulator's Anthropic and Gemini
// answers without error, as they read the services': a Messages stream
// (text, stop reason, usage), an Anthropic error body (its type), an
// Interactions stream, the interaction's status body in the steps shape,
// and a Google error body. @google/genai is read both at its default path
// version (v1 in 3.3.0) and at the reference's v1beta, noderun's default.
func TestOfficialSDKsReadTheSimulator(t *testing.T) {
	s := start(t, Config{Tokens: 24})
	root := strings.TrimSuffix(s.BaseURL(), "/v1")

	var msg struct {
		Text  string `json:"text"`
		Stop  string `json:"stop_reason"`
		Usage struct {
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	sdk(t, "anthropic-stream", root, &msg)
	if want := strings.Join(Text("claude-sim", "fidelity", 0, 24), ""); msg.Text != want || msg.Stop != "end_turn" || msg.Usage.Output != 24 {
		t.Errorf("@anthropic-ai/sdk stream: %+v, want %q, end_turn, 24 output tokens", msg, want)
	}

	want := strings.Join(Text("sim", "fidelity", 0, 24), "")
	for _, version := range []string{"", "v1beta"} {
		var it struct {
			Text, ID, Last, Status, StepsText string
			Steps                             []string
			Usage                             struct {
				Output int `json:"total_output_tokens"`
			}
		}
		before := s.Stats().Requests[EndpointInteractionsCreate]
		sdk(t, "genai-stream", root, &it, version)
		if it.Text != want || it.StepsText != want || it.Status != "completed" || it.Usage.Output != 24 || !strings.HasPrefix(it.Last, "interaction.completed") {
			t.Errorf("@google/genai interaction (version %q): %+v, want %q streamed and in its steps", version, it, want)
		}
		if n := s.Stats().Requests[EndpointInteractionsCreate] - before; n != 1 {
			t.Errorf("@google/genai (version %q): the simulator created %d interactions, want 1", version, n)
		}
	}

	s.AddFault(Fault{Endpoint: EndpointMessages, Kind: FaultStatus, Status: 429, RetryAfter: "1"})
	s.AddFault(Fault{Endpoint: EndpointInteractionsCreate, Kind: FaultStatus, Status: 429, RetryAfter: "1"})
	var aerr struct {
		Status     int
		Type, Name string
	}
	sdk(t, "anthropic-429", root, &aerr)
	if aerr.Status != 429 || aerr.Type != "rate_limit_error" || aerr.Name != "RateLimitError" {
		t.Errorf("@anthropic-ai/sdk on a 429: %+v, want a RateLimitError of type rate_limit_error", aerr)
	}
	var gerr struct {
		Status        int
		Message, Name string
	}
	sdk(t, "genai-429", root, &gerr, "v1beta")
	if gerr.Status != 429 || !strings.Contains(gerr.Message, "RESOURCE_EXHAUSTED") && !strings.Contains(gerr.Message, "injected HTTP 429") {
		t.Errorf("@google/genai on a 429: %+v", gerr)
	}
}
