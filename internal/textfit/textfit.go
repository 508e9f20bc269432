// Package textfit lays text out in the columns a reader has: it folds a line
// at spaces onto indented continuation lines, shortens one keeping its
// decisive parts, and aligns a table whose last column folds under itself.
// The CLI's log and tables and the text renderers of the ledger
// (ledger.WriteText) share it, so that a line is fitted one way everywhere.
//
// Columns are counted in runes (a double-width character counts one). A
// width of 0 or less is no limit.
package textfit

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Line fits a line of text to width (0: no limit), folding at spaces with
// continuation lines indented by two.
func Line(s string, width int) string {
	if width <= 0 {
		return s
	}
	return Fold("", s, width, 2)
}

// Fold breaks prefix+body into lines of at most width columns at spaces,
// continuation lines indented by indent (under the body, for a log line). A
// word longer than a line is broken where it must be: it would wrap anyway.
// A width of 0 or less is no limit.
func Fold(prefix, body string, width, indent int) string {
	if width <= 0 {
		return prefix + strings.Join(strings.Fields(body), " ")
	}
	if width-indent < 20 { // a very narrow terminal: fold under the line's start
		indent = min(indent, 2)
	}
	room := max(width-indent, 10)
	first := max(width-utf8.RuneCountInString(prefix), 10)
	var b strings.Builder
	b.WriteString(prefix)
	line, limit := 0, first
	for _, word := range strings.Fields(body) {
		n := utf8.RuneCountInString(word)
		switch {
		case line == 0:
		case line+1+n <= limit:
			b.WriteByte(' ')
			line++
		default:
			b.WriteString("\n" + strings.Repeat(" ", indent))
			line, limit = 0, room
		}
		for n > limit-line { // longer than what is left of a fresh line
			cut := limit - line
			head, rest := splitRunes(word, cut)
			b.WriteString(head + "\n" + strings.Repeat(" ", indent))
			word, n, line, limit = rest, n-cut, 0, room
		}
		b.WriteString(word)
		line += n
	}
	return b.String()
}

// splitRunes splits s after its first n runes.
func splitRunes(s string, n int) (string, string) {
	for i := range s {
		if n == 0 {
			return s[:i], s[i:]
		}
		n--
	}
	return s, ""
}

// Pair is "msg: cause" in at most n columns. The message says what
// happened and what to do, the cause why: each keeps what it can, the
// message first, while the cause keeps its end (Text).
func Pair(msg, cause string, n int) string {
	if cause == "" {
		return Text(msg, n)
	}
	msg, cause = strings.Join(strings.Fields(msg), " "), strings.Join(strings.Fields(cause), " ")
	lm, lc := utf8.RuneCountInString(msg), utf8.RuneCountInString(cause)
	if lm+2+lc <= n {
		return msg + ": " + cause
	}
	keep := min(lc, max(n/3, 40)) // the least of the cause worth showing
	if lm+2+keep > n {
		msg = CutEnd(msg, max(n-2-keep, 1)) // a message says the fix first
		lm = utf8.RuneCountInString(msg)
	}
	return msg + ": " + Text(cause, n-2-lm)
}

// Text shortens s to at most n columns keeping its decisive parts: an
// error chain reads "what failed: where: …: why", so the first segment (what)
// and the last (the cause, such as "connection refused") stay, and segments
// are dropped from the middle first. Only when those two alone do not fit is
// either cut, with "…" where text is missing. Runs of white space become one
// space.
func Text(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	segs := strings.Split(s, ": ")
	for k := 1; k < len(segs)-1; k++ { // drop k segments after the first
		c := segs[0] + ": …: " + strings.Join(segs[1+k:], ": ")
		if utf8.RuneCountInString(c) <= n {
			return c
		}
	}
	if len(segs) == 1 {
		return CutEnd(s, n)
	}
	head, tail := segs[0], segs[len(segs)-1]
	sep := ": "
	if len(segs) > 2 {
		sep = ": …: "
	}
	room := n - utf8.RuneCountInString(sep)
	keepTail := min(utf8.RuneCountInString(tail), max(room-min(utf8.RuneCountInString(head), room/3), room/2))
	return CutEnd(head, room-keepTail) + sep + CutStart(tail, keepTail)
}

// CutEnd keeps the first n columns of s, ending in "…" when cut, at a word
// boundary when one is near.
func CutEnd(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	head, _ := splitRunes(s, n-1)
	if i := strings.LastIndexByte(head, ' '); i > len(head)*2/3 {
		head = head[:i]
	}
	return head + "…"
}

// CutStart keeps the last n columns of s, starting with "…" when cut.
func CutStart(s string, n int) string {
	r := utf8.RuneCountInString(s)
	if r <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	_, tail := splitRunes(s, r-(n-1))
	return "…" + tail
}

// Table writes rows as aligned columns, two spaces apart; the last column of
// each row is folded to width (0: no limit) under itself, so nothing is cut.
// Every row has the first row's columns; trailing spaces are trimmed.
func Table(w io.Writer, width int, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	cols := len(rows[0])
	widths := make([]int, cols)
	for _, r := range rows {
		for i, cell := range r[:cols-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	lead := 0
	for _, x := range widths[:cols-1] {
		lead += x + 2
	}
	for _, r := range rows {
		var b strings.Builder
		for i, cell := range r[:cols-1] {
			fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
		}
		line := b.String() + r[cols-1]
		if width > 0 {
			line = Fold(b.String(), r[cols-1], width, lead)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}
