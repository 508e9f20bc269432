package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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
	"github.com/noderun/noderun/runner/chaos"
	"github.com/noderun/noderun/runner/ledger"
)

// invariantsGraph has one node of every provider kind, independent of each
// other: chat, chat whose server continues a dropped answer, Responses, and
// a Codex harness. %q: the profiles file, the Codex binary.
const invariantsGraph = `name: kinds
profile: quick
profiles: %q
providers:
  gpt:  {kind: openai, base_url: https://api.openai.invalid/v1, api_key_env: NODERUN_LEDGER_TEST_KEY_UNSET, model: gpt-sim}
  cont: {kind: openai, base_url: https://api.openai.invalid/v1, api_key_env: NODERUN_LEDGER_TEST_KEY_UNSET, model: gpt-cont, continuation: prefix}
  deep: {kind: responses, base_url: https://api.openai.invalid/v1, api_key_env: NODERUN_LEDGER_TEST_KEY_UNSET, model: o-sim}
  codex: {kind: harness, command: %q}
nodes:
  - {id: chat, provider: gpt, prompt: Draft a note on dropped streams.}
  - {id: continued, provider: cont, prompt: Draft a note on resumable streams.}
  - {id: responses, provider: deep, reasoning_effort: low, prompt: Review the failure modes of long streams.}
  - {id: agent, provider: codex, prompt: Say hello.}
`

// The accounting holds for every fault case of the chaos matrix, against
// every kind of provider and on the demo and failover graphs: each figure of
// every node of every case's run is checked against what the simulator
// counted for that run (per attempt) and against the wall clock that timed
// it, never against the ledger itself; and every surface that prints a
// count (the live view, the verdict, NR108's record, the chaos table,
// diagnose, the report, a node read alone as metrics and traces read it)
// shows the ledger's.
func TestAccountingInvariantsOverTheChaosMatrix(t *testing.T) {
	profiles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "chaos", "profiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := filepath.Join(t.TempDir(), "kinds.yaml")
	if err := os.WriteFile(kinds, fmt.Appendf(nil, invariantsGraph, profiles, codexbin.Path(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two models priced, one not: cost only where a price is known.
	prices := ledger.Prices{"gpt-sim": {Input: 1, Output: 10}, "o-sim": {Input: 2, Output: 8, Reasoning: 8}}
	// The demo and failover graphs name the default profile, whose matrix
	// waits out a 90 s silence and 1-4 s backoffs: they run on the default
	// profile scaled down (see scaledDefault), which keeps every count and
	// every ratio between its durations. The kinds graph keeps its own,
	// quick.
	scaled := scaledDefault()
	for _, c := range []struct {
		path  string
		set   profile.Set // nil: the graph's own profile
		short []string    // with -short, only these cases (nil: all)
	}{
		// A graph with a harness node runs one case run at a time (chaos
		// keeps agent CLIs from starting side by side): a minute for the
		// whole matrix. -short (the edit loop) keeps a case of each sort,
		// against every kind; the full suite runs all of them.
		{kinds, nil, []string{"close-middle", "idle-silence", "server-error", "outage-long"}},
		{filepath.Join("..", "..", "testdata", "graphs", "demo.yaml"), scaled, nil},
		{filepath.Join("..", "..", "testdata", "graphs", "failover.yaml"), scaled, nil},
	} {
		t.Run(strings.TrimSuffix(filepath.Base(c.path), ".yaml"), func(t *testing.T) {
			only := c.short
			if !testing.Short() {
				only = nil
			}
			invariantsOver(t, c.path, c.set, only, prices)
		})
	}
}

// scaledName is the profile scaledDefault adds.
const scaledName = "default-scaled"

// scaledDefault is the built-in profiles plus default-scaled: the default
// profile with every duration divided by 50 and every count kept (retries,
// reconnects, breaker). The chaos matrix follows the profile it runs on (its
// silence outlasts the idle window, its long outage the deadline), so each
// case meets the default's recovery path, and each figure is still checked
// against the wall clock that timed it; only the waits are 50 times shorter
// (the idle window 1.8 s rather than 90 s, a Retry-After of 1 s still under
// max_retry_after, as on the default).
func scaledDefault() profile.Set {
	set := profile.Set(profile.Builtins())
	p := set["default"]
	s := func(d profile.Duration) profile.Duration { return d / 50 }
	p.Name = scaledName
	p.Backoff.Base, p.Backoff.Cap = s(p.Backoff.Base), s(p.Backoff.Cap)
	p.Deadline, p.IdleTimeout, p.PollAfter, p.PollInterval = s(p.Deadline), s(p.IdleTimeout), s(p.PollAfter), s(p.PollInterval)
	p.StuckAfter, p.MaxRetryAfter, p.BreakerCooldown = s(p.StuckAfter), s(p.MaxRetryAfter), s(p.BreakerCooldown)
	set[scaledName] = p
	return set
}

// invariantsOver runs the chaos matrix on the graph at path, on the scaled
// profile when set is not nil, and checks every case run's accounting. only,
// when not nil, names the cases of the matrix to run.
func invariantsOver(t *testing.T, path string, set profile.Set, only []string, prices ledger.Prices) {
	g, err := runner.LoadGraph(path)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	if set != nil {
		name = scaledName
	}
	prof, err := runner.Prepare(g, &runner.Options{Profiles: set, Profile: name})
	if err != nil {
		t.Fatal(err)
	}
	j := testkit.TempJournal(t, "j.db")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cases := chaos.DefaultCases(prof)
	if only != nil {
		cases = slices.DeleteFunc(cases, func(c chaos.Case) bool { return !slices.Contains(only, c.Name) })
		if len(cases) != len(only) {
			t.Fatalf("the matrix has %d of the cases %q", len(cases), only)
		}
	}
	live := newLiveView()
	rep, err := chaos.Run(ctx, g, chaos.Options{Journal: j, Cases: cases, Seed: 3, Nodes: 4,
		Profiles: set, Profile: name, Getenv: func(string) string { return "" }, OnProgress: live.see})
	if err != nil {
		t.Fatal(err)
	}
	if want := chaos.CaseRuns(g, cases); len(rep.Results) != want {
		t.Fatalf("%d case runs, want %d", len(rep.Results), want)
	}
	var table bytes.Buffer
	_ = rep.WriteTable(&table)
	// Every case holds as chaos judges it: each node that must recover
	// completes with the undisturbed run's output, byte for byte.
	if !rep.OK() {
		t.Errorf("%d of %d case runs failed:\n%s", rep.Failed, rep.Runs, table.String())
	} else {
		t.Logf("the chaos matrix:\n%s", table.String())
	}
	for _, r := range rep.Results {
		run, err := ledger.Load(ctx, j, r.RunID, ledger.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := ledger.AccountOf(run, prices)
		checkRun(t, r, run, a)
		checkSurfaces(t, r, run, a, live.done(r.Case, r.Node))
		// One node read alone (a worker's or the telemetry's account of a
		// node that settled) is accounted as in its whole run: a node that
		// settled without a fault is read without its chunks.
		for i, nd := range run.Nodes {
			one, err := ledger.LoadNodeOf(ctx, j, g, r.RunID, nd.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := ledger.AccountNode(one, prices); !reflect.DeepEqual(got, a.Nodes[i]) {
				t.Errorf("%s@%s node %s read alone:\n%+v\nin its run:\n%+v", r.Case, r.Node, nd.ID, got, a.Nodes[i])
			}
		}
	}
}

// checkRun checks the account of one case's run.
func checkRun(t *testing.T, r chaos.Result, run *ledger.Run, a *ledger.Account) {
	t.Helper()
	where := fmt.Sprintf("%s@%s", r.Case, r.Node)
	// Time: no figure exceeds the wall clock that timed the run.
	// The journal's times are the wall clock's (other processes read
	// them): so is the case's span they are held to, should the clock be
	// stepped meanwhile.
	took := r.Ended.Round(0).Sub(r.Started.Round(0)).Milliseconds()
	if a.WallMS > took {
		t.Errorf("%s: the run's wall %d ms exceeds the %d ms the case took", where, a.WallMS, took)
	}
	if a.Totals.TimeLostMS > a.WallMS*int64(len(a.Nodes)) {
		t.Errorf("%s: %d ms lost in a run of %d ms and %d nodes", where, a.Totals.TimeLostMS, a.WallMS, len(a.Nodes))
	}
	// Every record is what its code declares: the contract between the
	// executor (and the adapters) that journal them and every reader.
	for _, rec := range run.Records {
		if err := rec.CheckAttrs(); err != nil {
			t.Errorf("%s: run record %s: %v", where, rec.Code, err)
		}
	}
	unpriced := map[string]bool{}
	for i, na := range a.Nodes {
		nd := run.Nodes[i]
		at := where + " node " + na.ID
		for _, rec := range nd.Records {
			if err := rec.CheckAttrs(); err != nil {
				t.Errorf("%s: %v", at, err)
			}
		}
		if na.TimeLostMS < 0 || na.QuotaWaitMS < 0 || na.TimeLostMS > na.WallMS || na.UsefulMS+na.TimeLostMS+na.QuotaWaitMS != na.WallMS {
			t.Errorf("%s: useful %d + lost %d + quota %d != wall %d ms", at, na.UsefulMS, na.TimeLostMS, na.QuotaWaitMS, na.WallMS)
		}
		if na.WallMS > took || na.WallMS > a.WallMS {
			t.Errorf("%s: wall %d ms exceeds the case's %d ms or the run's took, %d ms", at, na.WallMS, took, a.WallMS)
		}
		// Tokens: what the simulator generated for the node, to the token.
		tk := na.Tokens
		if tk.Generated != tk.Needed+tk.Regenerated+tk.Unfinished {
			t.Errorf("%s: generated %d != needed %d + regenerated %d + unfinished %d", at, tk.Generated, tk.Needed, tk.Regenerated, tk.Unfinished)
		}
		// A harness that failed a turn hides what it generated: the figure
		// is then a lower bound, and says so.
		switch simN := r.Stats.Nodes[na.ID].TokensGenerated; {
		case tk.Hidden && int64(tk.Generated) > simN, !tk.Hidden && int64(tk.Generated) != simN:
			t.Errorf("%s: generated %d tokens (hidden %v), the simulator generated %d (%s)", at, tk.Generated, tk.Hidden, simN, na.Verdict)
		case int64(tk.Generated) < simN && !strings.Contains(na.Verdict.Text, "at least"):
			t.Errorf("%s: the simulator generated %d tokens, the verdict %q does not say %d is a lower bound", at, simN, na.Verdict, tk.Generated)
		}
		// Per attempt: the output tokens of each attempt are what the
		// simulator generated for it (every answer of the attempt: a
		// continued one is two, a re-attached one one). A harness's attempt
		// is a turn of an agent CLI, whose requests do not say the attempt.
		if !tk.Hidden && !harnessNode(run, na.ID) {
			sims := map[int]int64{}
			for _, gen := range r.Stats.Nodes[na.ID].Generations {
				sims[gen.Attempt] += gen.Tokens
			}
			for _, a := range nd.Attempts {
				if int64(visible(a)) != sims[a.N] {
					t.Errorf("%s: attempt %d: %d output tokens; the simulator generated %d for it", at, a.N, visible(a), sims[a.N])
				}
				delete(sims, a.N)
			}
			for n, tokens := range sims {
				if tokens > 0 {
					t.Errorf("%s: the simulator generated %d tokens for attempt %d, which the ledger does not have", at, tokens, n)
				}
			}
		}
		// Preserved: only what a re-attach, a thread resume or a continue kept.
		kept := false
		for _, rec := range nd.Records {
			m := rec.Code.Means
			kept = kept || rec.Code.Role == diagnostics.RoleStep && (m == diagnostics.ByReattach || m == diagnostics.ByReconnect || m == diagnostics.ByContinue)
		}
		if tk.Preserved > 0 && !kept {
			t.Errorf("%s: %d tokens preserved without a re-attach, resume or continue", at, tk.Preserved)
		}
		if tk.Preserved > tk.Needed+tk.Unfinished {
			t.Errorf("%s: %d tokens preserved, more than the %d the last attempt produced", at, tk.Preserved, tk.Needed+tk.Unfinished)
		}
		// The verdict names every fault the journal holds.
		for name := range na.Faults {
			c, _ := name.Code()
			if c.Role == diagnostics.RoleFault && !strings.Contains(na.Verdict.Text, c.Noun) {
				t.Errorf("%s: the verdict %q does not name the %s the journal holds", at, na.Verdict, c.Noun)
			}
		}
		// A fault that broke a connection is seen (a silence may be waited
		// out: polled through, or outlasted by a harness).
		if na.ID == r.Node && r.Fault.Kind != sim.FaultSilence && r.Stats.Faults[string(r.Fault.Kind)] > 0 && na.State == journal.NodeCompleted &&
			len(na.Faults) == 0 && na.Attempts <= 1 && !harnessAbsorbed(nd) {
			t.Errorf("%s: the %s fault acted, yet the node is %q", at, r.Fault.Kind, na.Verdict)
		}
		// Cost: only for priced models.
		priced := na.Model == "gpt-sim" || na.Model == "o-sim"
		if (na.CostUSD != nil) != priced && na.Attempts > 0 {
			t.Errorf("%s: model %q, cost %v", at, na.Model, na.CostUSD)
		}
		if na.CostUSD == nil && na.Attempts > 0 {
			unpriced[na.Model] = true
		}
	}
	for m := range unpriced {
		if !strings.Contains(strings.Join(a.Warnings, "\n"), fmt.Sprintf("%q", m)) {
			t.Errorf("%s: no warning names the unpriced model %q: %q", where, m, a.Warnings)
		}
	}
}

// harnessAbsorbed: the harness recovered from the fault by itself (Codex
// retries a failed request on its own): noderun saw only its note of it.
func harnessAbsorbed(nd *ledger.Node) bool {
	for _, r := range nd.Records {
		if r.Code == diagnostics.HarnessRetrying {
			return true
		}
	}
	return false
}

// liveView keeps what the live view was last told of each node of each
// case run: its ProgressDone report.
type liveView struct {
	mu   sync.Mutex
	last map[[3]string]runner.Progress // case, target, node
}

func newLiveView() *liveView { return &liveView{last: map[[3]string]runner.Progress{}} }

func (v *liveView) see(caseName, target string, p runner.Progress) {
	if p.State != runner.ProgressDone {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last[[3]string{caseName, target, p.Node}] = p
}

// done is the ProgressDone report of each node of a case run, by node.
func (v *liveView) done(caseName, target string) map[string]runner.Progress {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]runner.Progress{}
	for k, p := range v.last {
		if k[0] == caseName && k[1] == target {
			out[k[2]] = p
		}
	}
	return out
}

// visible is the output tokens the ledger gives an attempt (its reasoning
// apart).
func visible(a ledger.Attempt) int { return a.Usage.Visible() }

// harnessNode: the node runs an agent CLI, whose own retries send requests
// noderun does not see (its attempts are turns, not requests).
func harnessNode(run *ledger.Run, node string) bool {
	n := run.Graph.Node(node)
	return n != nil && run.Graph.Providers[n.Provider].Kind == runner.ProviderKindHarness
}

// checkSurfaces checks that every surface shows the ledger's counts of the
// case's run: the chaos table's row, the verdict, each recovered node's
// NR108 record, the live view's last line of each node, and the report.
func checkSurfaces(t *testing.T, r chaos.Result, run *ledger.Run, a *ledger.Account, done map[string]runner.Progress) {
	t.Helper()
	where := fmt.Sprintf("%s@%s", r.Case, r.Node)
	var page bytes.Buffer
	if err := ledger.WriteReport(&page, run, a, ledger.ReportOptions{MaxOutput: -1}); err != nil {
		t.Fatal(err)
	}
	for i, na := range a.Nodes {
		nd := run.Nodes[i]
		at := where + " node " + na.ID
		harness := harnessNode(run, na.ID)
		if na.ID == r.Node {
			if r.Retries != na.Retries() || r.Reconnects != na.Reconnects() || r.RecoverySteps != na.Steps() || r.Verdict != na.Verdict.Text {
				t.Errorf("%s: the chaos table says %d retries, %d reconnects, %d steps, %q; the ledger %d, %d, %d, %q", at,
					r.Retries, r.Reconnects, r.RecoverySteps, r.Verdict, na.Retries(), na.Reconnects(), na.Steps(), na.Verdict)
			}
			// REGEN is the simulator's count (beyond the reference run): the
			// ledger's regenerated tokens are the same tokens.
			if !harness && !na.Tokens.Hidden && r.Regenerated != int64(na.Tokens.Regenerated) {
				t.Errorf("%s: the chaos table's REGEN (the simulator's) is %d, the ledger's regenerated %d", at, r.Regenerated, na.Tokens.Regenerated)
			}
		}
		// NR108, journaled by the executor as the node completed.
		for _, rec := range nd.Records {
			if rec.Code != diagnostics.Recovered {
				continue
			}
			steps, _ := diagnostics.KeyRecoverySteps.Of(rec.Record)
			attempts, _ := diagnostics.KeyAttempts.Of(rec.Record)
			retries, _ := diagnostics.KeyRetries.Of(rec.Record)
			regen, _ := diagnostics.KeyRegeneratedDeltas.Of(rec.Record)
			if steps != na.Steps() || attempts != na.Attempts || retries != na.Retries() || !harness && regen != na.Tokens.Regenerated {
				t.Errorf("%s: NR108 says %d steps, %d attempts, %d retries, %d deltas regenerated; the ledger %d, %d, %d, %d tokens (%q)", at,
					steps, attempts, retries, regen, na.Steps(), na.Attempts, na.Retries(), na.Tokens.Regenerated, rec.Message)
			}
		}
		// The live view's last line of a completed node: its last attempt,
		// its tokens.
		if p, ok := done[na.ID]; ok && na.State == journal.NodeCompleted && len(nd.Attempts) > 0 {
			last := nd.Attempts[len(nd.Attempts)-1]
			if p.Attempt != na.Attempts || !harness && p.Tokens != visible(last) {
				t.Errorf("%s: the live view ended on attempt %d with %d tokens; the ledger has %d attempts, the last with %d tokens", at,
					p.Attempt, p.Tokens, na.Attempts, visible(last))
			}
		} else if na.State == journal.NodeCompleted && na.CachedFrom.IsZero() {
			t.Errorf("%s: completed, but the live view never showed it done", at)
		}
		// The report's row of the node: diagnose's figures.
		row := regexp.MustCompile(`<tr data-node="` + regexp.QuoteMeta(na.ID) + `"><td><a [^>]*>[^<]*</a></td><td>[^<]*</td><td>(\d+)</td><td>[^<]*</td><td>[^<]*</td>\s*<td>([\d,]+)</td><td>([\d,]+)</td><td>([\d,]+)</td>`).
			FindStringSubmatch(page.String())
		want := []string{strconv.Itoa(na.Attempts), ledger.Thousands(na.Tokens.Generated), ledger.Thousands(na.Tokens.Regenerated), ledger.Thousands(na.Tokens.Preserved)}
		if row == nil || !slices.Equal(row[1:], want) {
			t.Errorf("%s: the report's row %q, want attempts, generated, regenerated, preserved %q", at, row, want)
		}
	}
}
