package simconfig

import (
	"os/exec"
	"strings"
	"testing"
)

// The package is a leaf without network code (see doc.go): it links no
// HTTP, no go-openai and nothing of noderun's but internal/yamlnode (the
// YAML helpers every file decoder shares, themselves a leaf), so that
// whatever decodes a `sim:` block (the graph language) stays free of the
// simulator's server.
func TestLeafLinksNoNetwork(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const self = "github.com/noderun/noderun/provider/sim/simconfig"
	const yamlnode = "github.com/noderun/noderun/internal/yamlnode"
	deps := strings.Fields(string(out))
	for _, d := range deps {
		switch {
		case d == "net/http", strings.HasPrefix(d, "net/http/"), strings.HasPrefix(d, "github.com/sashabaranov/go-openai"),
			strings.HasPrefix(d, "github.com/noderun/noderun/") && d != self && d != yamlnode:
			t.Errorf("simconfig links %s", d)
		}
	}
	if len(deps) == 0 || deps[len(deps)-1] != self {
		t.Fatalf("go list did not end with simconfig itself:\n%s", out)
	}
}
