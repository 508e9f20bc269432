package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
)

// Issue 44: the program builds and does what it says as a separate module
// (example.com/embedder, noderun by a replace directive, offline): it uses
// exported API only, since another module cannot import internal packages.
// Its go.mod requires what noderun's does, at the same versions, and no more
// is looked up: `go mod tidy` would also want the modules that only the
// tests of noderun's dependencies import, which a machine that built and
// tested noderun need not have (GOPROXY is off).
func TestFromASeparateModule(t *testing.T) {
	testkit.SkipInShort(t, "builds and links a module of its own")
	root, err := testkit.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	rootMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	reqs, ok := strings.CutPrefix(string(rootMod), "module github.com/noderun/noderun\n")
	if !ok {
		t.Fatalf("go.mod does not begin with noderun's module line:\n%s", rootMod)
	}
	mod := "module example.com/embedder\n" + reqs + "\nrequire github.com/noderun/noderun v0.0.0\n\nreplace github.com/noderun/noderun => " + root + "\n"
	for name, b := range map[string][]byte{"main.go": src, "go.sum": sum, "go.mod": []byte(mod)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	vet := exec.CommandContext(t.Context(), goBin, "vet", ".")
	vet.Dir, vet.Env = dir, env
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("go vet in a separate module: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "run", ".")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run in a separate module: %v\n%s", err, out)
	}
	for _, want := range []string{
		"cancel: run interrupted, node canceled, errors.Is(err, cause) true",
		"resume: run completed, node completed, identical to an undisturbed run true",
		"misuse: nil graph true, unbuilt graph true, unknown kind true",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the separate module's program did not say %q:\n%s", want, out)
		}
	}
}
