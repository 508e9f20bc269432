package graph

import (
	"errors"
	"strings"
	"testing"
)

// A graph file with several problems, in its own fields, its `sim:` block
// and its faults, reports every one at its line, in the file's words.
func TestGraphReportsEveryProblemAtItsLine(t *testing.T) {
	src := "name: g\n" + // 1
		"providers:\n" + // 2
		"  s:\n" + // 3
		"    kind: sim\n" + // 4
		"    sim:\n" + // 5
		"      tokens: lots\n" + // 6
		"      silence: -2s\n" + // 7
		"      seeed: 3\n" + // 8
		"      faults:\n" + // 9
		"        - {kind: outage}\n" + // 10
		"        - kind: status\n" + // 11
		"          status: 99\n" + // 12
		"          endpoint: interactions.create\n" + // 13
		"nodes:\n" + // 14
		"  - id: a\n" + // 15
		"    prompt: p\n" + // 16
		"    timeout: 0s\n" + // 17
		"    retries: -1\n" + // 18
		"    promt: q\n" // 19
	_, err := Parse("g.yaml", []byte(src))
	ge, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("%v", err)
	}
	want := []struct {
		line  int
		msg   string
		cause error
	}{
		{6, `provider "s": sim: tokens: want a whole number >= 0, got "lots"`, nil},
		{7, `provider "s": sim: silence: want a duration >= 0, got -2s`, nil},
		{8, `provider "s": sim: unknown field "seeed"`, ErrUnknownField},
		{10, `provider "s": sim: outage needs a duration > 0`, nil},
		{12, `provider "s": sim: status: want an HTTP status in 400-599 for kind status, got 99`, nil},
		{17, "timeout must be > 0", nil},
		{18, "retries must be >= 0, got -1", nil},
		{19, `unknown field "promt"`, ErrUnknownField},
	}
	if len(ge.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ge.Problems), len(want), err)
	}
	for i, w := range want {
		if i >= len(ge.Problems) {
			break
		}
		p := ge.Problems[i]
		if p.Line != w.line || !strings.Contains(p.Msg, w.msg) || (w.cause != nil && !errors.Is(p.Err, w.cause)) {
			t.Errorf("problem %d = line %d %q (%v), want line %d %q (%v)", i, p.Line, p.Msg, p.Err, w.line, w.msg, w.cause)
		}
		for _, goWord := range []string{"int64", "float64", "cannot read", "cannot unmarshal", "!!"} {
			if strings.Contains(p.Msg, goWord) {
				t.Errorf("problem %d speaks Go: %s", i, p.Msg)
			}
		}
	}
	if !errors.Is(err, ErrUnknownField) {
		t.Error("errors.Is does not find ErrUnknownField through the graph's error")
	}
	for i, l := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(l, "g.yaml:") {
			t.Errorf("line %d of the error does not name the file and line: %q", i, l)
		}
	}
}
