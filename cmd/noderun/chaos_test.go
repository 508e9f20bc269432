package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner/chaos"
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
	return noderunProcess(t, extra, append([]string{"--log-level", "error", "chaos"}, args...)...)
}

// noderunProcess runs noderun with args as a process, stdout and stderr
// piped, with extra variables in its environment and no OpenAI settings.
func noderunProcess(t *testing.T, extra []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(noderunBinary(t), args...)
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
	t.Parallel()
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
	if code != 2 || !strings.Contains(errs, m+":4:") || !strings.Contains(errs, `fault: kind: want one of close, reset, cut, silence, status, queued, refuse, outage, error_event, got "nap"`) {
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
	t.Parallel()
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

// Case runs go at once, up to --parallel, each judged on its own: with the
// default log level and stderr piped, stderr is one line per case run as
// it ends (the runs' own logs stay in the journal) and stdout the table
// and its summary; in the JUnit file, which validates, each testcase's time
// is its case run's duration, so that they add up to more than the wall
// time; the JSON report's start times never put more than --parallel runs
// side by side, and a run waits for a slot. Time figures are compared with
// each other, never with a threshold.
func TestChaosRunsCasesConcurrently(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junit, matrix := filepath.Join(dir, "chaos.xml"), filepath.Join(dir, "m.yaml")
	// idle-silence waits out the quick profile's 1 s idle window, and
	// rate-limited its Retry-After: runs long enough to overlap
	if err := os.WriteFile(matrix, []byte("defaults: [idle-silence, rate-limited, close-middle]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const runs = 9   // 3 cases x 3 nodes
	noderunBinary(t) // built before the clock starts
	began := time.Now()
	code, stdout, stderr := noderunProcess(t, nil, "chaos", "../../testdata/chaos/small.yaml", "--faults", matrix,
		"--junit", junit, "--parallel", "8")
	wall := time.Since(began)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}

	// (c) piped: one line per case run, numbered as they end, then nothing
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != runs {
		t.Fatalf("stderr has %d lines, want one per case run (%d):\n%s", len(lines), runs, stderr)
	}
	seen := map[string]bool{}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 7 || f[0] != "chaos" || f[1] != fmt.Sprintf("%d/%d", i+1, runs) || f[2] != "pass" || f[4] != "@" {
			t.Fatalf("stderr line %d is not a case run's: %q\n%s", i+1, l, stderr)
		}
		seen[f[3]+"@"+f[5]] = true
	}
	if len(seen) != runs {
		t.Errorf("stderr names %d case runs, want %d:\n%s", len(seen), runs, stderr)
	}
	out := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(out) != runs+2 || !strings.HasPrefix(out[len(out)-1], "chaos small: 9 runs of a fault case against a node, 9 passed, every case held") {
		t.Errorf("stdout is not the table and its summary:\n%s", stdout)
	}

	// (a) valid JUnit; (b) testcase times are durations that overlapped
	xmllint(t, junit)
	var doc struct {
		Suites []struct {
			Name      string  `xml:"name,attr"`
			Timestamp string  `xml:"timestamp,attr"`
			Time      float64 `xml:"time,attr"`
			Cases     []struct {
				Time float64 `xml:"time,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(x, &doc); err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, s := range doc.Suites {
		var longest float64
		for _, c := range s.Cases {
			sum += c.Time
			longest = max(longest, c.Time)
		}
		// a suite's time is the span of its runs: no shorter than its longest
		if s.Time < longest-0.001 {
			t.Errorf("suite %s: time %.3f, shorter than its longest testcase's %.3f", s.Name, s.Time, longest)
		}
		// (d) timestamps: when the suite's first run started, within the run
		ts, err := time.Parse("2006-01-02T15:04:05", s.Timestamp)
		if err != nil || ts.Before(began.UTC().Truncate(time.Second)) || ts.After(began.Add(wall).UTC()) {
			t.Errorf("suite %s: timestamp %q not within the run (%s, %s)", s.Name, s.Timestamp, began.UTC(), wall)
		}
	}
	t.Logf("testcase times add up to %.2fs in %.2fs of wall time", sum, wall.Seconds())
	if sum <= wall.Seconds() {
		t.Errorf("the testcases' times add up to %.2fs, no more than the wall time %.2fs: the case runs did not overlap\n%s", sum, wall.Seconds(), x)
	}

	// (d) per run: starts within the report, never more than --parallel at
	// once, and with fewer slots than runs, a run that waited for one
	code, stdout, stderr = noderunProcess(t, nil, "chaos", "../../testdata/chaos/small.yaml", "--faults", matrix,
		"--json", "--parallel", "2")
	var rep struct {
		Started  time.Time
		Seconds  float64
		Parallel int
		Results  []struct {
			Case, Node string
			Started    time.Time
			Seconds    float64
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || len(rep.Results) != runs || rep.Parallel != 2 {
		t.Fatalf("--json: exit %d, %d results\n%s\n%s", code, len(rep.Results), stdout, stderr)
	}
	end := func(i int) time.Time {
		return rep.Results[i].Started.Add(time.Duration(rep.Results[i].Seconds * float64(time.Second)))
	}
	firstEnd, lastStart := end(0), rep.Results[0].Started
	for i, r := range rep.Results {
		if r.Started.Before(rep.Started) || end(i).After(rep.Started.Add(time.Duration(rep.Seconds*float64(time.Second)))) {
			t.Errorf("%s @ %s ran %s for %.3fs, outside the report's %s + %.3fs", r.Case, r.Node, r.Started, r.Seconds, rep.Started, rep.Seconds)
		}
		at := 0 // runs going when this one started
		for j := range rep.Results {
			if !rep.Results[j].Started.After(r.Started) && end(j).After(r.Started) {
				at++
			}
		}
		if at > 2 {
			t.Errorf("%s @ %s started with %d runs going, more than --parallel 2", r.Case, r.Node, at)
		}
		if end(i).Before(firstEnd) {
			firstEnd = end(i)
		}
		if r.Started.After(lastStart) {
			lastStart = r.Started
		}
	}
	if lastStart.Before(firstEnd) {
		t.Errorf("every run started before the first one ended (%s < %s): --parallel 2 was not a bound", lastStart, firstEnd)
	}
	// the report lists them in case order, not as they ended
	if rep.Results[0].Case != "idle-silence" || rep.Results[0].Node != "draft" || rep.Results[runs-1].Case != "close-middle" {
		t.Errorf("results not in case order: %+v", rep.Results)
	}
}

// chaosIdleArgs are the arguments of a chaos run of a one-node graph whose
// profile's idle window is idle, against idle-silence alone: a run that
// waits on the idle window for all of its wall time.
func chaosIdleArgs(t *testing.T, idle string) []string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"profiles.yaml": fmt.Sprintf("lazy: {idle_timeout: %s, poll_after: %s, backoff: {base: 5ms, factor: 2, cap: 50ms}}\n", idle, idle),
		"graph.yaml": "name: lazy\nprofile: lazy\nprofiles: profiles.yaml\nproviders:\n  s: {kind: sim, api: chat}\n" +
			"nodes:\n  - {id: only, provider: s, prompt: hello}\n",
		"m.yaml": "defaults: [idle-silence]\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"chaos", filepath.Join(dir, "graph.yaml"), "--faults", filepath.Join(dir, "m.yaml")}
}

// The terminal line: runs finished of all, the run going longest, the time
// since the first run started, and an estimate that never undercuts what a
// running case is known to wait for (its idle window), however quickly the
// other cases went.
func TestChaosProgressLine(t *testing.T) {
	t.Parallel()
	var piped bytes.Buffer
	cp := newChaosProgress(&piped)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	cp.now = func() time.Time { return now }
	if got := cp.line(); got != "chaos: the reference run (no faults)…" {
		t.Errorf("before any case: %q", got)
	}
	cp.started(chaos.Start{Case: "idle-silence", Node: "research", Total: 4, At: t0, Expected: 90 * time.Second})
	cp.started(chaos.Start{Case: "close-early", Node: "plan", Total: 4, At: t0.Add(time.Second)})
	now = t0.Add(2 * time.Second)
	cp.done(chaos.Result{Case: "close-early", Node: "plan", Pass: true, Time: time.Second, Seconds: 1})
	cp.started(chaos.Start{Case: "close-early", Node: "report", Total: 4, At: now})
	now = t0.Add(3 * time.Second)
	cp.done(chaos.Result{Case: "close-early", Node: "report", Pass: false, Outcome: chaos.OutcomeFailed, Time: time.Second, Seconds: 1})
	now = t0.Add(41 * time.Second)
	if got, want := cp.line(), "case 2/4 · 1 failed · idle-silence @ research · 41s · eta 49s"; got != want {
		t.Errorf("line:\n got %q\nwant %q", got, want)
	}
	// piped: one line per run as it ends, a failure with its outcome
	want := "chaos 1/4  pass  close-early        @ plan             1.00s\n" +
		"chaos 2/4  FAIL  close-early        @ report           1.00s  failed\n"
	if piped.String() != want {
		t.Errorf("piped:\n%s\nwant:\n%s", piped.String(), want)
	}
	cp.stop()
	cp.stop()
	for d, want := range map[time.Duration]string{0: "0s", 1400 * time.Millisecond: "1s", 90 * time.Second: "90s",
		125 * time.Second: "2m5s", 90 * time.Minute: "1h30m", time.Hour: "1h"} {
		if got := roundDuration(d); got != want {
			t.Errorf("roundDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// The ci profile is suggested when silence cases alone kept the run going
// for most of its wall time and ci would at least halve it; not under ci,
// not when the other cases took as long, not when ci would save little.
func TestProfileHint(t *testing.T) {
	t.Parallel()
	builtins := profile.Set(profile.Builtins())
	def, _ := builtins.Get("default")
	ci, _ := builtins.Get("ci")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	result := func(kind sim.FaultKind, start, took time.Duration) chaos.Result {
		name := "close-middle"
		if kind == sim.FaultSilence {
			name = "idle-silence"
		}
		return chaos.Result{Case: name, Fault: sim.Fault{Kind: kind}, Started: t0.Add(start), Time: took}
	}
	report := func(wall time.Duration, rs ...chaos.Result) *chaos.Report {
		return &chaos.Report{Started: t0, Seconds: wall.Seconds(), Results: rs}
	}
	idle := report(91*time.Second, result(sim.FaultSilence, 0, 91*time.Second), result(sim.FaultClose, time.Second, 15*time.Second))
	got := profileHint(idle, def, builtins, "g.yaml")
	if !strings.HasPrefix(got, "hint: idle-silence waits out the idle window (default: 90s, ci: 2s)") ||
		!strings.Contains(got, "75s of this run's 91s; with --profile ci it takes 16s or less") ||
		!strings.HasSuffix(got, "noderun chaos g.yaml --profile ci") {
		t.Errorf("hint:\n%s", got)
	}
	for name, tc := range map[string]struct {
		rep  *chaos.Report
		prof profile.Profile
	}{
		"under ci":           {idle, ci},
		"others as long":     {report(91*time.Second, result(sim.FaultSilence, 0, 91*time.Second), result(sim.FaultClose, 0, 80*time.Second)), def},
		"no silence cases":   {report(10*time.Second, result(sim.FaultClose, 0, 10*time.Second)), def},
		"ci would not halve": {report(4*time.Second, result(sim.FaultSilence, 0, 4*time.Second)), def},
	} {
		if got := profileHint(tc.rep, tc.prof, builtins, "g.yaml"); got != "" {
			t.Errorf("%s: hint %q", name, got)
		}
	}
}

// On a terminal, chaos shows one line redrawn in place while the cases
// run, "case 0/1 · idle-silence @ only · 1s · eta 2s", then only the table
// and its summary: no line per case, no log line of the runs, and the
// redrawn line gone.
func TestChaosProgressOnTerminal(t *testing.T) {
	testkit.RealPeer(t, "tmux")
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is needed (apt-get install tmux; make tools installs it)")
	}
	args := chaosIdleArgs(t, "3s")
	sock := fmt.Sprintf("noderun-test-%d-%s", os.Getpid(), t.Name())
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	shell := fmt.Sprintf("%s %s; echo EXIT $?; sleep 5", noderunBinary(t), strings.Join(args, " "))
	if out, err := tm("new-session", "-d", "-x", "100", "-y", "20", "-s", "chaos", shell); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })
	live := regexp.MustCompile(`(?m)^case 0/1 · idle-silence @ only · \d+s · eta \d+s\s*$`)
	var screen string
	shown := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if screen, err = tm("capture-pane", "-p", "-J", "-t", "chaos"); err != nil {
			t.Fatalf("capture-pane: %v\n%s", err, screen)
		}
		shown = shown || live.MatchString(screen)
		if strings.Contains(screen, "EXIT ") {
			break
		}
	}
	if !strings.Contains(screen, "EXIT 0") || !strings.Contains(screen, "1 passed, every case held") {
		t.Fatalf("chaos did not end with its summary:\n%s", screen)
	}
	if !shown {
		t.Errorf("the redrawn line never showed")
	}
	var rest []string
	for _, l := range strings.Split(screen, "\n") {
		switch l = strings.TrimSpace(l); {
		case l == "", strings.HasPrefix(l, "CASE "), strings.HasPrefix(l, "idle-silence  only  pass"),
			strings.HasPrefix(l, "chaos lazy: 1 run of"), strings.HasPrefix(l, "EXIT "):
		default:
			rest = append(rest, l)
		}
	}
	if len(rest) > 0 {
		t.Errorf("lines besides the table and its summary:\n%s\n--- screen:\n%s", strings.Join(rest, "\n"), screen)
	}
}
