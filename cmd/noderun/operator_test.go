package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// One demo run (ci profile) is shared by the tests that only read it.
var demo struct {
	once             sync.Once
	db, stdout, errs string
	code             int
}

func demoRun(t *testing.T) (db, runJSON string) {
	t.Helper()
	demo.once.Do(func() {
		dir, err := os.MkdirTemp("", "noderun-demo-")
		if err != nil {
			demo.errs = err.Error()
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		demo.db = filepath.Join(dir, "demo.db")
		var out, errb bytes.Buffer
		demo.code = run([]string{"noderun", "run", "--db", demo.db, "--profile", "ci", "--json", "../../testdata/graphs/demo.yaml"}, &out, &errb)
		demo.stdout, demo.errs = out.String(), errb.String()
	})
	if demo.code != exitOK {
		t.Fatalf("demo run: exit %d\n%s", demo.code, demo.errs)
	}
	return demo.db, demo.stdout
}

// cleanups run after every test of the package (TestMain).
var cleanups []func()

// schemas reads the JSON schemas documented in docs/json.md, by name.
func schemas(t *testing.T) map[string]*jsonschema.Schema { return testkit.Schemas(t) }

func validJSON(t *testing.T, sch *jsonschema.Schema, what, text string) {
	t.Helper()
	testkit.ValidJSON(t, sch, what, text)
}

// Every command's --json output is valid JSON that matches its schema in
// docs/json.md.
func TestJSONOutputMatchesDocumentedSchemas(t *testing.T) {
	t.Parallel()
	db, runOut := demoRun(t)
	sch := schemas(t)
	for _, name := range []string{"run", "status-runs", "status-run", "show", "show-attempts", "events", "diagnose", "validate", "profiles"} {
		if sch[name] == nil {
			t.Fatalf("docs/json.md has no schema %q", name)
		}
	}
	validJSON(t, sch["run"], "run --json", runOut)
	cases := []struct {
		schema string
		args   []string
		code   int
	}{
		{"status-runs", []string{"status", "--db", db, "--json"}, 0},
		{"status-run", []string{"status", "last", "--db", db, "--json"}, 0},
		{"show", []string{"show", "last", "report", "--db", db, "--json"}, 0},
		{"show-attempts", []string{"show", "last", "plan", "--attempts", "--db", db, "--json"}, 0},
		{"diagnose", []string{"diagnose", "last", "--db", db, "--json"}, 0},
		{"diagnose", []string{"diagnose", "last", "report", "--db", db, "--json"}, 0},
		{"validate", []string{"validate", "--json", "../../testdata/graphs/demo.yaml"}, 0},
		{"validate", []string{"validate", "--json", "../../testdata/graphs/demo.yaml", "../../testdata/graphs/invalid/cycle.yaml"}, exitUsage},
		{"profiles", []string{"profiles", "--json"}, 0},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, c.code, errs)
		}
		validJSON(t, sch[c.schema], strings.Join(c.args, " "), out)
	}
	// events: one object per line, every kind of event of the demo.
	code, out, errs := runCLI(t, "events", "last", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("events --json: exit %d\n%s", code, errs)
	}
	kinds := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		validJSON(t, sch["events"], "events --json line", sc.Text())
		var e struct{ Kind string }
		_ = json.Unmarshal(sc.Bytes(), &e)
		kinds[e.Kind]++
	}
	for _, k := range []string{"delta", "diagnostic", "ref", "done", "usage"} {
		if kinds[k] == 0 {
			t.Errorf("events --json: no %s event among %v", k, kinds)
		}
	}
}

func tinyGraph(t *testing.T) string {
	t.Helper()
	g := filepath.Join(t.TempDir(), "tiny.yaml")
	src := "name: tiny\nprofile: ci\nproviders:\n  s:\n    kind: sim\n    sim: {seed: 1, tokens: 20}\nnodes:\n  - {id: only, prompt: hello}\n"
	if err := os.WriteFile(g, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

// The friction list of issue 11: each case gets its documented exit code and
// a message on stderr, and nothing on stdout.
func TestCLIFriction(t *testing.T) {
	t.Parallel()
	db, _ := demoRun(t)
	tiny := tinyGraph(t)
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // a part of the message
		stdout bool   // the command succeeds and prints its result
	}{
		{"version", []string{"--version"}, 0, "", true},
		{"global flag after the command", []string{"run", tiny, "--log-level", "error", "--db", filepath.Join(t.TempDir(), "j.db")}, 0, "", true},
		{"flag after the arguments", []string{"show", "last", "report", "--json", "--db", db}, 0, "", true},
		{"typo in a command", []string{"statsu"}, exitUsage, `did you mean "status"?`, false},
		{"typo in a subcommand", []string{"sim", "serv"}, exitUsage, `did you mean "serve"?`, false},
		{"typo in a flag", []string{"status", "--josn", "--db", db}, exitUsage, "did you mean --json?", false},
		{"typo in a flag after an argument", []string{"status", "last", "--josn", "--db", db}, exitUsage, "unknown flag --josn", false},
		{"unknown event kind", []string{"events", "last", "--kind", "bogus", "--db", db}, exitUsage, `--kind "bogus": must be one of`, false},
		{"unknown node filter", []string{"events", "last", "--node", "nosuch", "--db", db}, exitUsage, `has no node "nosuch"`, false},
		{"unknown log level", []string{"status", "--log-level", "loud", "--db", db}, exitUsage, `--log-level "loud"`, false},
		{"unknown log format", []string{"status", "--log-format", "yaml", "--db", db}, exitUsage, `--log-format "yaml"`, false},
		{"retry a completed node", []string{"resume", "last", "--retry", "critique", "--db", db}, exitUsage, "nothing to retry", false},
		{"retry a node that does not exist", []string{"resume", "last", "--retry", "nosuch", "--db", db}, exitUsage, `has no node "nosuch"`, false},
		{"show without a node", []string{"show", "last", "--db", db}, exitUsage, "give RUN (or last) and NODE", false},
		{"show a node that does not exist", []string{"show", "last", "reprot", "--db", db}, exitUsage, `did you mean "report"?`, false},
		{"too many arguments", []string{"status", "last", "extra", "--db", db}, exitUsage, `unexpected "extra"`, false},
		{"run without a graph", []string{"run"}, exitUsage, "give exactly one graph file", false},
		{"no journal", []string{"status", "--db", filepath.Join(t.TempDir(), "none.db")}, exitUsage, "no journal at", false},
		{"bad price table", []string{"diagnose", "last", "--prices", filepath.Join(t.TempDir(), "none.yaml"), "--db", db}, exitUsage, "--prices", false},
		// issue 24: voice
		{"the figures alone", []string{"diagnose", "last", "--table", "--db", db}, 0, "", true},
		{"key=value lines", []string{"run", tiny, "--log-format", "logfmt", "--db", filepath.Join(t.TempDir(), "j.db")}, 0, "code=NR401", true},
		{"sentences", []string{"run", tiny, "--db", filepath.Join(t.TempDir(), "j.db")}, 0, "  NR401", true},
		// issue 24: chaos
		{"chaos with no case run at once", []string{"chaos", tiny, "--parallel", "0"}, exitUsage, "--parallel 0: give how many case runs go at once", false},
		{"chaos with empty answers", []string{"chaos", tiny, "--tokens", "0"}, exitUsage, "--tokens 0: give the length", false},
		{"chaos waiting on idle windows suggests ci", chaosIdleArgs(t, "6s"), 0, "with --profile ci it takes", true},
		// issue 24: conventions
		{"completion script", []string{"completion", "bash"}, 0, "", true},
		{"completion for an unknown shell", []string{"completion", "tcsh"}, exitUsage, `unknown shell "tcsh" (known: bash, zsh, fish)`, false},
		{"version subcommand", []string{"version"}, 0, "", true},
		{"help in groups", []string{"--help"}, 0, "", true},
		{"a command's short help", []string{"report", "--help"}, 0, "", true},
		{"help for an unknown command", []string{"help", "stauts"}, exitUsage, `unknown command "stauts" for "noderun"; did you mean "status"?`, false},
		{"flag without its value", []string{"run", tiny, "--input"}, exitUsage, "--input needs KEY=VALUE", false},
		{"flag without a value, generic", []string{"status", "--db"}, exitUsage, "--db needs FILE", false},
		{"number flag given a word", []string{"run", tiny, "--parallel", "many"}, exitUsage, `--parallel needs a whole number, not "many"`, false},
		{"unknown profile", []string{"run", tiny, "--profile", "x", "--db", filepath.Join(t.TempDir(), "j.db")}, exitUsage, `unknown profile "x" (known: ci, default, patient)`, false},
		{"unknown profile on resume", []string{"resume", "last", "--profile", "x", "--sim", "--db", db}, exitUsage, `unknown profile "x" (known: ci, default, patient)`, false},
		{"price table with a word for a price", []string{"diagnose", "last", "--prices", tempFile(t, "prices.yaml", "gpt-5:\n  input: 1.25\n  output: ten\n"), "--db", db},
			exitUsage, `prices.yaml:3: gpt-5: output: "ten" is not a number`, false},
		{"profiles durations", []string{"profiles"}, 0, "", true},
		{"a graph file that does not exist", []string{"run", "nosuch.yaml", "--db", filepath.Join(t.TempDir(), "j.db")}, exitUsage, "graph nosuch.yaml: no such file or directory", false},
		{"retry an unknown node starts nothing", []string{"resume", "last", "--retry", "deploy", "--sim", "--db", db}, exitUsage, `has no node "deploy"`, false},
		// issue 24: read-only
		{"a journal that is not SQLite", []string{"status", "--db", notAJournal(t, "notes")}, exitUsage, "notes.db is not a noderun journal (not an SQLite file); check --db", false},
		{"a journal that is a directory", []string{"show", "last", "report", "--db", notAJournal(t, "dir")}, exitUsage, "dir.db is not a noderun journal (a directory)", false},
		{"another program's database", []string{"events", "last", "--db", notAJournal(t, "other")}, exitUsage, "other.db is not a noderun journal (an SQLite database without noderun's tables)", false},
		{"an empty journal file", []string{"diagnose", "last", "--db", notAJournal(t, "empty")}, exitUsage, "empty.db is not a noderun journal (an empty file)", false},
		{"resume a journal its runner left empty", []string{"resume", "last", "--db", notAJournal(t, "empty")}, exitUsage, "has no runs: it is empty", false},
		{"resume what is not a journal", []string{"resume", "last", "--db", notAJournal(t, "notes")}, exitUsage, "notes.db is not a noderun journal (not an SQLite file)", false},
		{"show with no journal", []string{"show", "last", "report", "--db", "bad"}, exitUsage, "no journal at bad (use --db)", false},
		// issue 27: cache
		{"refresh a node that does not exist", []string{"run", tiny, "--refresh", "onyl", "--db", filepath.Join(t.TempDir(), "j.db")}, exitUsage,
			`--refresh onyl: graph ` + tiny + ` has no node "onyl"; did you mean "only"?`, false},
		{"a cache_ttl that is not a duration", []string{"run", tempFile(t, "ttl.yaml", "name: t\nproviders: {s: {kind: sim}}\nnodes:\n  - {id: only, prompt: hi,\n     cache_ttl: a week}\n"),
			"--db", filepath.Join(t.TempDir(), "j.db")}, exitUsage, `ttl.yaml:5: node "only": cache_ttl must be a duration like 30m, 24h or 168h, not "a week"`, false},
		{"cache from a journal that does not exist", []string{"run", tiny, "--cache-from", "nosuch.db", "--db", filepath.Join(t.TempDir(), "j.db")}, exitUsage,
			"--cache-from nosuch.db: no such file", false},
		{"cache from a file that is not a journal", []string{"run", tiny, "--cache-from", notAJournal(t, "notes"), "--db", filepath.Join(t.TempDir(), "j.db")}, exitUsage,
			"notes.db is not a noderun journal (not an SQLite file)", false},
		{"cache switches on Temporal", []string{"run", tiny, "--refresh", "only", "--temporal", "127.0.0.1:1"}, exitUsage,
			"--no-cache, --refresh and --cache-from are for local runs", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, stderr)
			}
			if c.stdout != (stdout != "") {
				t.Errorf("stdout (want output: %v):\n%s", c.stdout, stdout)
			}
			if c.code == exitUsage && !strings.Contains(stderr, "usage:") && !strings.Contains(stderr, "must be one of") &&
				!strings.Contains(stderr, "no node") && !strings.Contains(stderr, "no journal") &&
				!strings.Contains(stderr, "nothing to retry") && !strings.Contains(stderr, "--prices") &&
				!strings.Contains(stderr, "(known: ") && !strings.Contains(stderr, "no such file") &&
				!strings.Contains(stderr, "not a noderun journal") && !strings.Contains(stderr, "has no runs") &&
				!strings.Contains(stderr, ".yaml:") && !strings.Contains(stderr, "for local runs") {
				t.Errorf("a usage error without a usage line:\n%s", stderr)
			}
			// issue 24: nothing starts before the arguments are checked, and Go's own words do not leak.
			if c.code == exitUsage && strings.Contains(stderr, "simulator serving") {
				t.Errorf("a simulator started before the arguments were checked:\n%s", stderr)
			}
			if m := goWords.FindString(stderr); m != "" {
				t.Errorf("Go's own words on stderr (%q):\n%s", m, stderr)
			}
		})
	}
}

// The closing hint of a run is a command that works as printed.
func TestClosingHintWorksAsPrinted(t *testing.T) {
	t.Parallel()
	bin := noderunBinary(t)
	dir := t.TempDir()
	tiny := tinyGraph(t)
	cmd := exec.Command(bin, "run", "--db", "other.db", tiny)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	hint := lines[len(lines)-1]
	show, rest, ok := strings.Cut(strings.TrimPrefix(hint, "output: "), "   (what recovery did: ")
	if !ok || !strings.HasPrefix(hint, "output: "+bin+" show ") {
		t.Fatalf("closing hint: %q", hint)
	}
	for _, command := range []string{show, strings.TrimSuffix(rest, ")")} {
		sh := exec.Command("sh", "-c", command)
		sh.Dir = dir
		got, err := sh.CombinedOutput()
		if err != nil || len(got) == 0 {
			t.Errorf("%s: %v\n%s", command, err, got)
		}
	}
}

// The demo graph against an external simulator: for each recovered node,
// diagnose's regenerated and preserved tokens agree with what the simulator
// counts in /sim/stats (tokens_generated = needed + regenerated).
func TestDiagnoseMatchesSimulatorStats(t *testing.T) {
	bin := noderunBinary(t)
	src, err := os.ReadFile("../../testdata/graphs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]any
	if err := yaml.Unmarshal(src, &g); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	urls := map[string]string{}
	provs := g["providers"].(map[string]any)
	for name, p := range provs {
		spec := p.(map[string]any)
		cfg, _ := yaml.Marshal(spec["sim"])
		file := filepath.Join(dir, name+"-sim.yaml")
		if err := os.WriteFile(file, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		urls[name] = startSim(t, bin, file)
		kind := "openai"
		if spec["api"] == "responses" {
			kind = "responses"
		}
		provs[name] = map[string]any{"kind": kind, "base_url": urls[name], "api_key_env": "NODERUN_TEST_KEY", "model": "sim-1"}
	}
	t.Setenv("NODERUN_TEST_KEY", "sk-test")
	out, _ := yaml.Marshal(g)
	graph := filepath.Join(dir, "demo-external.yaml")
	if err := os.WriteFile(graph, out, 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "demo.db")
	if code, _, errs := runCLI(t, "run", "--db", db, "--profile", "ci", graph); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	code, js, errs := runCLI(t, "diagnose", "last", "--db", db, "--json")
	if code != exitOK {
		t.Fatalf("diagnose: exit %d\n%s", code, errs)
	}
	var d ledger.Account
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	nodes := g["nodes"].([]any)
	provOf := map[string]string{}
	for _, n := range nodes {
		m := n.(map[string]any)
		provOf[m["id"].(string)] = m["provider"].(string)
	}
	sum := map[string]int{}
	recovered := 0
	for _, n := range d.Nodes {
		t.Logf("%s: %s", n.ID, n.Verdict)
		sum[provOf[n.ID]] += n.Tokens.Needed + n.Tokens.Regenerated
		if n.Attempts > 1 || len(n.Faults) > 0 {
			recovered++
			if n.Tokens.Regenerated+n.Tokens.Preserved == 0 {
				t.Errorf("%s recovered but diagnose reports neither regenerated nor preserved tokens: %+v", n.ID, n.Tokens)
			}
		}
		if n.Attempts > 1 && n.Tokens.Regenerated == 0 {
			t.Errorf("%s was retried from scratch but regenerated nothing: %+v", n.ID, n.Tokens)
		}
		if n.RecoverySteps["reattached"] > 0 && (n.Tokens.Preserved == 0 || n.Tokens.Regenerated != 0) {
			t.Errorf("%s re-attached: want preserved > 0 and regenerated 0, got %+v", n.ID, n.Tokens)
		}
	}
	if recovered < 3 {
		t.Errorf("%d recovered nodes, want the demo's 3", recovered)
	}
	for name, url := range urls {
		var st struct {
			TokensGenerated int `json:"tokens_generated"`
		}
		resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/sim/stats")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.TokensGenerated != sum[name] {
			t.Errorf("provider %s: the simulator generated %d tokens, diagnose says needed + regenerated = %d", name, st.TokensGenerated, sum[name])
		}
	}
	if d.Totals.Tokens.Generated != d.Totals.Tokens.Needed+d.Totals.Tokens.Regenerated+d.Totals.Tokens.Unfinished {
		t.Errorf("totals do not add up: %+v", d.Totals.Tokens)
	}
}

// startSim runs `noderun sim serve` as its own process and returns its base URL.
func startSim(t *testing.T, bin, faults string) string {
	t.Helper()
	cmd := exec.Command(bin, "sim", "serve", "--faults", faults, "--log-level", "error")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case url, ok := <-line:
		if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("sim serve printed %q", url)
		}
		return url
	case <-time.After(20 * time.Second):
		t.Fatal("sim serve printed no base URL")
	}
	return ""
}

// Piped, stderr is one log stream: each recovery step once (no progress
// line repeating a diagnostic), and with --log-format json every line is JSON.
func TestPipedLogIsOneStream(t *testing.T) {
	t.Parallel()
	demoRun(t)
	steps := 0
	for _, l := range strings.Split(demo.errs, "\n") {
		if strings.Contains(l, "retrying 1/3") || strings.Contains(l, "reconnecting 1/8") || strings.Contains(l, "continuing from byte") {
			steps++
			if !strings.Contains(l, "  NR1") {
				t.Errorf("a recovery step outside the log stream: %s", l)
			}
		}
		if strings.HasPrefix(l, "noderun: ") && strings.Contains(l, "s ") {
			t.Errorf("a separate progress line: %s", l)
		}
	}
	if steps != 3 { // the demo's two continued chat answers and one reconnect, once each
		t.Errorf("%d recovery step lines, want 3:\n%s", steps, demo.errs)
	}
	code, _, errs := runCLI(t, "run", "--log-format", "json", "--db", filepath.Join(t.TempDir(), "j.db"), tinyGraph(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("not a JSON line: %s", l)
		}
	}
	if !strings.Contains(errs, `"msg":"streaming","node":"only"`) || !strings.Contains(errs, `"code":"NR402"`) {
		t.Errorf("the JSON stream lacks the node's start or the run's end:\n%s", errs)
	}
}
