package view

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// Issue 46: the result table on stdout is fitted to its width (a
// terminal's, or 160 columns on a pipe): a long note folds under itself,
// nothing cut; the closing hint, a command, stays one line.
func TestWriteResultFitsTheWidth(t *testing.T) {
	note := `node "only" failed [NR903 budget_exhausted]: connect_failed: Post "http://127.0.0.1:9/v1/chat/completions": dial tcp 127.0.0.1:9: connect: connection refused; the retry budget is spent (and nothing is left to re-attach to) (tried: 4 attempts, 3 of 3 retries used)`
	hint := "output: noderun show 2fc114e1 only --db /a/very/long/path/to/a/journal/that/is/long/enough/to/pass/the/width/when/it/is/added/to/the/command.db   (what recovery did: noderun diagnose 2fc114e1)"
	res := Result{RunID: "run-1", Status: "failed", Nodes: []ResultNode{{ID: "only", StateText: "failed", Note: note}},
		Summary: []string{strings.Repeat("a summary line that is long ", 8)}}
	var b bytes.Buffer
	WriteResult(&b, 0, res, hint) // a pipe
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > PipeWidth && l != hint {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if lines[len(lines)-1] != hint {
		t.Errorf("the hint is not whole on the last line: %q", lines[len(lines)-1])
	}
	if got := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(got, strings.Join(strings.Fields(note), " ")) {
		t.Errorf("the note lost words:\n%s", b.String())
	}
}

// A node's note too long for the status table is cut there and written
// whole below, folded to the width.
func TestWriteNodesFoldsTheNoteBelow(t *testing.T) {
	st := Status{Nodes: []Node{{ID: "only", State: "failed", ErrorClass: "connect_failed",
		Error: strings.Repeat("connect: connection refused by the server at 127.0.0.1:9 ", 6)}}}
	var b bytes.Buffer
	if err := WriteNodes(&b, 0, st); err != nil { // a pipe
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(below)") {
		t.Fatalf("no note below:\n%s", b.String())
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > PipeWidth && !strings.HasPrefix(l, "only ") {
			t.Errorf("a line below of %d columns: %q", n, l)
		}
	}
}
