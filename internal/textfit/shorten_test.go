package textfit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The one rule, clause by clause: each case is a defect seen in a real line.
func TestTheOneRule(t *testing.T) {
	disconnect := "responses resp_4797d1335e197ac97cb793d9b241c09327e1dc16c4f5985c: stream disconnected before completion: read tcp 127.0.0.1:55534->127.0.0.1:33753: unexpected EOF"
	cases := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"the searched phrase stays whole, the cause at the end", disconnect, 90,
			"responses …: stream disconnected before completion: …: unexpected EOF"},
		{"a narrower room drops the start before the phrase or the cause", disconnect, 60,
			"…: stream disconnected before completion: …: unexpected EOF"},
		{"a bracket is kept whole or not at all", "not replayed, its request may have had side effects (side_effects: unsafe)", 50,
			"not replayed, its … effects (side_effects: unsafe)"},
		{"a code is never cut", "plan failed after 3 attempts, every one of them refused by the gateway NR903", 40,
			"plan failed after 3 … the gateway NR903"},
		{"words, never halves of them", "the quick brown fox jumps over the lazy dog", 20, "the quick … lazy dog"},
		{"quotes stay paired", `body ended (finish_reason "", [DONE] false) after 235 bytes`, 30, "body ended … after 235 bytes"},
	}
	for _, c := range cases {
		got := Text(c.s, c.n)
		if got != c.want {
			t.Errorf("%s:\nText(%q, %d)\n got %q\nwant %q", c.name, c.s, c.n, got, c.want)
		}
		if utf8.RuneCountInString(got) > c.n {
			t.Errorf("%s: %d columns, over %d", c.name, utf8.RuneCountInString(got), c.n)
		}
	}
}

// Properties every shortened line has, at every width.
func TestTheOneRuleHolds(t *testing.T) {
	lines := []string{
		chain,
		`node plan: not replayed, its request may have had side effects (side_effects: unsafe): stream disconnected before completion: body ended (finish_reason "", [DONE] false)  NR905`,
		"disconnect detected after 147 bytes of output: chat stream: read tcp 127.0.0.1:55534->127.0.0.1:33753: read: connection reset by peer NR101",
	}
	for _, s := range lines {
		words := map[string]bool{}
		for _, w := range strings.Fields(s) {
			words[w] = true
		}
		for n := 12; n <= utf8.RuneCountInString(s)+1; n++ {
			got := Text(s, n)
			if utf8.RuneCountInString(got) > n {
				t.Fatalf("Text(%q, %d) = %q: %d columns", s, n, got, utf8.RuneCountInString(got))
			}
			if strings.Contains(got, "stream disconnected") != strings.Contains(got, "stream disconnected before completion") {
				t.Errorf("Text(…, %d) = %q: the phrase is cut", n, got)
			}
			if n >= 40 && strings.Contains(s, "NR") && !strings.Contains(got, "NR") {
				t.Errorf("Text(…, %d) = %q: the code is gone", n, got)
			}
			if strings.Count(got, "(") != strings.Count(got, ")") || strings.Count(got, `"`)%2 != 0 {
				t.Errorf("Text(…, %d) = %q: unbalanced", n, got)
			}
			for _, w := range strings.Fields(got) {
				if w = strings.Trim(w, "…"); w == ":" {
					continue
				}
				if w != "" && !words[w] && !words[w+":"] && !strings.Contains(s, w) {
					t.Errorf("Text(…, %d) = %q: %q is not a word of the line", n, got, w)
				}
				if w != "" && !strings.Contains(w, " ") && !words[w] && !words[w+":"] && n >= 40 {
					t.Errorf("Text(…, %d) = %q: %q is half a word", n, got, w)
				}
			}
		}
	}
}

// A live line is cut at its end, its columns' spacing kept, never inside a
// bracket.
func TestCutEndKeepsSpacing(t *testing.T) {
	line := "  write      streaming   1211 B  | continuing from byte 235 (attempt 1's)  silent 1.5s"
	if got, want := CutEnd(line, 61), "  write      streaming   1211 B  | continuing from byte 235 …"; got != want {
		t.Errorf("CutEnd(…, 61) = %q, want %q", got, want)
	}
	if got := CutEnd(line, 200); got != line {
		t.Errorf("a line that fits changed: %q", got)
	}
}
