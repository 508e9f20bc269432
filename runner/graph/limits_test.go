package graph

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 15: templates are checked against what a node can see: no call, a
// range only over .Outputs or .Inputs.
func TestTemplatesRefuseCallAndUnboundedRange(t *testing.T) {
	head := "name: t\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n"
	for src, want := range map[string]string{
		head + "  - {id: b, needs: [a], prompt: '{{ call .Outputs.a }}'}\n":                                 "call is not available",
		head + "  - {id: b, needs: [a], prompt: '{{ range 20000000 }}x{{ end }}'}\n":                        "range works over .Outputs or .Inputs only",
		head + "  - {id: b, needs: [a], prompt: '{{ range $i := 9 }}{{ $i }}{{ end }}'}\n":                  "range works over",
		head + "  - {id: b, needs: [a], prompt: '{{ range .Inputs }}{{ . }}{{ end }}{{ output \"a\" }}'}\n": "",
		head + "  - {id: b, needs: [a], prompt: '{{ range $k, $v := .Outputs }}{{ $v }}{{ end }}'}\n":       "",
	} {
		_, err := Parse("g.yaml", []byte(src))
		if want == "" && err != nil {
			t.Errorf("rejected a valid template: %v", err)
		}
		if want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "g.yaml:6")) {
			t.Errorf("want g.yaml:6 and %q, got %v", want, err)
		}
	}
}

// A prompt that renders past MaxPromptBytes stops there with ErrTooLarge.
func TestRenderIsBounded(t *testing.T) {
	g, err := Parse("g.yaml", []byte("name: t\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n"+
		"  - {id: b, needs: [a], prompt: '"+strings.Repeat(`{{ output "a" }}`, 9)+"'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Repeat("y", 1<<20)
	_, _, err = g.Node("b").Render(Values{Outputs: map[string]string{"a": out}})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `node "b": prompt`) {
		t.Fatalf("9 MiB prompt: %v, want ErrTooLarge naming the node", err)
	}
	if _, p, err := g.Node("b").Render(Values{Outputs: map[string]string{"a": out[:1<<19]}}); err != nil || len(p) != 9<<19 {
		t.Fatalf("4.5 MiB prompt: %d bytes, %v", len(p), err)
	}
}

// A graph file is read with a bound, and a read that blocks gives way to ctx.
func TestLoadIsBounded(t *testing.T) {
	start := time.Now()
	if _, err := Load("/dev/zero"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "/dev/zero") {
		t.Fatalf("/dev/zero: %v", err)
	}
	t.Logf("/dev/zero refused after %s", time.Since(start))
	fifo := filepath.Join(t.TempDir(), "g.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := LoadContext(ctx, fifo); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FIFO nobody writes: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("LoadContext held the caller %s after ctx ended", took)
	}
	// Unblock the abandoned open so the test leaves no goroutine behind.
	if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
		f.Close()
	}
}

// docs/diagnostics.md states the limits this package enforces.
func TestDocsStateTheGraphLimits(t *testing.T) {
	b, err := os.ReadFile("../../docs/diagnostics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| a graph file | 4 MiB |", "| a node's rendered system or prompt | 8 MiB |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("docs/diagnostics.md lacks %q", want)
		}
	}
	if MaxFileBytes != 4<<20 || MaxPromptBytes != 8<<20 {
		t.Errorf("the limits changed: update docs/diagnostics.md and this test")
	}
}

// FuzzRender: any prompt template the parser accepts renders without
// panicking, within MaxPromptBytes, or fails with an error.
func FuzzRender(f *testing.F) {
	f.Add(`{{ output "a" }}`)
	f.Add(`{{ range $id, $o := .Outputs }}{{ $id }}={{ $o }}{{ end }}`)
	f.Add(`{{ if failed "a" }}none{{ else }}{{ index .Outputs "a" }}{{ end }}`)
	f.Add(`{{ input "goal" }} {{ .Inputs.goal }}`)
	f.Add(`{{ range .Inputs }}{{ . }}{{ end }}`)
	f.Fuzz(func(t *testing.T, prompt string) {
		src := "name: t\ninputs:\n  goal: {default: g}\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n" +
			"  - id: b\n    needs: [a]\n    prompt: " + strconv.Quote(prompt) + "\n"
		g, err := Parse("g.yaml", []byte(src))
		if err != nil {
			return
		}
		inputs, err := g.ResolveInputs(nil)
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := g.Node("b").Render(Values{Outputs: map[string]string{"a": strings.Repeat("out ", 1000)}, Inputs: inputs})
		if err == nil && len(p) > MaxPromptBytes {
			t.Fatalf("rendered %d bytes", len(p))
		}
	})
}

// A prompt without an action is not parsed as a template: it renders as
// text/template would render it (itself), needs still checked, and a code-built
// node's past MaxPromptBytes is refused as a rendered one is.
func TestLiteralPromptRendersAsItself(t *testing.T) {
	lit := "a plain prompt: {not an action} } {, 100% \\n $x . \n"
	g, err := Parse("g.yaml", []byte("name: t\nproviders:\n  p: {kind: sim}\nnodes:\n  - {id: a, prompt: x}\n"+
		"  - {id: b, needs: [a], system: "+strconv.Quote("sys "+lit)+", prompt: "+strconv.Quote(lit)+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := g.Node("b")
	want, err := graphNewTemplate("prompt", lit)
	if err != nil {
		t.Fatal(err)
	}
	var viaTemplate strings.Builder
	if err := want.Execute(&viaTemplate, nil); err != nil {
		t.Fatal(err)
	}
	sys, p, err := b.Render(Values{Outputs: map[string]string{"a": "A"}})
	if err != nil || p != viaTemplate.String() || p != lit || sys != "sys "+lit {
		t.Fatalf("Render = %q, %q, %v; text/template renders %q", sys, p, err, viaTemplate.String())
	}
	if _, _, err := b.Render(Values{}); err == nil || !strings.Contains(err.Error(), `no output given for "a"`) {
		t.Fatalf("a missing need: %v", err)
	}
	built := &Node{ID: "c", Prompt: strings.Repeat("z", MaxPromptBytes+1)}
	if _, _, err := built.Render(Values{}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `node "c": prompt`) {
		t.Fatalf("a literal past MaxPromptBytes: %v, want ErrTooLarge naming the node", err)
	}
	built.Prompt = built.Prompt[1:]
	if _, p, err := built.Render(Values{}); err != nil || len(p) != MaxPromptBytes {
		t.Fatalf("a literal of MaxPromptBytes: %d bytes, %v", len(p), err)
	}
}
