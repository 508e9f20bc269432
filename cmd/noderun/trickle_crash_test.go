package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/conns"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner"
)

// Issue 45: deltas are journaled in rows of up to 16 chunks or a second, so
// a kill -9 may find the last of a stream unjournaled: what arrived in its
// last runner.CrashBound, at most runner.CrashChunks chunks. At 40 random
// instants of a trickling chat answer (continued by prefix) and a Responses
// answer: every resume completes byte-identical; the Responses node
// regenerates nothing (re-read by its cursor); the chat node regenerates at
// most that bound, and what had reached the socket and was not read yet
// when the process died (at most conns.MaxReadWait of the stream) or was in
// flight (the simulator's own count).
func TestKill9AtATrickleRegeneratesWithinTheCrashBound(t *testing.T) {
	t.Parallel()
	const (
		tokens = 150
		pace   = 100 // tokens a second: 1.5 s a node
		trials = 40
	)
	// Written by the simulator and not read when the process died: those a
	// read waiting (conns.MaxReadWait at most) had left in the socket, and a
	// token or two on their way.
	inAir := int(math.Ceil(conns.MaxReadWait.Seconds()*pace)) + 2
	bound := min(int(math.Ceil(runner.CrashBound.Seconds()*pace)), runner.CrashChunks) + inAir
	bin := noderunBinary(t)
	dir := t.TempDir()
	graph := func(chat, resp string) string {
		f, err := os.CreateTemp(dir, "trickle-*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, `name: trickle-crash
profile: ci
providers:
  chat: {kind: openai, base_url: %s, model: sim, continuation: prefix}
  resp: {kind: responses, base_url: %s, model: sim}
nodes:
  - {id: c, provider: chat, prompt: a long chat answer}
  - {id: r, provider: resp, prompt: a long reasoning answer}
`, chat, resp)
		return f.Name()
	}
	start := func(perSecond float64) (chat, resp *sim.Server) {
		cfg := sim.Config{Seed: 45, Tokens: tokens, TokensPerSecond: perSecond}
		return simtest.Start(t, cfg), simtest.Start(t, cfg)
	}
	// The undisturbed outputs (the content does not depend on the pace).
	chat, resp := start(0)
	ref := filepath.Join(dir, "ref.db")
	if out, err := exec.Command(bin, "run", "--db", ref, graph(chat.BaseURL(), resp.BaseURL())).CombinedOutput(); err != nil {
		t.Fatalf("undisturbed run: %v\n%s", err, out)
	}
	_, want := nodeOutputs(t, ref)

	var (
		mu          sync.Mutex
		regenerated []int
		wg          sync.WaitGroup
		slots       = make(chan struct{}, 4) // four trials at once: the bound holds while the writer keeps up
	)
	for trial := range trials {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			chat, resp := start(pace)
			g := graph(chat.BaseURL(), resp.BaseURL())
			db := filepath.Join(dir, fmt.Sprintf("trial%d.db", trial))
			cmd := exec.Command(bin, "run", "--db", db, g)
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			killAt := time.Duration(100+rand.IntN(1400)) * time.Millisecond
			time.Sleep(killAt)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			out, err := exec.Command(bin, "resume", "--db", db, "last").CombinedOutput()
			if err != nil && strings.Contains(string(out), "no runs") || !fileExists(db) {
				out, err = exec.Command(bin, "run", "--db", db, g).CombinedOutput() // killed before the run was journaled
			}
			if err != nil {
				t.Errorf("trial %d (killed at %s): %v\n%s", trial, killAt, err, out)
				return
			}
			run, got := nodeOutputs(t, db)
			if run.Status != journal.RunCompleted || got["c"] != want["c"] || got["r"] != want["r"] {
				t.Errorf("trial %d (killed at %s): run %s; outputs differ from the undisturbed run's (c %d/%d bytes, r %d/%d)",
					trial, killAt, run.Status, len(got["c"]), len(want["c"]), len(got["r"]), len(want["r"]))
				return
			}
			checkJournal(t, db, run.ID)
			rs, cs := resp.Stats(), chat.Stats()
			unknownID := 0
			if atts := attempts(t, db, run.ID, "r"); len(atts) > 1 {
				if atts[0].Ref != "" {
					t.Errorf("trial %d (killed at %s): r was asked again although its response %s was journaled", trial, killAt, atts[0].Ref)
				}
				unknownID = 1 // killed before response.created was journaled: an orphan response
			}
			if rs.TokensGenerated != rs.ResponsesCreated*tokens || rs.ResponsesCreated > int64(1+unknownID) {
				t.Errorf("trial %d (killed at %s): %d responses created, %d tokens generated: want 1 (re-read, nothing regenerated)",
					trial, killAt, rs.ResponsesCreated, rs.TokensGenerated)
			}
			again := int(cs.TokensGenerated) - tokens
			if again < 0 || again > bound {
				t.Errorf("trial %d (killed at %s): the chat node's tokens were generated %d times over (%d for %d); want at most %d (%s at %d a second, at most %d, and %d in flight)",
					trial, killAt, again, cs.TokensGenerated, tokens, bound, runner.CrashBound, pace, runner.CrashChunks, inAir)
			}
			mu.Lock()
			regenerated = append(regenerated, again)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("chat tokens regenerated per trial (bound %d): %v", bound, regenerated)
}
