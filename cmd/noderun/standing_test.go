package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
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
