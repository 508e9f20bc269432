package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 9: an interruption detaches, it does not cancel. A CI job cancelled,
// a pod evicted or a laptop Ctrl-C'd mid-reasoning leaves the background
// response generating at the provider, and `noderun resume` re-attaches to it
// with zero regenerated tokens. Cancelling is asked for explicitly: a second
// Ctrl-C, or `noderun cancel`.

const (
	intTokens = 3000
	intPrompt = "long"
	intSeed   = 5
)

// interruptRun starts a one-node Responses run on srv, waits until it
// streams, and stops it with sig; it returns the journal, the process's
// stderr, and the tokens generated when the process had exited.
func interruptRun(t *testing.T, srv *sim.Server, sigs ...os.Signal) (db, stderr string, atExit int64) {
	t.Helper()
	cmd, db, errOut := startRunOut(t, t.TempDir(), fmt.Sprintf(
		"name: slow\nprofile: ci\nproviders:\n  p: {kind: responses, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: %s}\n",
		srv.BaseURL(), intPrompt))
	waitStreaming(t, srv, 100)
	_ = cmd.Process.Signal(sigs[0])
	for _, s := range sigs[1:] {
		// The second Ctrl-C comes when the first has been handled: the
		// runner said what it left running and how long it waits.
		waitOutput(t, errOut, "press Ctrl-C again")
		_ = cmd.Process.Signal(s)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("run after %v: %v, want exit %d\n%s", sigs, err, exitInterrupted, errOut)
	}
	if run, _ := nodeOutputs(t, db); run.Status != journal.RunInterrupted {
		t.Fatalf("journal says %s, want interrupted", run.Status)
	}
	return db, errOut.String(), srv.Stats().TokensGenerated
}

// waitOutput waits until the process has written want to buf.
func waitOutput(t *testing.T, buf *testkit.Buffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(buf.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the process did not print %q within 10s:\n%s", want, buf)
		}
	}
}

// resumeRun resumes the last run of db and returns node a's output.
func resumeRun(t *testing.T, db string) string {
	t.Helper()
	if code, _, stderr := runCLI(t, "resume", "--db", db, "last"); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	run, got := nodeOutputs(t, db)
	if run.Status != journal.RunCompleted {
		t.Fatalf("after resume: run %s", run.Status)
	}
	return got["a"]
}

func TestInterruptDetachesThenResumeRegeneratesNothing(t *testing.T) {
	t.Parallel()
	want := strings.Join(sim.Text("sim", intPrompt, intSeed, intTokens), "")
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
			db, stderr, atExit := interruptRun(t, srv, sig)
			if n := srv.Stats().Requests[sim.EndpointResponsesCancel]; n != 0 {
				t.Fatalf("%d cancel request(s) after %s: an interruption must leave the response running", n, sig)
			}
			for _, w := range []string{"still running at the provider", "noderun resume ", "noderun cancel ", "--db " + db} {
				if !strings.Contains(stderr, w) {
					t.Errorf("the interruption message lacks %q:\n%s", w, stderr)
				}
			}
			// Issue 46: explained once, by the command that goes on.
			if n := strings.Count(stderr, "noderun resume ") + strings.Count(stderr, "can be resumed"); n != 1 {
				t.Errorf("stderr says how to go on %d times, want once:\n%s", n, stderr)
			}
			// The response keeps generating with nobody attached.
			for deadline := time.Now().Add(5 * time.Second); srv.Stats().TokensGenerated <= atExit; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the response stopped at %d tokens when the runner exited", atExit)
				}
			}
			if got := resumeRun(t, db); got != want {
				t.Fatalf("resumed output differs from the undisturbed one: %d bytes, want %d", len(got), len(want))
			}
			st := srv.Stats()
			if st.ResponsesCreated != 1 || st.TokensGenerated != intTokens || st.Requests[sim.EndpointResponsesCancel] != 0 {
				t.Errorf("sim: %d responses, %d tokens generated (want 1 and %d: none regenerated), %d cancels",
					st.ResponsesCreated, st.TokensGenerated, intTokens, st.Requests[sim.EndpointResponsesCancel])
			}
		})
	}
}

// Cancelling is explicit: a second Ctrl-C, or `noderun cancel` after the
// run was interrupted. The simulator sees the cancel, and resume then retries
// the node from scratch (its side effects allow it).
func TestCancelAfterInterrupt(t *testing.T) {
	t.Parallel()
	want := strings.Join(sim.Text("sim", intPrompt, intSeed, intTokens), "")
	cases := []struct {
		name   string
		sigs   []os.Signal
		cancel bool // run `noderun cancel` after the run exited
	}{
		{"double_ctrl_c", []os.Signal{os.Interrupt, os.Interrupt}, false},
		{"noderun_cancel", []os.Signal{syscall.SIGTERM}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
			db, stderr, _ := interruptRun(t, srv, c.sigs...)
			if c.cancel {
				code, out, errOut := runCLI(t, "cancel", "--db", db, "last")
				if code != exitOK || !strings.Contains(out, "cancelled") {
					t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errOut)
				}
				stderr += out
			}
			if n := srv.Stats().Requests[sim.EndpointResponsesCancel]; n != 1 {
				t.Fatalf("%d cancel request(s), want 1:\n%s", n, stderr)
			}
			if !strings.Contains(stderr, "cancelled") {
				t.Errorf("nothing says the response was cancelled:\n%s", stderr)
			}
			// Nothing is left to cancel now.
			if code, out, _ := runCLI(t, "cancel", "--db", db, "last"); code != exitOK || !strings.Contains(out, "nothing") {
				t.Errorf("second cancel: exit %d: %s", code, out)
			}
			if got := resumeRun(t, db); got != want {
				t.Fatalf("output after cancel and resume differs: %d bytes, want %d", len(got), len(want))
			}
			if st := srv.Stats(); st.ResponsesCreated != 2 {
				t.Errorf("sim: %d responses created; the cancelled one should have been retried from scratch", st.ResponsesCreated)
			}
			code, out, _ := runCLI(t, "events", "--db", db, "--kind", "diagnostic", "last")
			if code != exitOK || !strings.Contains(out, "NR208") || !strings.Contains(out, "NR205") {
				t.Errorf("journal lacks the cancel (NR208) or the retry (NR205):\n%s", out)
			}
			// Issue 41: what ended the attempt is said as it was: cancelled at
			// the provider, not stuck.
			if cls := attemptClasses(t, db); !slices.Contains(cls, string(diagnostics.ClassProviderCanceled)) || slices.Contains(cls, string(diagnostics.ClassStuck)) {
				t.Errorf("attempts' classes %q, want provider_canceled and no stuck", cls)
			}
		})
	}
}

// Issue 41: a response the provider no longer knows when resume checks it
// (404) ends its attempt as not_found, not stuck, and is retried.
func TestResumeOfAResponseTheProviderForgot(t *testing.T) {
	t.Parallel()
	want := strings.Join(sim.Text("sim", intPrompt, intSeed, intTokens), "")
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000,
		Faults: []sim.Fault{{Endpoint: sim.EndpointResponsesGet, Kind: sim.FaultStatus, Status: 404, Times: 1}}})
	db, _, _ := interruptRun(t, srv, syscall.SIGTERM)
	if got := resumeRun(t, db); got != want {
		t.Fatalf("output after resume differs: %d bytes, want %d", len(got), len(want))
	}
	if cls := attemptClasses(t, db); !slices.Contains(cls, string(diagnostics.ClassNotFound)) || slices.Contains(cls, string(diagnostics.ClassStuck)) {
		t.Errorf("attempts' classes %q, want not_found and no stuck", cls)
	}
}

// attemptClasses are the error classes of node a's attempts in db's last run.
func attemptClasses(t *testing.T, db string) []string {
	t.Helper()
	code, out, errs := runCLI(t, "show", "last", "a", "--attempts", "--json", "--db", db)
	if code != exitOK {
		t.Fatalf("show --attempts: exit %d\n%s", code, errs)
	}
	var doc struct {
		Attempts []struct {
			ErrorClass string `json:"error_class"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var out2 []string
	for _, a := range doc.Attempts {
		out2 = append(out2, a.ErrorClass)
	}
	return out2
}

// Issue 15: events --follow of a run whose runner was killed ends (exit 1,
// saying so) instead of waiting forever for events that will not come.
func TestEventsFollowEndsWhenTheRunnerIsGone(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
	cmd, db := startRun(t, t.TempDir(), fmt.Sprintf(
		"name: slow\nprofile: ci\nproviders:\n  p: {kind: responses, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: %s}\n",
		srv.BaseURL(), intPrompt))
	waitStreaming(t, srv, 100)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	done := make(chan struct{})
	var code int
	var stdout, stderr string
	go func() {
		defer close(done)
		code, stdout, stderr = runCLI(t, "events", "--db", db, "--follow", "--kind", "diagnostic", "last")
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("events --follow still waiting 20 s after its runner was killed")
	}
	if code != exitFailed || !strings.Contains(stderr, "runner is gone") || !strings.Contains(stderr, "noderun resume") ||
		!strings.Contains(stdout, "NR401") {
		t.Errorf("exit %d, want %d with the run's events and a line saying the runner is gone\nstdout: %s\nstderr: %s", code, exitFailed, stdout, stderr)
	}
}
