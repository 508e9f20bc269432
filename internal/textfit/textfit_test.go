package textfit

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

const chain = `connect_failed: Post "http://127.0.0.1:9/v1/chat/completions": dial tcp 127.0.0.1:9: connect: connection refused`

// An error chain keeps what failed and why: segments go from the middle.
func TestTextKeepsTheCause(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"a  b\n c", 10, "a b c"},
		{chain, 200, chain},
		{chain, 60, "connect_failed: …: connect: connection refused"},
		{chain, 40, "connect_failed: …: connection refused"},
		{chain, 30, "…: connect: connection refused"},
		{"one long segment without any separator at all", 20, "one long … at all"},
		{"head: tail that is far too long to keep whole", 20, "head: … keep whole"},
	}
	for _, c := range cases {
		got := Text(c.s, c.n)
		if got != c.want {
			t.Errorf("Text(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if utf8.RuneCountInString(got) > c.n {
			t.Errorf("Text(%q, %d) is %d columns", c.s, c.n, utf8.RuneCountInString(got))
		}
	}
}

func TestFold(t *testing.T) {
	cases := []struct {
		name          string
		prefix, body  string
		width, indent int
		want          string
	}{
		{"no limit joins white space", "> ", "a  b\n c", 0, 2, "> a b c"},
		{"fits", "", "one two three", 20, 2, "one two three"},
		{"folds at spaces, indented", "plan  ", "node failed: connection refused by the server", 30, 6,
			"plan  node failed: connection\n      refused by the server"},
		{"a word longer than a line is broken", "", "abcdefghijklmnopqrstuvwxyz0123456789", 30, 2,
			"abcdefghijklmnopqrstuvwxyz0123\n  456789"},
		{"a narrow terminal folds under the line's start", "0123456789 ", "aaa bbb ccc ddd eee", 21, 11,
			"0123456789 aaa bbb\n  ccc ddd eee"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Fold(c.prefix, c.body, c.width, c.indent)
			if got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			for _, l := range strings.Split(got, "\n") {
				if c.width > 0 && utf8.RuneCountInString(l) > c.width {
					t.Errorf("a line of %d columns, wider than %d: %q", utf8.RuneCountInString(l), c.width, l)
				}
			}
		})
	}
	if got := Line("a  b", 0); got != "a  b" {
		t.Errorf("Line without a width changed the text: %q", got)
	}
	if got := Line("one two three", 9); got != "one two\n  three" {
		t.Errorf("Line: %q", got)
	}
}

func TestPairAndCuts(t *testing.T) {
	cases := []struct {
		name, got, want string
	}{
		{"a pair that fits", Pair("node failed", "refused", 40), "node failed: refused"},
		{"no cause", Pair("node failed  now", "", 40), "node failed now"},
		{"the cause keeps its end", Pair("node failed", chain, 60), "node failed: connect_failed: …: connect: connection refused"},
		{"a long message gives way", Pair(strings.Repeat("m", 50), "refused", 30), strings.Repeat("m", 20) + "…: refused"},
		{"CutEnd at a word", CutEnd("the quick brown fox jumps", 18), "the quick brown …"},
		{"CutEnd short", CutEnd("abc", 3), "abc"},
		{"CutEnd one column", CutEnd("abc", 1), "…"},
		{"CutStart", CutStart("connection refused", 8), "…refused"},
		{"CutStart short", CutStart("abc", 5), "abc"},
		{"CutStart one column", CutStart("abc", 0), "…"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

// A table's columns align; its last one folds under itself, nothing cut.
func TestTable(t *testing.T) {
	rows := [][]string{{"NODE", "STATE", "NOTE"}, {"plan", "completed", ""}, {"report", "failed", "rejected: the request is too large for the model"}}
	var b bytes.Buffer
	Table(&b, 0, rows)
	want := "NODE    STATE      NOTE\n" +
		"plan    completed\n" +
		"report  failed     rejected: the request is too large for the model\n"
	if b.String() != want {
		t.Errorf("no limit:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	Table(&b, 40, rows)
	want = "NODE    STATE      NOTE\n" +
		"plan    completed\n" +
		"report  failed     rejected: the request\n" +
		"                   is too large for the\n" +
		"                   model\n"
	if b.String() != want {
		t.Errorf("width 40:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	Table(&b, 40, nil)
	if b.Len() != 0 {
		t.Errorf("no rows wrote %q", b.String())
	}
}
