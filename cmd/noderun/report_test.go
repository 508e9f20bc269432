package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
)

// chromium runs headless Chromium on a page and returns its stdout and stderr.
func chromium(t *testing.T, args ...string) (string, string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed (apt-get install chromium; make tools installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--window-size=1280,1000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helper processes go with it
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// The run report renders in a real browser with no console errors, and its
// timeline shows every attempt of the recovered demo run with its
// disconnects, re-attaches and retries marked.
func TestReportRendersInHeadlessChromium(t *testing.T) {
	db, _ := demoRun(t)
	page := filepath.Join(t.TempDir(), "run.html")
	if code, out, errs := runCLI(t, "report", "last", "--db", db, "-o", page); code != exitOK || out != "" {
		t.Fatalf("report: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(src|href)\s*=\s*"(https?:)?//`).Match(src) || bytes.Contains(src, []byte("@import")) {
		t.Error("the report loads something from the network; it must be self-contained")
	}

	dom, logs := chromium(t, "--dump-dom", "file://"+page)
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Uncaught") {
			t.Errorf("console message: %s", l)
		}
	}
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Fatalf("the page's script did not run to the end:\n%s", dom)
	}
	if m := regexp.MustCompile(`(?s)<pre id="page-errors"[^>]*>(.*?)</pre>`).FindStringSubmatch(dom); m == nil || m[1] != "" {
		t.Errorf("page errors: %v", m)
	}

	j, err := journal.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	runs, err := j.Runs(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := j.Attempts(context.Background(), runs[0].ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atts {
		re := fmt.Sprintf(`<rect class="attempt %s" data-node="%s" data-attempt="%d"`, a.Outcome, a.NodeID, a.N)
		if !strings.Contains(dom, re) {
			t.Errorf("the timeline lacks %s attempt %d (%s)", a.NodeID, a.N, a.Outcome)
		}
	}
	if got := strings.Count(dom, `<rect class="attempt `); got != len(atts) {
		t.Errorf("the timeline has %d attempts, the journal %d", got, len(atts))
	}
	if !strings.Contains(dom, fmt.Sprintf(`id="attempt-count">%d attempts<`, len(atts))) {
		t.Error("the legend does not count the attempts")
	}
	// The demo's two chat drops are continued (NR110), its Responses drop re-attached.
	for kind, want := range map[string]int{"disconnect": 3, "reattach": 1, "continue": 2} {
		if got := strings.Count(dom, `data-kind="`+kind+`"`); got < want {
			t.Errorf("%d %s marks on the timeline, want at least %d", got, kind, want)
		}
	}
	for _, n := range []string{"plan", "research", "critique", "report"} {
		if !strings.Contains(dom, `<tr data-node="`+n+`">`) || !strings.Contains(dom, `<g class="box state-completed" data-node="`+n+`">`) {
			t.Errorf("node %s is missing from the graph or the diagnose table", n)
		}
	}

	// A screenshot, kept as a test artifact.
	dir := os.Getenv("NODERUN_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot, err := filepath.Abs(filepath.Join(dir, "report.png"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(shot)
	chromium(t, "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("screenshot: %v %v", err, img)
	}
	t.Logf("screenshot: %s", shot)
}
