package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
)

func TestServeOptional(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want []string }{
		{[]string{"noderun", "run", "g.yaml", "--serve"}, []string{"noderun", "run", "g.yaml", "--serve=" + defaultServeAddr}},
		{[]string{"noderun", "run", "--serve", "g.yaml"}, []string{"noderun", "run", "--serve=" + defaultServeAddr, "g.yaml"}},
		{[]string{"noderun", "run", "--serve", ":0", "g.yaml"}, []string{"noderun", "run", "--serve=:0", "g.yaml"}},
		{[]string{"noderun", "run", "g.yaml", "--serve", "127.0.0.1:9000"}, []string{"noderun", "run", "g.yaml", "--serve=127.0.0.1:9000"}},
		{[]string{"noderun", "run", "g.yaml", "--serve", "[::1]:9000"}, []string{"noderun", "run", "g.yaml", "--serve=[::1]:9000"}},
		{[]string{"noderun", "run", "g.yaml", "--serve=:8081"}, []string{"noderun", "run", "g.yaml", "--serve=:8081"}},
		{[]string{"noderun", "run", "--", "--serve"}, []string{"noderun", "run", "--", "--serve"}},
		{[]string{"noderun", "serve", "--addr", ":0"}, []string{"noderun", "serve", "--addr", ":0"}},
	}
	for _, c := range cases {
		if got := serveOptional(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

// serve refuses what it cannot do safely or at all, before listening:
// another address than loopback without a token, a token variable unset or
// short, a bad address.
func TestServeRefuses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "j.db")
	t.Setenv("SERVE_SHORT", "short")
	t.Setenv("SERVE_TOKEN", "0123456789abcdef0123")
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"serve", "--db", db, "--addr", ":0"}, "every interface needs a token"},
		{[]string{"serve", "--db", db, "--addr", "0.0.0.0:0"}, "0.0.0.0 needs a token"},
		{[]string{"serve", "--db", db, "--token-env", "SERVE_NOSUCH"}, "SERVE_NOSUCH: the variable is empty or unset"},
		{[]string{"serve", "--db", db, "--token-env", "SERVE_SHORT"}, "give at least 16"},
		{[]string{"serve", "--db", db, "--addr", "nowhere"}, "want HOST:PORT"},
		{[]string{"serve", "--db", db, "--dir", filepath.Join(t.TempDir(), "nosuch")}, "not a directory"},
		{[]string{"run", "../../testdata/graphs/demo.yaml", "--db", db, "--serve", "0.0.0.0:0"}, "needs a token"},
	}
	for _, c := range cases {
		code, _, errs := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%v: exit %d, %q; want 2 saying %q", c.args, code, errs, c.says)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused serve created the journal")
	}
}

// `noderun serve` prints its URL, serves the journal's runs and the page,
// and on SIGTERM stops with 130, a run it started interrupted and resumable.
func TestServeProcess(t *testing.T) {
	t.Parallel()
	graph, db := writeGraph(t, `name: slowish
cache: false
providers:
  chat: {kind: sim, api: chat, sim: {tokens: 400, tokens_per_second: 40}}
nodes:
  - {id: a, provider: chat, prompt: hi}
`)
	dir := filepath.Dir(graph)
	cmd := exec.Command(noderunBinary(t), "serve", "--db", db, "--addr", "127.0.0.1:0", "--dir", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb testkit.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	defer func() { testkit.Terminate(cmd, exited, 5*time.Second) }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL on stdout: %v\n%s", err, errb.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout); waitErr = cmd.Wait(); close(exited) }()
	url := strings.TrimSpace(line)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/$`).MatchString(url) {
		t.Fatalf("first line %q is not the URL", line)
	}
	var token []string // stderr arrives through a pipe of its own: it may lag stdout
	for deadline := time.Now().Add(10 * time.Second); token == nil; time.Sleep(10 * time.Millisecond) {
		if token = regexp.MustCompile(`Authorization: Bearer ([0-9a-f]+)`).FindStringSubmatch(errb.String()); token == nil && time.Now().After(deadline) {
			t.Fatalf("serve did not say the write token:\n%s", errb.String())
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"api/runs", strings.NewReader(`{"graph": "`+filepath.Base(graph)+`"}`))
	req.Header.Set("Authorization", "Bearer "+token[1])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || started.RunID == "" {
		t.Fatalf("start: %s\n%s", resp.Status, errb.String())
	}
	page, err := http.Get(url + "runs/" + started.RunID)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Errorf("the run's page: %s", page.Status)
	}
	// Once it streams, stop the server.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st struct {
			Nodes []struct{ Bytes int } `json:"nodes"`
		}
		r, err := http.Get(url + "api/runs/" + started.RunID)
		if err == nil {
			_ = json.NewDecoder(r.Body).Decode(&st)
			r.Body.Close()
		}
		if len(st.Nodes) == 1 && st.Nodes[0].Bytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never streamed:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", errb.String())
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.ExitCode() != exitInterrupted {
		t.Errorf("serve exited %v, want 130", waitErr)
	}
	code, out, errs := runCLI(t, "status", started.RunID, "--db", db, "--json")
	if code != exitOK || !strings.Contains(out, `"status": "interrupted"`) {
		t.Fatalf("after serve stopped, the run it started: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "resume", started.RunID, "--db", db); code != exitOK {
		t.Errorf("resume: exit %d\n%s", code, errs)
	}
}

// `run --serve` serves the run's page while it runs and says where.
func TestRunServe(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	cmd := exec.Command(noderunBinary(t), "run", "../../testdata/graphs/demo.yaml", "--db", db, "--serve", "127.0.0.1:0")
	var out testkit.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer testkit.Terminate(cmd, exited, 5*time.Second)
	re := regexp.MustCompile(`watch the run at (http://127\.0\.0\.1:[0-9]+/runs/[0-9a-f-]{36})`)
	var m []string
	for deadline := time.Now().Add(20 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
		if m = re.FindStringSubmatch(out.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("run --serve did not say where:\n%s", out.String())
		}
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", m[1], resp.Status)
	}
	<-exited
	if cmd.ProcessState.ExitCode() != exitOK {
		t.Errorf("run --serve exited %d:\n%s", cmd.ProcessState.ExitCode(), out.String())
	}
}
