package journal

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashHelperEnv makes the test binary act as a journaling process that the
// crash test kills (the standard helper-process pattern): its value is the
// journal path.
const crashHelperEnv = "NODERUN_JOURNAL_CRASH_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashHelperEnv); path != "" {
		crashHelper(path)
		os.Exit(0)
	}
	if path := os.Getenv(walHelperEnv); path != "" {
		walHelper(path)
		os.Exit(0)
	}
	if path := os.Getenv(providerCrashHelperEnv); path != "" {
		providerCrashHelper(path)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashHelper streams events (payload i for the i-th) and, between bursts,
// makes a state change; after each one returns, it prints
// "ack STEP KIND I": the change is acknowledged and the first I events were
// appended before it. It runs until killed.
func crashHelper(path string) {
	ctx := context.Background()
	j, fail := helperJournal(path)
	fmt.Println("ready")
	i := 0
	for step := 0; ; step++ {
		for range rand.IntN(300) {
			i++
			if err := j.Append(Event{RunID: "run", NodeID: "stream", Kind: KindDelta, ProviderSeq: -1,
				Payload: []byte(strconv.Itoa(i))}); err != nil {
				fail(err)
			}
		}
		node := fmt.Sprint("s", step)
		var kind string
		var err error
		switch step % 3 {
		case 0:
			kind, err = "node", j.SetNodeState(ctx, "run", node, NodePending, "")
		case 1:
			kind = "attempt"
			_, err = j.BeginAttempt(ctx, "run", node, ModeStart, "sim")
		case 2:
			kind, err = "flush", j.Flush(ctx)
		}
		if err != nil {
			fail(err)
		}
		fmt.Printf("ack %d %s %d\n", step, kind, i)
	}
}

// TestCrashSafety SIGKILLs a journaling process at random moments and checks
// what the next process finds: an intact database, every acknowledged state
// change, every event appended before the last acknowledgement, and events
// that form a gap-free prefix of what was appended.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	crashTrials(t, 12, 3, func(t *testing.T) {
		crashTrial(t, time.Duration(20+rand.IntN(400))*time.Millisecond)
	})
}

// crashTrials runs trial n times as subtests, short times with -short: each
// kills a process at a random moment, so more trials see more moments.
func crashTrials(t *testing.T, n, short int, trial func(t *testing.T)) {
	if testing.Short() {
		n = short
	}
	for i := range n {
		t.Run(fmt.Sprint("trial", i), trial)
	}
}

type ack struct {
	step   int
	kind   string
	events int
}

// helperJournal is how a crash helper starts: a journal at path with small,
// quick batches (many commits, so kills land in every phase) and the run
// "run". The helper prints "ready" once it is where its kill is to land
// (killedHelper's random delay counts from there: on a loaded machine a
// helper's first commits can take longer than the shortest delay). fail
// ends the helper with err.
func helperJournal(path string) (j *Journal, fail func(error)) {
	fail = func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	j, err := Open(context.Background(), path, WithBatch(32, time.Millisecond))
	if err != nil {
		fail(err)
	}
	if err := j.CreateRun(context.Background(), Run{ID: "run", Graph: "crash"}); err != nil {
		fail(err)
	}
	return j, fail
}

// killedHelper runs this test binary as the helper that env names,
// journaling into path, SIGKILLs it after d, and returns the lines it
// printed after "ready".
func killedHelper(t *testing.T, env, path string, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper did not start: %q %s", lines.Text(), stderr.String())
	}
	time.Sleep(d)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no chance to flush
		t.Fatal(err)
	}
	var printed []string
	for lines.Scan() {
		printed = append(printed, lines.Text())
	}
	if err := cmd.Wait(); err == nil || strings.Contains(stderr.String(), "helper:") {
		t.Fatalf("helper was not killed (%v) or failed: %s", err, stderr.String())
	}
	return printed
}

// openIntact opens the journal a killed helper left and checks its integrity.
func openIntact(t *testing.T, path string) *Journal {
	t.Helper()
	j := openTest(t, path)
	var integrity string
	if err := j.rdb.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}
	return j
}

func crashTrial(t *testing.T, after time.Duration) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crash.db")
	var acks []ack
	for _, line := range killedHelper(t, crashHelperEnv, path, after) {
		var a ack
		if _, err := fmt.Sscanf(line, "ack %d %s %d", &a.step, &a.kind, &a.events); err != nil {
			t.Fatalf("helper line %q: %v", line, err)
		}
		acks = append(acks, a)
	}

	j := openIntact(t, path)
	rows, err := j.rdb.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Error("foreign_key_check reports violations")
	}
	rows.Close()
	if r, err := j.Run(ctx, "run"); err != nil || r.Status != RunRunning {
		t.Fatalf("run after the crash = %+v, %v; want it unfinished", r, err)
	}

	evs, err := j.Events(ctx, "run", EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, evs) // gap-free prefix: seq i holds the i-th appended event
	acked := 0
	for _, a := range acks {
		node := fmt.Sprint("s", a.step)
		switch a.kind {
		case "node":
			if _, err := j.Node(ctx, "run", node); err != nil {
				t.Errorf("acknowledged node %s lost: %v", node, err)
			}
		case "attempt":
			if atts, err := j.Attempts(ctx, "run", node); err != nil || len(atts) != 1 {
				t.Errorf("acknowledged attempt of %s lost: %v %v", node, atts, err)
			}
		}
		acked = a.events
	}
	if len(evs) < acked {
		t.Fatalf("%d events journaled, but %d were appended before the last acknowledgement", len(evs), acked)
	}
	t.Logf("killed after %v: %d acks, %d events acknowledged, %d journaled", after, len(acks), acked, len(evs))

	// The next process continues the run's log where the crash left it.
	check(t, j.Append(Event{RunID: "run", Kind: "resumed", Payload: []byte(strconv.Itoa(len(evs) + 1))}))
	check(t, j.Flush(ctx))
	evs, _ = j.Events(ctx, "run", EventFilter{})
	checkSeqs(t, evs)
}
