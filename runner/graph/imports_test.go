package graph

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps is every package runner/graph links, itself included.
func goListDeps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// The graph language is data: package graph imports nothing from the
// runner, the journal or the provider adapters (directly or not), so that
// imports keep pointing one way (cmd -> runner -> runner/graph). The one
// exception is the simulator's configuration (ProviderSpec.Sim is a
// simconfig.Config), a leaf that imports nothing of ours; profile is a leaf
// too, and both share internal/yamlnode's YAML helpers (a leaf as well).
func TestImportsPointOneWay(t *testing.T) {
	const mod = "github.com/noderun/noderun/"
	ours := 0
	for _, d := range goListDeps(t) {
		if !strings.HasPrefix(d, mod) {
			continue
		}
		ours++
		switch rel := strings.TrimPrefix(d, mod); {
		case rel == "runner/graph":
		case rel == "provider/sim/simconfig", rel == "profile", rel == "internal/yamlnode":
		case rel == "runner", rel == "journal", strings.HasPrefix(rel, "provider"), strings.HasPrefix(rel, "cmd"):
			t.Errorf("runner/graph depends on %s", d)
		default:
			t.Errorf("runner/graph depends on %s; only the standard library and YAML are expected", d)
		}
	}
	if ours == 0 {
		t.Fatal("go list did not list runner/graph itself")
	}
}

// Issue 44, point 5: a program that only parses graphs links no HTTP
// server and no HTTP client. The `sim:` block is decoded by the leaf
// provider/sim/simconfig; the simulator's server (provider/sim) and the
// adapters' go-openai stay out.
func TestParsingLinksNoNetwork(t *testing.T) {
	const sim = "github.com/noderun/noderun/provider/sim"
	for _, d := range goListDeps(t) {
		switch {
		case d == "net/http", strings.HasPrefix(d, "net/http/"),
			d == "github.com/sashabaranov/go-openai", strings.HasPrefix(d, "github.com/sashabaranov/go-openai/"),
			d == sim, strings.HasPrefix(d, sim+"/") && d != sim+"/simconfig":
			t.Errorf("runner/graph links %s", d)
		}
	}
}
