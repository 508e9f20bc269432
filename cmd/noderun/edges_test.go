package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/ledger"
)

// Issue 41: a run whose runner was killed -9 mid-stream is interrupted
// everywhere it is read (the runs list and its JSON, the run's nodes and
// their JSON, diagnose, the report), never running; resume completes it.
func TestKilledRunIsInterruptedEverywhere(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 9, Tokens: 600, TokensPerSecond: 300})
	dir := t.TempDir()
	cmd, db := startRun(t, dir, "name: killed\nprofile: ci\nproviders:\n  chat: {kind: openai, base_url: "+srv.BaseURL()+", model: sim}\n"+
		"nodes:\n  - {id: a, provider: chat, prompt: hi}\n  - {id: b, provider: chat, needs: [a], prompt: next}\n")
	waitStreaming(t, srv, 50)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	page := filepath.Join(dir, "report.html")
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"status", "last"}, {"status", "last", "--json"},
		{"diagnose", "last"}, {"diagnose", "last", "--json"}, {"report", "last", "-o", page},
	} {
		code, out, errs := runCLI(t, append(args, "--db", db)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, errs)
		}
		if args[0] == "report" {
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			out = string(b)
		}
		if !strings.Contains(out, "interrupted") {
			t.Errorf("%v does not say interrupted:\n%s", args, out)
		}
		for _, running := range []string{`"running"`, " running ", "running:", "\trunning"} {
			if strings.Contains(out, running) {
				t.Errorf("%v says %s:\n%s", args, running, out)
			}
		}
	}
	if code, _, errs := runCLI(t, "resume", "last", "--db", db); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, errs)
	}
	code, out, _ := runCLI(t, "status", "last", "--json", "--db", db)
	if code != exitOK || !strings.Contains(out, `"status": "completed"`) {
		t.Errorf("after resume:\n%s", out)
	}
}

// Issue 41: a node that did not run (skipped after the node it needs
// failed) has no time of its own: 0 wall, useful and lost, and "the nodes
// ran" sums the nodes that ran.
func TestSkippedNodesTookNoTime(t *testing.T) {
	graph, db := writeGraph(t, `name: skip
profile: ci
cache: false
providers:
  chat:
    kind: sim
    api: chat
    sim:
      tokens: 20
      faults:
        - {node: a, endpoint: chat, kind: status, status: 400}
nodes:
  - {id: a, provider: chat, prompt: hi}
  - {id: b, provider: chat, needs: [a], prompt: hi}
  - {id: c, provider: chat, needs: [a], prompt: hi}
`)
	if code, _, errs := runCLI(t, "run", graph, "--db", db); code != exitFailed {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	code, out, errs := runCLI(t, "diagnose", "last", "--json", "--db", db)
	if code != exitOK {
		t.Fatalf("diagnose: exit %d\n%s", code, errs)
	}
	var acct ledger.Account
	if err := json.Unmarshal([]byte(out), &acct); err != nil {
		t.Fatal(err)
	}
	var ran int64
	for _, n := range acct.Nodes {
		if n.State == string(journal.NodeSkipped) && (n.WallMS != 0 || n.UsefulMS != 0 || n.TimeLostMS != 0) {
			t.Errorf("skipped node %s: wall %d ms, useful %d, lost %d; want 0", n.ID, n.WallMS, n.UsefulMS, n.TimeLostMS)
		}
		ran += n.WallMS
	}
	if acct.Totals.WallMS != ran || ran > acct.WallMS {
		t.Errorf("the nodes ran %d ms in all (%d the nodes that ran), the run %d ms", acct.Totals.WallMS, ran, acct.WallMS)
	}
}

// Issue 41: a node polled through a silence (NR202, NR203, NR201) met no
// fault, but its verdict names the steps it took: never "clean".
func TestVerdictNamesStepsWithoutAFault(t *testing.T) {
	graph, db := writeGraph(t, `name: idle
profile: ci
cache: false
providers:
  r:
    kind: sim
    api: responses
    sim: {tokens: 50, tokens_per_second: 100, silence: 2500ms}
nodes:
  - {id: a, provider: r, prompt: hi}
`)
	if code, _, errs := runCLI(t, "run", graph, "--db", db); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	_, out, _ := runCLI(t, "diagnose", "last", "--json", "--db", db)
	var acct ledger.Account
	if err := json.Unmarshal([]byte(out), &acct); err != nil {
		t.Fatal(err)
	}
	n := acct.Nodes[0]
	if len(n.RecoverySteps) == 0 {
		t.Fatalf("the node took no step: the test proves nothing (%+v)", n)
	}
	if strings.HasPrefix(n.Verdict, "clean") || !strings.Contains(n.Verdict, "polling_started") {
		t.Errorf("verdict %q after steps %v", n.Verdict, n.RecoverySteps)
	}
}
