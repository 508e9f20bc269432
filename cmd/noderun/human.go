package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"
)

// humanHandler writes the log for a person, on a terminal or a pipe: one
// short sentence per event, keyed by node, with its diagnostic code and, for
// a fault, its cause. The run id (said once, when the run starts) and the
// attributes a machine reads stay in the journal and in --log-format json.
//
// Lines fit a width: on a terminal they are folded at spaces onto indented
// continuation lines (nothing is cut, and the terminal never wraps a word);
// on a pipe each event stays one line, shortened by fitText so that the
// cause, at the end of an error chain, survives.
type humanHandler struct {
	w     io.Writer
	level slog.Leveler
	attrs []slog.Attr
	width func() int // columns; asked per line, as a terminal may be resized
	tty   bool       // fold instead of shortening; no time of day (the live view keeps time)
}

// pipeWidth bounds a line on a pipe or in a file: CI logs are read in a
// browser, where 160 columns show without scrolling.
const pipeWidth = 160

// keyWidth is the node column: most ids fit, longer ones push the text.
const keyWidth = 10

// shownKeys are the attributes the line itself renders; machine keys are
// the rest of a diagnostic's attributes, which only the journal and JSON keep.
var shownKeys = map[string]bool{"run": true, "diag": true, "code": true, "node": true, "attempt": true, "error": true, "err": true, "sim": true}

func (h *humanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *humanHandler) Handle(_ context.Context, r slog.Record) error {
	var code, node, attempt, cause, simName string
	var extra []string
	add := func(a slog.Attr) bool {
		switch v := a.Value.Resolve(); a.Key {
		case "code":
			code = v.String()
		case "node":
			node = v.String()
		case "attempt":
			attempt = v.String()
		case "error", "err":
			cause = v.String()
		case "sim":
			simName = v.String()
		default:
			if !shownKeys[a.Key] {
				extra = append(extra, a.Key+"="+valueText(v))
			}
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	body := bounded(r.Message)
	if strings.Contains(body, cause) {
		cause = ""
	}
	cause = bounded(cause)
	suffix := ""
	switch {
	case code != "":
		// A diagnostic's attributes are the journal's: its message says what
		// a person needs, and its code finds it in docs/diagnostics.md.
		suffix = "  " + code
	case r.Level >= slog.LevelWarn || r.Level < slog.LevelInfo:
		// A plain warning (the journal's lock, its disk) or a debug line has
		// no record in the journal: its attributes are shown here.
		if len(extra) > 0 {
			body += " (" + strings.Join(extra, ", ") + ")"
		}
		if r.Level >= slog.LevelWarn {
			body = strings.ToLower(r.Level.String()) + ": " + body
		}
	}
	key := node
	if attempt != "" && attempt != "1" && attempt != "0" {
		key += "#" + attempt
	}
	if key == "" && simName != "" {
		key = "sim " + simName
	}
	prefix := fmt.Sprintf("%-*s ", keyWidth, key)
	if !h.tty {
		prefix = r.Time.Format("15:04:05") + " " + prefix
	}
	width := h.width() - utf8.RuneCountInString(suffix)
	var out string
	if h.tty {
		if cause != "" {
			body += ": " + cause
		}
		out = fold(prefix, body, width, utf8.RuneCountInString(prefix)) + suffix
	} else {
		out = prefix + fitPair(body, cause, width-utf8.RuneCountInString(prefix)) + suffix
	}
	_, err := io.WriteString(h.w, out+"\n")
	return err
}

func (h *humanHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &c
}

// WithGroup is not used by noderun's loggers; groups are flattened.
func (h *humanHandler) WithGroup(string) slog.Handler { return h }

// valueText renders an attribute of a plain log line (not a diagnostic):
// durations as people write them.
func valueText(v slog.Value) string {
	if v.Kind() == slog.KindDuration {
		return v.Duration().Round(time.Millisecond).String()
	}
	return fitText(v.String(), 120)
}

// fold breaks prefix+body into lines of at most width columns at spaces,
// continuation lines indented by indent (under the body, for a log line). A
// word longer than a line is broken where it must be: it would wrap anyway.
// A width of 0 or less is no limit.
func fold(prefix, body string, width, indent int) string {
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

func splitRunes(s string, n int) (string, string) {
	for i := range s {
		if n == 0 {
			return s[:i], s[i:]
		}
		n--
	}
	return s, ""
}

// fitPair is "msg: cause" in at most n columns. The message says what
// happened and what to do, the cause why: each keeps what it can, the
// message first, while the cause keeps its end (fitText).
func fitPair(msg, cause string, n int) string {
	if cause == "" {
		return fitText(msg, n)
	}
	msg, cause = strings.Join(strings.Fields(msg), " "), strings.Join(strings.Fields(cause), " ")
	lm, lc := utf8.RuneCountInString(msg), utf8.RuneCountInString(cause)
	if lm+2+lc <= n {
		return msg + ": " + cause
	}
	keep := min(lc, max(n/3, 40)) // the least of the cause worth showing
	if lm+2+keep > n {
		msg = cutEnd(msg, max(n-2-keep, 1)) // a message says the fix first
		lm = utf8.RuneCountInString(msg)
	}
	return msg + ": " + fitText(cause, n-2-lm)
}

// fitText shortens s to at most n columns keeping its decisive parts: an
// error chain reads "what failed: where: …: why", so the first segment (what)
// and the last (the cause, such as "connection refused") stay, and segments
// are dropped from the middle first. Only when those two alone do not fit is
// either cut, with "…" where text is missing.
func fitText(s string, n int) string {
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
		return cutEnd(s, n)
	}
	head, tail := segs[0], segs[len(segs)-1]
	sep := ": "
	if len(segs) > 2 {
		sep = ": …: "
	}
	room := n - utf8.RuneCountInString(sep)
	keepTail := min(utf8.RuneCountInString(tail), max(room-min(utf8.RuneCountInString(head), room/3), room/2))
	return cutEnd(head, room-keepTail) + sep + cutStart(tail, keepTail)
}

// cutEnd keeps the first n columns of s, ending in "…" when cut, at a word
// boundary when one is near.
func cutEnd(s string, n int) string {
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

// cutStart keeps the last n columns of s, starting with "…" when cut.
func cutStart(s string, n int) string {
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
