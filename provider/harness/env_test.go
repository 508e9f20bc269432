package harness

import (
	"os"
	"strings"
	"testing"
)

// A harness process's environment: noderun's, then the descriptor's, then
// the provider's (Config.Env), then the node's (Request.Env); a later layer
// replaces a variable, never duplicates it.
func TestEnvLayers(t *testing.T) {
	p, err := New(Config{Harness: "claude", Command: "claude", StateDir: t.TempDir(), WorkDir: t.TempDir(),
		Env: map[string]string{"CLAUDE_CODE_MAX_RETRIES": "3", "FROM_PROVIDER": "p", "BOTH": "p"}})
	if err != nil {
		t.Fatal(err)
	}
	env := p.env(map[string]string{"state_dir": "/state"}, map[string]string{"BOTH": "node", "DISABLE_TELEMETRY": "0", "FROM_NODE": "n"})
	got := map[string][]string{}
	for _, kv := range env[len(os.Environ()):] { // what noderun adds to its own environment
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	want := map[string]string{
		"CLAUDE_CODE_MAX_RETRIES": "3", "CLAUDE_CONFIG_DIR": "/state", // descriptor, provider over it
		"FROM_PROVIDER": "p", "BOTH": "node", "DISABLE_TELEMETRY": "0", "FROM_NODE": "n", // node over both
	}
	for k, v := range want {
		if len(got[k]) != 1 || got[k][0] != v {
			t.Errorf("%s = %q, want exactly %q", k, got[k], v)
		}
	}
}
