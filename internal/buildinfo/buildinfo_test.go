package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
)

func TestText(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "f047788abc"}, {Key: "vcs.modified", Value: "true"}}
	cases := []struct {
		name, version, stamped string
		settings               []debug.BuildSetting
		want                   string
	}{
		{"go install of a release", "v1.2.0", "", nil, "noderun v1.2.0 (go1.26.8)"},
		{"a build with VCS info", "v0.0.0-20261204-f047788abc+dirty", "", vcs, "noderun v0.0.0-20261204-f047788abc+dirty (commit f047788abc-dirty, go1.26.8)"},
		{"make build, VCS stamping off", "(devel)", "v1.2.0-3-gf047788-dirty", nil, "noderun v1.2.0-3-gf047788-dirty (go1.26.8)"},
		{"a plain go build with VCS stamping off", "(devel)", "", nil, "noderun (devel, not built by `make build`: no version stamped) (go1.26.8)"},
		{"a devel build with a commit", "(devel)", "", vcs, "noderun commit f047788abc-dirty (go1.26.8)"},
	}
	for _, c := range cases {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: c.version}, Settings: c.settings}
		if got := text(bi, c.stamped); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// `make build`'s way (VCS stamping off, the version by -X) prints the
// stamped version, not "(devel)": the defect of issue 46.
func TestMakeBuildStampsTheVersion(t *testing.T) {
	testkit.SkipInShort(t, "links the command")
	bin := filepath.Join(t.TempDir(), "noderun")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.buildCommit=v9.9.9-1-gabcdef0", "-o", bin, "../../cmd/noderun")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "noderun v9.9.9-1-gabcdef0 ("+runtime.Version()+")"; got != want {
		t.Errorf("--version = %q, want %q", got, want)
	}
}
