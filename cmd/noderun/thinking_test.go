package main

import (
	"encoding/json"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider/sim"
)

// Issue 25: thinking is journaled apart from the answer: `show --thinking`
// prints it (as the provider streamed it: the simulator's own text for the
// request, an independent count), `show` never does, and `show --json`
// carries both, apart.
func TestShowThinking(t *testing.T) {
	t.Parallel()
	const prompt = "think it over"
	src := "name: think\nprofile: ci\nproviders:\n  deep:\n    kind: sim\n    api: responses\n    sim: {seed: 3, tokens: 40}\n" +
		"nodes:\n  - {id: answer, prompt: " + prompt + ", reasoning_effort: low}\n"
	graph := tempFile(t, "think.yaml", src)
	db := filepath.Join(t.TempDir(), "j.db")
	if code, _, errs := runCLI(t, "run", graph, "--db", db); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	want := strings.Join(sim.ReasoningText("sim", prompt, 3, "low"), "")
	code, thinking, errs := runCLI(t, "show", "last", "answer", "--thinking", "--db", db)
	if code != exitOK || thinking != want {
		t.Fatalf("show --thinking: exit %d\n%q\nwant %q\n%s", code, thinking, want, errs)
	}
	_, output, _ := runCLI(t, "show", "last", "answer", "--db", db)
	if output != strings.Join(sim.Text("sim", prompt, 3, 40), "") || strings.Contains(output, thinking) {
		t.Errorf("the output is not the answer alone:\n%q", output)
	}
	_, js, _ := runCLI(t, "show", "last", "answer", "--json", "--db", db)
	var got struct{ Output, Thinking string }
	if err := json.Unmarshal([]byte(js), &got); err != nil || got.Output != output || got.Thinking != want {
		t.Errorf("show --json: %v\n%s", err, js)
	}
	if code, _, errs := runCLI(t, "show", "last", "answer", "--thinking", "--attempts", "--db", db); code != exitUsage || !strings.Contains(errs, "give one") {
		t.Errorf("--thinking with --attempts: exit %d\n%s", code, errs)
	}
}

// The report shows a node's thinking apart from its output.
func TestReportShowsThinking(t *testing.T) {
	t.Parallel()
	src := "name: think\nprofile: ci\nproviders:\n  deep:\n    kind: sim\n    api: responses\n    sim: {seed: 3, tokens: 40}\n" +
		"nodes:\n  - {id: answer, prompt: ponder, reasoning_effort: low}\n"
	db := filepath.Join(t.TempDir(), "j.db")
	if code, _, errs := runCLI(t, "run", tempFile(t, "think.yaml", src), "--db", db); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if code, _, errs := runCLI(t, "report", "last", "-o", html, "--db", db); code != exitOK {
		t.Fatalf("report: exit %d\n%s", code, errs)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(sim.ReasoningText("sim", "ponder", 3, "low"), "")
	page := string(b)
	i := strings.Index(page, `class="output thinking"`)
	if i < 0 || !strings.Contains(page[i:], template.HTMLEscapeString(want)) {
		t.Fatalf("the report lacks the node's thinking %q", want)
	}
	if j := strings.Index(page, `<pre class="output" data-node="answer"`); j < 0 || strings.Contains(page[j:i], template.HTMLEscapeString(want)) {
		t.Errorf("the thinking is in the output's block, or the output is missing")
	}
}
