package graph

import (
	"os/exec"
	"strings"
	"testing"
)

// The graph language is data: package graph imports nothing from the
// runner, the journal or the provider adapters (directly or not), so that
// imports keep pointing one way (cmd -> runner -> runner/graph). The one
// exception is the simulator's configuration type (ProviderSpec.Sim is a
// sim.Config): provider/sim and the leaf packages it needs (provider,
// diagnostics, profile), none of which imports the graph.
func TestImportsPointOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/noderun/noderun/"
	deps := strings.Fields(string(out))
	ours := 0
	for _, d := range deps {
		if !strings.HasPrefix(d, mod) {
			continue
		}
		ours++
		switch rel := strings.TrimPrefix(d, mod); {
		case rel == "runner/graph":
		case rel == "provider/sim", rel == "provider", rel == "diagnostics", rel == "profile":
		case rel == "runner", rel == "journal", strings.HasPrefix(rel, "provider"), strings.HasPrefix(rel, "cmd"):
			t.Errorf("runner/graph depends on %s", d)
		default:
			t.Errorf("runner/graph depends on %s; only the standard library and YAML are expected", d)
		}
	}
	if ours == 0 {
		t.Fatalf("go list did not list runner/graph itself:\n%s", out)
	}
}
