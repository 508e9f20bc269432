package graph

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// graphTestdata is the repository's testdata/graphs directory.
var graphTestdata = filepath.Join("..", "..", "testdata", "graphs")

func TestGraphFilesValid(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(graphTestdata, "valid", "*.yaml"))
	if len(paths) == 0 {
		t.Fatal("no valid graph files")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			graphCheckInvariants(t, g)
			given := map[string]string{}
			for _, in := range g.Inputs {
				if in.Required {
					given[in.Name] = "value of " + in.Name
				}
			}
			inputs, err := g.ResolveInputs(given)
			if err != nil {
				t.Fatal(err)
			}
			outs := map[string]string{}
			for _, id := range g.Order() {
				n := g.Node(id)
				_, p, err := n.Render(Values{Outputs: outs, Inputs: inputs})
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
				outs[id] = "output of " + id + " (prompt was " + strconv.Itoa(len(p)) + " bytes)"
			}
		})
	}
}

// graphWantPattern is an invalid file's first line: "# want: LINE: message".
var graphWantPattern = regexp.MustCompile(`^# want: (\d+): (.+)$`)

// Every file in testdata/graphs/invalid has one malformation, named on its
// first line; loading it must fail with a message naming the file and line.
func TestGraphFilesInvalid(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(graphTestdata, "invalid", "*.yaml"))
	if len(paths) < 20 {
		t.Fatalf("only %d invalid graph files", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(src), "\n")
			m := graphWantPattern.FindStringSubmatch(first)
			if m == nil {
				t.Fatalf("first line %q is not \"# want: LINE: message\"", first)
			}
			g, err := Load(path)
			if err == nil {
				t.Fatalf("accepted: %+v", g)
			}
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error is %T: %v", err, err)
			}
			if len(ge.Problems) != 1 {
				t.Errorf("want one problem, got:\n%v", err)
			}
			want := fmt.Sprintf("%s:%s: ", path, m[1])
			if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, m[2]) {
				t.Errorf("got:\n%s\nwant %q...%q", msg, want, m[2])
			}
		})
	}
}

// graphCheckInvariants checks what every accepted graph promises.
func graphCheckInvariants(t testing.TB, g *Graph) {
	t.Helper()
	if g == nil || len(g.Nodes) == 0 || g.Name == "" {
		t.Fatalf("accepted graph without name or nodes: %+v", g)
	}
	order := g.Order()
	if len(order) != len(g.Nodes) {
		t.Fatalf("Order has %d of %d nodes", len(order), len(g.Nodes))
	}
	pos := map[string]int{}
	for i, id := range order {
		if _, dup := pos[id]; dup {
			t.Fatalf("%q twice in Order", id)
		}
		pos[id] = i
	}
	for _, n := range g.Nodes {
		if g.Node(n.ID) != n {
			t.Fatalf("Node(%q) is not the node", n.ID)
		}
		if g.Providers[n.Provider] == nil {
			t.Fatalf("node %q: provider %q not defined", n.ID, n.Provider)
		}
		if strings.TrimSpace(n.Prompt) == "" {
			t.Fatalf("node %q: empty prompt", n.ID)
		}
		switch n.SideEffects {
		case SideNone, SideIdempotent, SideUnsafe:
		default:
			t.Fatalf("node %q: side effects %q", n.ID, n.SideEffects)
		}
		for _, need := range n.Needs {
			if g.Node(need) == nil {
				t.Fatalf("node %q needs undefined %q", n.ID, need)
			}
			if need == n.ID || pos[need] >= pos[n.ID] {
				t.Fatalf("node %q is ordered before its need %q", n.ID, need)
			}
			found := false
			for _, d := range g.Dependents(need) {
				found = found || d == n.ID
			}
			if !found {
				t.Fatalf("Dependents(%q) lacks %q", need, n.ID)
			}
		}
	}
}
