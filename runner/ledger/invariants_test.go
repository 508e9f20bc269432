package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
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

// The accounting holds for every fault case of the chaos matrix against
// every kind of provider: each figure of every node of every case's run is
// checked against what the simulator counted for that run and against the
// wall clock that timed it, never against the ledger itself.
func TestAccountingInvariantsOverTheChaosMatrix(t *testing.T) {
	profiles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "chaos", "profiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kinds.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, invariantsGraph, profiles, codexbin.Path(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := runner.LoadGraph(path)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := runner.Prepare(g, &runner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := testkit.TempJournal(t, "j.db")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, g, chaos.Options{Journal: j, Cases: chaos.DefaultCases(prof), Seed: 3, Nodes: 4,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if want := chaos.CaseRuns(g, chaos.DefaultCases(prof)); len(rep.Results) != want {
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
	// Two models priced, one not: cost only where a price is known.
	prices := ledger.Prices{"gpt-sim": {Input: 1, Output: 10}, "o-sim": {Input: 2, Output: 8, Reasoning: 8}}
	for _, r := range rep.Results {
		run, err := ledger.Load(ctx, j, r.RunID, ledger.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := ledger.AccountOf(run, prices)
		checkRun(t, r, run, a)
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
	if a.WallMS > r.Time.Milliseconds() {
		t.Errorf("%s: the run's wall %d ms exceeds the %d ms the case took", where, a.WallMS, r.Time.Milliseconds())
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
		if na.WallMS > r.Time.Milliseconds() {
			t.Errorf("%s: wall %d ms exceeds the case's %d ms", at, na.WallMS, r.Time.Milliseconds())
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
		case int64(tk.Generated) < simN && !strings.Contains(na.Verdict, "at least"):
			t.Errorf("%s: the simulator generated %d tokens, the verdict %q does not say %d is a lower bound", at, simN, na.Verdict, tk.Generated)
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
			c, _ := diagnostics.Lookup(name)
			if c.Role == diagnostics.RoleFault && !strings.Contains(na.Verdict, c.Noun) {
				t.Errorf("%s: the verdict %q does not name the %s the journal holds", at, na.Verdict, c.Noun)
			}
		}
		// A fault that broke a connection is seen (a silence may be waited
		// out: polled through, or outlasted by a harness).
		if na.ID == r.Node && r.Fault.Kind != sim.FaultSilence && r.Stats.Faults[string(r.Fault.Kind)] > 0 && na.State == string(journal.NodeCompleted) &&
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
