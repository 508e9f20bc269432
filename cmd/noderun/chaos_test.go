package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// xmllint validates a JUnit file against the checked-in schema with a real
// XML schema validator (libxml2's xmllint, installed by `make tools`).
func xmllint(t *testing.T, file string) {
	t.Helper()
	bin, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatal("xmllint not found: run `make tools` (apt package libxml2-utils)")
	}
	out, err := exec.Command(bin, "--noout", "--schema", "../../testdata/junit/junit.xsd", file).CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not validate against the JUnit schema: %v\n%s", file, err, out)
	}
}

// chaosCLI runs `noderun chaos` as a process, as CI does, with no API key
// in its environment.
func chaosCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return chaosCLIEnv(t, nil, args...)
}

// chaosCLIEnv is chaosCLI with extra variables in the environment. Its
// temporary files go to a directory of the test's: a failing run keeps its
// journal there.
func chaosCLIEnv(t *testing.T, extra []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(noderunBinary(t), append([]string{"--log-level", "error", "chaos"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "NODERUN_CHAOS_TEST_KEY_UNSET=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "TMPDIR="+t.TempDir()), extra...) // the last of a name wins
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// The CI use: a graph whose providers hard-code base_url and an unset
// api_key_env survives every default case; the JUnit file validates; a
// fragile node (retries: 0) fails the run, and the JUnit failure names the
// node, the case and the diagnostic.
func TestChaosCLI(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "chaos.xml")
	code, stdout, stderr := chaosCLI(t, "../../testdata/chaos/small.yaml", "--junit", junit)
	if code != 0 {
		t.Fatalf("chaos small.yaml: exit %d\n%s\n%s", code, stdout, stderr)
	}
	xmllint(t, junit)
	x, _ := os.ReadFile(junit)
	// every default case against both nodes
	if got := strings.Count(string(x), "<testcase "); got != 15*3 {
		t.Errorf("%d testcases in the JUnit file, want 45 (15 default cases x 3 nodes)", got)
	}
	if !strings.Contains(stdout, "45 passed, every case held") || !strings.Contains(stdout, "outage-long") {
		t.Errorf("summary:\n%s", stdout)
	}

	code, stdout, stderr = chaosCLI(t, "../../testdata/chaos/fragile.yaml", "--faults", "../../testdata/chaos/matrix.yaml",
		"--junit", junit)
	if code != 1 {
		t.Fatalf("chaos fragile.yaml: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	xmllint(t, junit)
	x, _ = os.ReadFile(junit)
	if !bytes.Contains(x, []byte(`<testcase name="draft" classname="noderun.chaos.fragile.close-middle"`)) ||
		!bytes.Contains(x, []byte(`message="case close-middle, node draft: `)) || !bytes.Contains(x, []byte(`type="NR903"`)) ||
		!bytes.Contains(x, []byte("NR903 budget_exhausted")) {
		t.Errorf("the JUnit failure does not name node, case and diagnostic:\n%s", x)
	}
	if !strings.Contains(stdout, "FAIL close-middle @ draft") || !strings.Contains(stderr, "case runs failed") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// --list prints the default cases; --json is a report scripts can read; a bad
// matrix file is a usage error naming file and line.
func TestChaosListJSONAndBadMatrix(t *testing.T) {
	code, out, _ := runCLI(t, "chaos", "--list", "--profile", "ci")
	if code != 0 || !strings.Contains(out, "close-late") || !strings.Contains(out, "outage-long") || !strings.Contains(out, "2.5s") {
		t.Fatalf("--list: %d\n%s", code, out)
	}
	dir := t.TempDir()
	m := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(m, []byte("defaults: [close-middle]\ncases:\n  - name: x\n    fault: {kind: nap}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "chaos", "--list", "--faults", m)
	if code != 2 || !strings.Contains(errs, m+":4:") || !strings.Contains(errs, `unknown kind "nap"`) {
		t.Fatalf("bad matrix: %d %s", code, errs)
	}
	if err := os.WriteFile(m, []byte("defaults: [close-middle]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODERUN_CHAOS_TEST_KEY_UNSET", "")
	code, out, errs = runCLI(t, "--log-level", "error", "chaos", "../../testdata/chaos/small.yaml", "--faults", m, "--json", "--parallel", "1")
	var rep struct {
		Passed  int
		Results []struct {
			Case, Node string
			Pass       bool
			Codes      []string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Passed != 3 || len(rep.Results) != 3 ||
		rep.Results[0].Case != "close-middle" || rep.Results[0].Node != "draft" || !rep.Results[0].Pass {
		t.Fatalf("--json: %d %+v\n%s\n%s", code, rep, out, errs)
	}
}

// run --sim runs a graph whose providers hard-code base_url and api_key_env,
// with the variable unset; without --sim the same graph is refused.
func TestRunSimNeedsNoKeys(t *testing.T) {
	t.Setenv("NODERUN_CHAOS_TEST_KEY_UNSET", "")
	db := filepath.Join(t.TempDir(), "j.db")
	code, out, errs := runCLI(t, "run", "--sim", "--db", db, "../../testdata/chaos/small.yaml")
	if code != 0 || strings.Count(out, " completed") != 4 || !strings.Contains(out, "critique") {
		t.Fatalf("run --sim: %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = runCLI(t, "run", "--db", db, "../../testdata/chaos/small.yaml")
	if code != 2 || !strings.Contains(errs, "NODERUN_CHAOS_TEST_KEY_UNSET (api_key_env) is empty") {
		t.Fatalf("run without --sim: %d %s", code, errs)
	}
}

// Without --db, chaos journals to a temporary file. When a case fails, the
// file is kept and named: in the error, on the FAIL lines and in the JUnit
// failure, whose inspect command works as printed. When every case holds,
// it is removed.
func TestChaosKeepsAFailingJournal(t *testing.T) {
	tmp := t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	kept := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(tmp, "noderun-chaos-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	dir := t.TempDir()
	junit, matrix := filepath.Join(dir, "chaos.xml"), filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(matrix, []byte("defaults: [close-middle]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := chaosCLIEnv(t, env, "../../testdata/chaos/fragile.yaml", "--faults", matrix, "--junit", junit)
	if code != 1 {
		t.Fatalf("chaos fragile.yaml: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	dbs := kept()
	if len(dbs) != 1 {
		t.Fatalf("journals kept: %v, want 1\n%s", dbs, stdout)
	}
	db := filepath.Join(dbs[0], "chaos.db")
	if !strings.Contains(stderr, "case runs failed; the journal of every run: "+db) {
		t.Errorf("the error does not name the kept journal %s:\n%s", db, stderr)
	}
	// the FAIL lines end with the command that shows the failed target
	var inspect string
	for _, line := range strings.Split(stdout, "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "inspect: "); ok {
			inspect = cmd
		}
	}
	if !strings.Contains(stdout, "FAIL close-middle @ draft") || !strings.Contains(inspect, "--db "+db) {
		t.Fatalf("no inspect command naming %s after the FAIL lines:\n%s", db, stdout)
	}
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	xmllint(t, junit)
	if !strings.Contains(string(x), "inspect: "+inspect) {
		t.Errorf("the JUnit failure does not carry %q:\n%s", inspect, x)
	}
	// run as printed, by a shell, with noderun on the PATH
	sh := exec.Command("sh", "-c", inspect)
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(noderunBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NR903") || !strings.Contains(string(out), "budget_exhausted") {
		t.Fatalf("%s: %v\n%s", inspect, err, out)
	}

	// every case holds: the temporary journal goes
	code, stdout, stderr = chaosCLIEnv(t, env, "../../testdata/chaos/small.yaml", "--faults", matrix)
	if code != 0 {
		t.Fatalf("chaos small.yaml: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := kept(); len(got) != 1 || got[0] != filepath.Dir(db) {
		t.Errorf("journals after a run that held: %v, want only the failed run's %s", got, db)
	}
}
