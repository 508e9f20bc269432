package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner"
)

func TestParseMatrix(t *testing.T) {
	m, err := ParseMatrix([]byte(`
defaults: [close-early]
cases:
  - name: slow
    at: middle
    expect: fail
    outcomes: [deadline_passed, unsafe_refused]
    codes: [NR107, budget_exhausted|NR904]
    nodes: [a]
    fault: {kind: silence, duration: 2s, endpoint: chat}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Cases[0]
	if len(m.Defaults) != 1 || c.Name != "slow" || c.At != PointMiddle || c.Expect != ExpectFail || c.Codes[0] != "NR107" ||
		!slices.Equal(c.Outcomes, []Outcome{OutcomeDeadline, OutcomeUnsafeRefused}) ||
		c.Nodes[0] != "a" || c.Fault.Kind != sim.FaultSilence || c.Fault.Duration != 2*time.Second || c.Fault.Endpoint != "chat" {
		t.Fatalf("%+v", m)
	}
	if m, err := ParseMatrix(nil); err != nil || m.Defaults != nil || m.Cases != nil {
		t.Fatalf("empty file: %+v %v", m, err)
	}
	for _, tc := range []struct{ src, want string }{
		{"defaults: 3\n", "1: defaults: want a list"},
		{"cases: {}\n", "1: cases: want a list"},
		{"colour: red\n", `1: unknown field "colour"`},
		{"defaults: []\ndefaults: []\n", `2: duplicate field "defaults"`},
		{"cases:\n  - {fault: {kind: close}}\n", "2: a case needs a name"},
		{"cases:\n  - {name: a b, fault: {kind: close}}\n", "2: a case needs a name without spaces"},
		{"cases:\n  - {name: x}\n", `2: case "x": fault is required`},
		{"cases:\n  - name: x\n    fault: {kind: nap}\n", `3: case "x": fault: kind: want one of close, reset, cut, silence, status, queued, refuse, outage, error_event, got "nap"`},
		{"cases:\n  - name: x\n    fault: {kind: close, node: a}\n", "3: case \"x\": fault.node is set per target"},
		{"cases:\n  - name: x\n    fault: {kind: refuse}\n", "3: case \"x\": refuse cannot be aimed"},
		{"cases:\n  - name: x\n    at: end\n    fault: {kind: close}\n", `3: at: want early, middle or late, got "end"`},
		{"cases:\n  - name: x\n    expect: maybe\n    fault: {kind: close}\n", `3: expect: want recover or fail`},
		{"cases:\n  - name: x\n    colour: red\n    fault: {kind: close}\n", `3: unknown case field "colour"`},
		{"cases: [\n", "1: "},
		{"cases:\n  - name: x\n    at: late\n    fault: {kind: status, status: 500}\n", `2: case "x": at places a close`},
		{"cases:\n  - name: x\n    outcomes: [exploded]\n    fault: {kind: close}\n", `3: outcomes: unknown outcome "exploded"`},
		{"cases:\n  - name: x\n    outcomes: [completed]\n    fault: {kind: close}\n", `3: outcomes: unknown outcome "completed"`},
		{"cases:\n  - name: x\n    expect: recover\n    outcomes: [rejected]\n    fault: {kind: close}\n", `4: case "x": outcomes are for expect: fail`},
		{"cases:\n  - name: x\n    codes:\n      - NR101\n      - NR999|NR103\n    fault: {kind: close}\n", `5: codes: unknown diagnostic code "NR999"`},
		{"cases:\n  - name: x\n    harness_codes: [thread_resumd]\n    fault: {kind: close}\n", `3: harness_codes: unknown diagnostic code "thread_resumd"`},
	} {
		_, err := ParseMatrix([]byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want prefix %q", tc.src, err, tc.want)
		}
	}
}

func FuzzParseMatrix(f *testing.F) {
	f.Add([]byte("defaults: [close-early]\ncases:\n  - {name: x, at: late, fault: {kind: cut}}\n"))
	f.Add([]byte("cases:\n  - name: y\n    fault: {kind: status, status: 429, retry_after: \"1\"}\n"))
	f.Add([]byte("cases:\n  - {name: z, outcomes: [rejected], codes: [NR902], fault: {kind: status, status: 400}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMatrix(b)
		if err != nil {
			return
		}
		for _, c := range m.Cases {
			if c.Name == "" || c.Fault.Validate() != nil || c.Fault.Node != "" {
				t.Fatalf("accepted a bad case %+v", c)
			}
			for _, o := range c.Outcomes {
				if c.Expect != ExpectFail || !slices.Contains(failureOutcomes(), o) {
					t.Fatalf("accepted outcome %q of a case expecting %s", o, c.Expect)
				}
			}
		}
	})
}

func TestSelect(t *testing.T) {
	defs := DefaultCases(profile.Builtins()["ci"])
	if all, _ := Select(defs, nil); len(all) != len(defs) {
		t.Fatal("nil matrix is not every default")
	}
	got, err := Select(defs, &Matrix{Defaults: []string{"reset-late"}, Cases: []Case{{Name: "mine"}}})
	if err != nil || len(got) != 2 || got[0].Name != "reset-late" || got[1].Name != "mine" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := Select(defs, &Matrix{Defaults: []string{"nope"}}); err == nil {
		t.Error("unknown default accepted")
	}
	if _, err := Select(defs, &Matrix{Cases: []Case{{Name: "cut-late"}}}); err == nil {
		t.Error("a duplicate name accepted")
	}
	if got, _ := Select(defs, &Matrix{Defaults: []string{}}); len(got) != 0 {
		t.Error("defaults: [] kept defaults")
	}
}

func openJournal(t *testing.T) *journal.Journal {
	t.Helper()
	return testkit.TempJournal(t, "chaos.db")
}

// runMatrix runs the cases m selects from g's profile's default matrix (and
// adds) against g, with opts (a fresh journal unless opts has one), and
// returns the report, its table and how many case runs the selected cases
// make on g (each case once per node it is aimed at).
func runMatrix(t *testing.T, g *runner.Graph, m *Matrix, opts Options) (*Report, string, int) {
	t.Helper()
	prof, err := runner.Prepare(g, &runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Select(DefaultCases(prof), m)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Journal == nil {
		opts.Journal = openJournal(t)
	}
	opts.Cases = cases
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = rep.WriteTable(&buf)
	return rep, buf.String(), CaseRuns(g, cases)
}

func loadGraph(t *testing.T, name string) *runner.Graph {
	t.Helper()
	g, err := runner.LoadGraph(filepath.Join("..", "..", "testdata", "chaos", name))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Case results depend on the graph and the seed, not on scheduling: cases
// of every kind give the same verdicts and states, in the same order, one
// case run and one node at a time and with eight of each at once (review
// and critique then run side by side on one simulator, beside other case
// runs on theirs). The CLI test runs the whole default matrix.
func TestResultsDoNotDependOnScheduling(t *testing.T) {
	g := loadGraph(t, "small.yaml")
	j := openJournal(t)
	m := &Matrix{Defaults: []string{"close-middle", "cut-late", "reset-early", "idle-silence", "unavailable", "outage-brief", "outage-long"}}
	var verdicts [2][]string
	for i, parallel := range []int{1, 8} {
		rep, table, n := runMatrix(t, g, m, Options{Journal: j, Seed: 5, Parallel: parallel, Nodes: parallel, Getenv: func(string) string { return "" }})
		if !rep.OK() || rep.Runs != n {
			t.Fatalf("parallel %d: %d results, %d failed\n%s", parallel, rep.Runs, rep.Failed, table)
		}
		for _, r := range rep.Results {
			// the Responses node regenerates nothing, whatever the fault
			if r.Node == "review" && r.Regenerated != 0 {
				t.Errorf("%s @ review regenerated %d tokens", r.Case, r.Regenerated)
			}
			verdicts[i] = append(verdicts[i], fmt.Sprintf("%s@%s %v %s", r.Case, r.Node, r.Pass, r.State))
		}
	}
	if a, b := strings.Join(verdicts[0], "\n"), strings.Join(verdicts[1], "\n"); a != b {
		t.Fatalf("results differ with scheduling:\n--- parallel 1\n%s\n--- parallel 8\n%s", a, b)
	}
}

// A case that cannot be aimed (a point past the end of the stream), a fault
// that never acts, and the reference run failing are reported, not passed.
func TestUnaimableAndReference(t *testing.T) {
	g := loadGraph(t, "small.yaml")
	j := openJournal(t)
	ctx := context.Background()
	never := Case{Name: "never", Expect: ExpectRecover, Nodes: []string{"draft"},
		Fault: sim.Fault{Kind: sim.FaultClose, AfterEvents: 10_000}}
	rep, err := Run(ctx, g, Options{Journal: j, Cases: []Case{never}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Results) != 1 || !strings.Contains(strings.Join(rep.Results[0].Failures, ";"), "the fault never acted") {
		t.Fatalf("%+v", rep.Results)
	}
	bad := Case{Name: "bad", Nodes: []string{"nope"}, Fault: sim.Fault{Kind: sim.FaultClose}}
	if _, err := Run(ctx, g, Options{Journal: j, Cases: []Case{bad}}); err == nil || !strings.Contains(err.Error(), `no node "nope"`) {
		t.Fatalf("unknown node: %v", err)
	}
	// a max_output_tokens below the simulated length: the Responses node
	// ends incomplete (as the real API does), so there is no reference
	g2 := loadGraph(t, "small.yaml")
	g2.Node("review").MaxOutputTokens = 4
	if _, err := Run(ctx, g2, Options{Journal: j, Cases: []Case{never}}); err == nil || !strings.Contains(err.Error(), "reference run") {
		t.Fatalf("reference: %v", err)
	}
}

// A Codex harness node runs the real Codex CLI pointed at the simulator; it
// names its node (env_http_headers), so faults find it, and a resumed thread
// is judged as the new turn it is. Harness nodes are side_effects: unsafe by
// default: recovering them must never send their request again.
func TestHarnessNodeUnderChaos(t *testing.T) {
	// The agents profile, as the other CLIs': quick's 3 s recovery deadline
	// is shorter than a Codex restart on a loaded machine (5.15 s seen in a
	// make test, server-error case: NR904 deadline_exceeded).
	rep, table := harnessChaos(t, `name: agent
profile: agents
profiles: %q
providers:
  codex:
    kind: harness
    command: %q
nodes:
  - id: fix
    provider: codex
    prompt: Say hello.
`, []string{"cut-middle", "server-error"}, codexbin.Path(t))
	if !rep.OK() || len(rep.Results) != 2 {
		t.Fatalf("%s", table)
	}
	for _, r := range rep.Results {
		if r.Retries != 0 || !slices.Contains(r.Codes, "NR303") {
			t.Errorf("%s: the thread was not resumed, or the request was sent again:\n%s", r.Case, table)
		}
	}
}

// Claude Code and Gemini CLI nodes run the real CLIs pointed at the
// simulator's Anthropic Messages and Gemini endpoints, where the faults are
// aimed. Claude Code absorbs a single drop by its own retry (NR302); a cut
// Gemini CLI turn is found dropped (NR306) and started again under the same
// session id, the one retry an unsafe node may take, since nothing of it
// took effect. Both complete with the reference output.
func TestAgentHarnessNodesUnderChaos(t *testing.T) {
	rep, table := harnessChaos(t, `name: agents
profile: agents
profiles: %q
providers:
  claude: {kind: harness, harness: claude, command: %q}
  gemini: {kind: harness, harness: gemini, command: %q, env: {TMPDIR: %q}}
nodes:
  - {id: notes-claude, provider: claude, prompt: Write the release notes.}
  - {id: notes-gemini, provider: gemini, prompt: Write the release notes.}
`, []string{"cut-middle", "server-error", "outage-brief"}, codexbin.Claude(t), codexbin.Gemini(t), t.TempDir())
	if !rep.OK() || len(rep.Results) != 6 {
		t.Fatalf("%s", table)
	}
	for _, r := range rep.Results {
		if r.Node == "notes-gemini" && (r.Retries != 1 || !slices.Contains(r.Codes, "NR306")) {
			t.Errorf("%s: the Gemini session was not found dropped and started again once:\n%s", r.Case, table)
		}
	}
}

// harnessChaos runs the default cases named by cases against the graph
// src, a format whose first argument is testdata/chaos/profiles.yaml and
// the rest args, and returns the report and its table.
func harnessChaos(t *testing.T, src string, cases []string, args ...any) (*Report, string) {
	t.Helper()
	profiles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "chaos", "profiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "graph.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, src, append([]any{profiles}, args...)...), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := runner.LoadGraph(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, table, _ := runMatrix(t, g, &Matrix{Defaults: cases}, Options{})
	return rep, table
}

// A chat node whose server continues a dropped answer: every drop after some
// output is continued (NR110, counted with the reconnects) and nothing the
// node received is generated again.
func TestContinuationUnderChaos(t *testing.T) {
	g := loadGraph(t, "continued.yaml")
	rep, table, n := runMatrix(t, g, &Matrix{Defaults: []string{"close-middle", "cut-late", "reset-early", "idle-silence"}},
		Options{Seed: 5, Getenv: func(string) string { return "" }})
	if !rep.OK() || len(rep.Results) != n {
		t.Fatalf("%d of %d failed\n%s", rep.Failed, len(rep.Results), table)
	}
	for _, r := range rep.Results {
		if r.Regenerated != 0 || r.Retries != 0 || !slices.Contains(r.Codes, "NR110") {
			t.Errorf("%s: regenerated %d, retries %d, codes %v: want a continue and nothing regenerated", r.Case, r.Regenerated, r.Retries, r.Codes)
		}
	}
}

// A side_effects: unsafe node that an outage cuts is held (unsafe_replay_refused)
// rather than sent again: outage-long accepts that, as it accepts an
// idempotent node that meets the outage as refused connects and gives up
// with its budget spent, on either API.
func TestOutageLongHoldsUnsafeNodes(t *testing.T) {
	g := loadGraph(t, "unsafe.yaml")
	prof, err := runner.Prepare(g, &runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, table, _ := runMatrix(t, g, &Matrix{Defaults: []string{"outage-long", "close-middle"}}, Options{Seed: 3})
	buf := bytes.NewBufferString(table)
	if !rep.OK() || rep.Runs != 6 {
		t.Fatalf("%d of %d failed\n%s", rep.Failed, rep.Runs, buf.String())
	}
	for _, r := range rep.Results {
		switch {
		case r.Node != "draft" && r.Retries != 0:
			t.Errorf("%s @ %s: retried %d times (side_effects: unsafe)\n%s", r.Case, r.Node, r.Retries, buf.String())
		case r.Case != "outage-long":
		case r.Node != "draft" && (r.State != "failed" || !slices.Contains(r.Codes, "NR905")):
			t.Errorf("outage-long @ %s: %s %v: want held (NR905)\n%s", r.Node, r.State, r.Codes, buf.String())
		case r.Node == "draft" && (!slices.Contains(r.Codes, "NR106") || r.Retries != prof.Retries):
			t.Errorf("outage-long @ draft: %v, retries %d: want refused connects and the budget spent\n%s", r.Codes, r.Retries, buf.String())
		}
	}
}

// Cases are judged by how the target ended (its outcome, from the ledger),
// against what the case expects; codes a matrix file names are checked on
// top. Each assertion below is one that must fail as well as one that must
// hold, so that neither can pass by accident.
func TestJudgedByOutcome(t *testing.T) {
	g := loadGraph(t, "unsafe.yaml")
	m, err := ParseMatrix([]byte(`
defaults: [outage-long]
cases:
  - name: rejected
    description: 400 is a rejection, not retried
    nodes: [draft]
    outcomes: [rejected]
    fault: {kind: status, status: 400}
  - name: rejected-as-deadline
    nodes: [draft]
    expect: fail
    outcomes: [deadline_passed, budget_spent]
    fault: {kind: status, status: 400}
  - name: recovers-against-expectation
    nodes: [draft]
    expect: fail
    at: middle
    fault: {kind: close}
  - name: codes-by-name
    nodes: [draft]
    at: middle
    codes: [disconnect_detected, "NR103|NR102", recovered]
    fault: {kind: close}
  - name: codes-missing
    nodes: [draft]
    at: middle
    codes: [connect_failed]
    fault: {kind: close}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep, table, _ := runMatrix(t, g, m, Options{Seed: 3})
	buf := bytes.NewBufferString(table)
	want := map[string]struct {
		pass    bool
		outcome Outcome
		failure string
	}{
		"outage-long@draft":                  {true, OutcomeBudgetSpent, ""},
		"outage-long@publish":                {true, OutcomeUnsafeRefused, ""},
		"outage-long@announce":               {true, OutcomeUnsafeRefused, ""},
		"rejected@draft":                     {true, OutcomeRejected, ""},
		"rejected-as-deadline@draft":         {false, OutcomeRejected, `node "draft" ended rejected; the case expects deadline_passed or budget_spent`},
		"recovers-against-expectation@draft": {false, OutcomeCompleted, `node "draft" completed; the case expects it to fail`},
		"codes-by-name@draft":                {true, OutcomeCompleted, ""},
		"codes-missing@draft":                {false, OutcomeCompleted, `node "draft" lacks diagnostic connect_failed`},
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results, want %d\n%s", len(rep.Results), len(want), buf.String())
	}
	for _, r := range rep.Results {
		w, ok := want[r.Case+"@"+r.Node]
		if !ok || r.Pass != w.pass || r.Outcome != w.outcome || w.failure != "" && !strings.Contains(strings.Join(r.Failures, "; "), w.failure) {
			t.Errorf("%s @ %s: pass %v, outcome %s, failures %q; want %+v\n%s", r.Case, r.Node, r.Pass, r.Outcome, r.Failures, w, buf.String())
		}
	}
	// the code that says how the target ended is the one a JUnit reader looks up
	for _, r := range rep.Results {
		if r.Case == "rejected" && r.Diagnostic != diagnostics.DeterministicError.ID {
			t.Errorf("rejected @ draft: diagnostic %q", r.Diagnostic)
		}
	}
}

// A chat server that rejects the continuation form (400) makes the executor
// retry from scratch (continue_rejected): chaos counts that as the retry it
// is, so the output it regenerates is explained and the node passes.
func TestRejectedContinuationIsARetry(t *testing.T) {
	ctx := context.Background()
	g := loadGraph(t, "continued.yaml") // continues in the prefix form, which these servers reject
	ropts := runner.Options{Journal: openJournal(t), Getenv: func(string) string { return "" }}
	prof, err := runner.Prepare(g, &ropts)
	if err != nil {
		t.Fatal(err)
	}
	x := &caseRun{g: g, prof: prof, ropts: ropts,
		sim: sim.Config{Seed: 1, Tokens: DefaultTokens, Continuation: []string{sim.FormAssistantLast}}}
	discard := slog.New(slog.DiscardHandler)
	if _, err := x.reference(ctx, discard); err != nil {
		t.Fatalf("reference: %v", err)
	}
	c := Case{Name: "close-middle", Expect: ExpectRecover, At: PointMiddle, Fault: sim.Fault{Kind: sim.FaultClose}}
	r, err := x.run(ctx, c, g.Node("draft"), discard)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass || r.Retries != 1 || r.Regenerated == 0 || !slices.Contains(r.Codes, diagnostics.ContinueRejected.ID) {
		t.Fatalf("pass %v, retries %d, regenerated %d, codes %v, failures %q: want one retry (NR112) that explains what it regenerated",
			r.Pass, r.Retries, r.Regenerated, r.Codes, r.Failures)
	}
}

// Case runs overlap up to Parallel, each on its own simulator: Started and
// Progress are told of every run, one call at a time, never with more than
// Parallel runs going; the cases expected to take longest (a silence waits
// out the idle window) start first; the report lists the results in case
// order whatever the order they ended in; and the runs' log records reach
// the Logger tagged with their case and target.
func TestCasesRunConcurrently(t *testing.T) {
	g := loadGraph(t, "small.yaml")
	m := &Matrix{Defaults: []string{"close-middle", "unavailable", "idle-silence"}}
	var (
		mu              sync.Mutex // asserts that the callbacks never overlap
		going, most     int
		started, ended  []string
		expectedOfFirst time.Duration
	)
	enter := func() {
		if !mu.TryLock() {
			t.Error("a callback was called while another ran")
			mu.Lock()
		}
	}
	logs := newLogRecords()
	rep, table, n := runMatrix(t, g, m, Options{Seed: 5, Parallel: 3, Getenv: func(string) string { return "" },
		Logger: slog.New(logs),
		Started: func(s Start) {
			enter()
			defer mu.Unlock()
			if len(started) == 0 {
				expectedOfFirst = s.Expected
			}
			started = append(started, s.Case+"@"+s.Node)
			going++
			most = max(most, going)
			if s.Total != 9 || s.At.IsZero() {
				t.Errorf("start %+v: want 9 runs in all, and a time", s)
			}
		},
		Progress: func(r Result) {
			enter()
			defer mu.Unlock()
			ended = append(ended, r.Case+"@"+r.Node)
			going--
		}})
	if !rep.OK() || rep.Runs != n || len(started) != rep.Runs || len(ended) != rep.Runs {
		t.Fatalf("%d runs, %d started, %d ended\n%s", rep.Runs, len(started), len(ended), table)
	}
	if most > 3 || most < 2 {
		t.Errorf("at most %d runs went at once; want up to Parallel (3), and more than one", most)
	}
	if !strings.HasPrefix(started[0], "idle-silence@") || expectedOfFirst <= 0 {
		t.Errorf("first to start: %s (expected %s); want an idle-silence case, the longest", started[0], expectedOfFirst)
	}
	for i, r := range rep.Results {
		if want := m.Defaults[i/3]; r.Case != want || r.Node != g.Nodes[i%3].ID || r.Started.IsZero() || r.Time <= 0 {
			t.Errorf("result %d: %s @ %s started %s took %s; want %s @ %s, in case order", i, r.Case, r.Node, r.Started, r.Time, want, g.Nodes[i%3].ID)
		}
	}
	if tail, names := rep.SilenceTail(); len(names) != 1 || names[0] != "idle-silence" || tail < 0 {
		t.Errorf("silence tail %s of %v", tail, names)
	}
	for _, want := range []string{"close-middle@draft", "idle-silence@review", "reference@"} {
		if !logs.has(want) {
			t.Errorf("no log record tagged %s", want)
		}
	}
}

// When ctx ends, the runs under way stop and no more start: Run returns the
// context's error, with the results known before.
func TestCanceledChaosStops(t *testing.T) {
	g := loadGraph(t, "small.yaml")
	prof, err := runner.Prepare(g, &runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Select(DefaultCases(prof), &Matrix{Defaults: []string{"close-middle", "idle-silence", "rate-limited"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := Run(ctx, g, Options{Journal: openJournal(t), Cases: cases, Seed: 5, Parallel: 2,
		Getenv: func(string) string { return "" }, Progress: func(Result) { cancel() }})
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Runs < 1 || rep.Runs >= 9 || len(rep.Results) != rep.Runs {
		t.Fatalf("err %v; report %+v: want context.Canceled and the results known before", err, rep)
	}
}

// logRecords is a slog.Handler that keeps which case and target each record
// was tagged with.
type logRecords struct {
	tags *logTags
	with []slog.Attr
}

type logTags struct {
	mu  sync.Mutex
	set map[string]bool
}

func newLogRecords() *logRecords { return &logRecords{tags: &logTags{set: map[string]bool{}}} }

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	var c, n string
	tag := func(a slog.Attr) bool {
		switch a.Key {
		case "case":
			c = a.Value.String()
		case "target":
			n = a.Value.String()
		}
		return true
	}
	for _, a := range l.with {
		tag(a)
	}
	r.Attrs(tag)
	l.tags.mu.Lock()
	defer l.tags.mu.Unlock()
	l.tags.set[c+"@"+n] = true
	return nil
}

func (l *logRecords) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecords{tags: l.tags, with: append(slices.Clone(l.with), as...)}
}

func (l *logRecords) WithGroup(string) slog.Handler { return l }

func (l *logRecords) has(tag string) bool {
	l.tags.mu.Lock()
	defer l.tags.mu.Unlock()
	return l.tags.set[tag]
}

// Kind anthropic under chaos: draft's model takes no prefill, so its drops
// are retried (NR103); polish's does, so a drop after some output is
// continued by prefill (NR110) with nothing regenerated; review thinks, so
// it is retried; a mid-stream overloaded_error is recovered (NR105), an
// invalid_request_error is not.
func TestAnthropicUnderChaos(t *testing.T) {
	g := loadGraph(t, "anthropic.yaml")
	m, err := LoadMatrix(filepath.Join("..", "..", "testdata", "chaos", "anthropic-matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m.Defaults = []string{"close-middle", "cut-late", "reset-early", "overloaded-event", "overloaded-529"}
	rep, table, n := runMatrix(t, g, m, Options{Seed: 5, Getenv: func(string) string { return "" }})
	if !rep.OK() || len(rep.Results) != n {
		t.Fatalf("%d of %d failed\n%s", rep.Failed, len(rep.Results), table)
	}
	for _, r := range rep.Results {
		continued := slices.Contains(r.Codes, "NR110")
		switch {
		case r.Case == "invalid-request-event":
			if r.Outcome != OutcomeRejected || r.Retries != 0 {
				t.Errorf("%s @ %s: %s after %d retries, want rejected at once", r.Case, r.Node, r.Outcome, r.Retries)
			}
		case r.Case == "reset-early", r.Case == "overloaded-529": // no output yet: nothing to prefill
			if continued || r.Retries != 1 {
				t.Errorf("%s @ %s: codes %v, retries %d: want one retry", r.Case, r.Node, r.Codes, r.Retries)
			}
		case r.Node == "polish":
			if !continued || r.Retries != 0 || r.Regenerated != 0 {
				t.Errorf("%s @ polish: codes %v, retries %d, regenerated %d: want a continue and nothing regenerated", r.Case, r.Codes, r.Retries, r.Regenerated)
			}
		default: // draft (no prefill on claude-opus-4-6), review (thinking)
			if continued || r.Retries != 1 {
				t.Errorf("%s @ %s: codes %v, retries %d: want one retry", r.Case, r.Node, r.Codes, r.Retries)
			}
		}
	}
}

// Gemini nodes re-attach by interaction id after the last event_id: the
// whole default matrix passes, and no drop regenerates a token.
func TestGeminiUnderChaos(t *testing.T) {
	g := loadGraph(t, "gemini.yaml")
	rep, table, n := runMatrix(t, g, nil, Options{Seed: 3, Getenv: func(string) string { return "" }})
	if !rep.OK() || len(rep.Results) != n { // every case on both nodes (Anthropic's own cases aside)
		t.Fatalf("%d of %d failed\n%s", rep.Failed, len(rep.Results), table)
	}
	for _, r := range rep.Results {
		if r.Regenerated != 0 && r.Retries == 0 {
			t.Errorf("%s on %s: %d tokens regenerated without a retry", r.Case, r.Node, r.Regenerated)
		}
	}
}
