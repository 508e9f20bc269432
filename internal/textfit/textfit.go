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
// happened and what to do, the cause why: each is shortened by the one rule
// (Text), the message keeping its room first.
func Pair(msg, cause string, n int) string {
	if cause == "" {
		return Text(msg, n)
	}
	msg, cause = strings.Join(strings.Fields(msg), " "), strings.Join(strings.Fields(cause), " ")
	lm, lc := utf8.RuneCountInString(msg), utf8.RuneCountInString(cause)
	if lm+2+lc <= n {
		return msg + ": " + cause
	}
	keep := min(lc, max(n/2, 40)) // the least of the cause worth showing
	for _, p := range Pinned {
		if strings.Contains(cause, p) { // the phrase and the cause's last words
			keep = min(lc, max(keep, min(utf8.RuneCountInString(p)+40, n*3/4)))
		}
	}
	if lm+2+keep > n {
		msg = Text(msg, max(n-2-keep, 1)) // its start says the fix, its end may say why
		lm = utf8.RuneCountInString(msg)
	}
	return msg + ": " + Text(cause, n-2-lm)
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
