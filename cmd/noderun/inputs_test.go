package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// The goal graph runs with its goal from the command line.
func TestRunGoalGraphWithInput(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	code, stdout, stderr := runCLI(t, "run", "--db", db, "--profile", "ci", "../../testdata/graphs/goal.yaml",
		"--input", "goal=why streams drop, and how to survive it", "--input", "depth=2")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	run, outs := nodeOutputs(t, db)
	run = runOf(t, db, run.ID)
	if run.Inputs["goal"] != "why streams drop, and how to survive it" || run.Inputs["depth"] != "2" || len(outs) != 3 {
		t.Fatalf("inputs %q, %d nodes completed", run.Inputs, len(outs))
	}
}

// Missing, unknown and ill-typed inputs are exit 2 with file:line of the
// inputs block, and nothing is written.
func TestRunInputErrorsWriteNothing(t *testing.T) {
	t.Parallel()
	const goal = "../../testdata/graphs/goal.yaml"
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(withFile, []byte("name: spec\ninputs:\n  spec: {type: file}\nproviders:\n  chat: {kind: sim}\n"+
		"nodes:\n  - {id: a, provider: chat, prompt: '{{ input \"spec\" }}'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		// read with its bound, never whole: /dev/zero is refused at once
		{"endless file", []string{"--input", "goal=@/dev/zero"}, []string{"--input goal=@/dev/zero: /dev/zero is larger than 8 MiB, the bound of a file input",
			"raise the bound with --max-input, e.g. --max-input 16MiB"}},
		{"past --max-input", []string{"--input", "goal=@" + big, "--max-input", "1KiB"}, []string{"big.txt is larger than 1 KiB", "--max-input 2.0KiB"}},
		{"bad --max-input", []string{"--input", "goal=x", "--max-input", "lots"}, []string{`--max-input "lots": give a size such as 8MiB`}},
		{"missing", nil, []string{"goal.yaml:7: missing input \"goal\" (What the study is about)", "(pass it with --input goal=VALUE)"}},
		{"unknown", []string{"--input", "goal=x", "--input", "gaol=y"}, []string{"goal.yaml:6: unknown input \"gaol\" (declared: goal, depth) (did you mean \"goal\"?)"}},
		{"ill-typed", []string{"--input", "goal=x", "--input", "depth=deep"}, []string{"goal.yaml:9: input \"depth\": \"deep\" is not a whole number"}},
		{"no file", []string{"--input", "goal=@" + filepath.Join(dir, "nope.txt")}, []string{"--input goal=@", "nope.txt: no such file"}},
		{"twice", []string{"--input", "goal=x", "--input", "goal=y"}, []string{"--input goal is given twice"}},
		{"no value", []string{"--input", "goal"}, []string{"want KEY=VALUE"}},
	}
	cases = append(cases, struct {
		name string
		args []string
		want []string
	}{"file input past --max-input", []string{withFile, "--input", "spec=@" + big, "--max-input", "1KiB"},
		[]string{`spec.yaml:3: input "spec": ` + big + " is larger than 1 KiB, the bound of a file input"}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(dir, c.name+".db")
			args := append([]string{"run", "--db", db, goal}, c.args...)
			if len(c.args) > 0 && strings.HasSuffix(c.args[0], ".yaml") {
				args = append([]string{"run", "--db", db}, c.args...)
			}
			code, _, stderr := runCLI(t, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want 2\n%s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("the journal was created")
			}
		})
	}
}

// A run killed with kill -9 is resumed with the inputs it was started with:
// the value given on the command line and the content of a file input as it
// was then, though the file has changed since. The outputs match an
// undisturbed run with the same inputs (the simulator's text is a function
// of the prompt), and differ from one with another goal.
func TestKill9ResumeReusesInputs(t *testing.T) {
	t.Parallel() // processes of its own and a simulator of its own
	bin := noderunBinary(t)
	dir := t.TempDir()
	srv := simtest.Start(t, sim.Config{Seed: 5, Tokens: 1200, TokensPerSecond: 3000})
	graph := filepath.Join(dir, "g.yaml")
	src := fmt.Sprintf(`name: inputs
profile: ci
inputs:
  goal: {description: the goal}
  spec: {type: file}
  depth: {type: int, default: 2}
providers:
  chat: {kind: openai, base_url: %s, model: sim}
nodes:
  - {id: a, prompt: 'study {{ input "goal" }} to depth {{ input "depth" }}'}
  - {id: b, needs: [a], prompt: 'apply {{ input "spec" }} to {{ input "goal" }}'}
`, srv.BaseURL())
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec.txt")
	writeSpec := func(s string) {
		if err := os.WriteFile(spec, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outputsOf := func(db string, goal string) map[string]string {
		t.Helper()
		if out, err := exec.Command(bin, "run", "--db", db, graph, "--input", "goal="+goal, "--input", "spec="+spec).CombinedOutput(); err != nil {
			t.Fatalf("run: %v\n%s", err, out)
		}
		_, outs := nodeOutputs(t, db)
		return outs
	}
	writeSpec("the first spec")
	want := outputsOf(filepath.Join(dir, "ref.db"), "sockets")
	other := outputsOf(filepath.Join(dir, "other.db"), "pipes")
	if len(want) != 2 || want["a"] == other["a"] || want["b"] == other["b"] {
		t.Fatalf("the outputs do not depend on the inputs: %d nodes", len(want))
	}

	db := filepath.Join(dir, "run.db")
	cmd := exec.Command(bin, "run", "--db", db, graph, "--input", "goal=sockets", "--input", "spec=@"+spec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitStreaming(t, srv, srv.Stats().TokensGenerated+300) // node a is mid-stream
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	writeSpec("a changed spec") // the resume must not read it again

	out, err := exec.Command(bin, "resume", "--db", db, "last").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	run, got := nodeOutputs(t, db)
	run = runOf(t, db, run.ID)
	if run.Status != journal.RunCompleted {
		t.Fatalf("run %s after resume\n%s", run.Status, out)
	}
	if run.Inputs["goal"] != "sockets" || run.Inputs["spec"] != "the first spec" || run.Inputs["depth"] != "2" {
		t.Errorf("journaled inputs %q", run.Inputs)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("node %s: the resumed output differs from the undisturbed run with the same inputs (%d vs %d bytes)", id, len(got[id]), len(w))
		}
	}
	if atts := attempts(t, db, run.ID, "a"); len(atts) < 2 {
		t.Errorf("node a has %d attempt(s): it was not in flight when killed", len(atts))
	}
}

// runOf reads a run from the journal, inputs included.
func runOf(t *testing.T, db, id string) journal.Run {
	t.Helper()
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	r, err := j.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// noderun schema prints the schema in docs/graph.schema.json.
func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "schema")
	want, err := os.ReadFile("../../docs/graph.schema.json")
	if code != exitOK || err != nil || stdout != string(want) {
		t.Fatalf("exit %d, %v; stdout is %d bytes, docs/graph.schema.json %d\n%s", code, err, len(stdout), len(want), stderr)
	}
	if code, _, stderr := runCLI(t, "schema", "extra"); code != exitUsage || !strings.Contains(stderr, "takes no arguments") {
		t.Errorf("schema extra: exit %d\n%s", code, stderr)
	}
}

// continue_on_failure: the graph finishes, the dependent runs, and the exit
// code is 1 because a node failed.
func TestContinueOnFailureExit1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	graph := filepath.Join(dir, "g.yaml")
	src := `name: optional
profile: ci
providers:
  chat:
    kind: sim
    sim:
      tokens: 20
      faults: [{endpoint: chat, requests: [1], kind: status, status: 400}]
nodes:
  - {id: lint, prompt: lint it, continue_on_failure: true}
  - {id: report, needs: [lint], prompt: '{{ if failed "lint" }}without lint{{ else }}{{ output "lint" }}{{ end }}'}
`
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "j.db")
	code, stdout, stderr := runCLI(t, "run", "--db", db, graph)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	run, outs := nodeOutputs(t, db)
	if run.Status != journal.RunFailed || len(outs) != 1 || outs["report"] == "" {
		t.Fatalf("run %s, completed %v", run.Status, outs)
	}
	if !strings.Contains(stdout, "lint    failed") || !strings.Contains(stdout, "report  completed") {
		t.Errorf("result table:\n%s", stdout)
	}
}

// A file input that is a FIFO nobody writes to waits, as a read of it
// must; Ctrl-C ends the wait at once (exit 130, the run never began).
func TestFIFOInputGivesWayToCtrlC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(graph, []byte("name: spec\ninputs:\n  spec: {type: file}\nproviders:\n  chat: {kind: sim}\n"+
		"nodes:\n  - {id: a, provider: chat, prompt: '{{ input \"spec\" }}'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(noderunBinary(t), "run", "--db", filepath.Join(dir, "j.db"), graph, "--input", "spec=@"+fifo)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the run did not wait for its input: %v\n%s", err, out.String())
	case <-time.After(time.Second):
	}
	sent := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(out.String(), `input "spec"`) {
			t.Fatalf("after Ctrl-C: %v\n%s", err, out.String())
		}
		t.Logf("exited %s after Ctrl-C: %s", time.Since(sent).Round(time.Millisecond), strings.TrimSpace(out.String()))
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still waiting for the FIFO 10 s after Ctrl-C\n%s", out.String())
	}
}
