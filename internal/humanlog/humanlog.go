// Package humanlog is noderun's log on stderr: a slog.Handler that writes a
// short sentence per event for a person (Handler), and the bound on every
// value a log line quotes (Bounded, BoundAttr), which the logfmt and JSON
// handlers use too. The journal keeps every record whole; stderr is for
// reading.
package humanlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/noderun/noderun/internal/textfit"
)

// Handler writes the log for a person, on a terminal or a pipe: one
// short sentence per event, keyed by node, with its diagnostic code and, for
// a fault, its cause. The run id (said once, when the run starts) and the
// attributes a machine reads stay in the journal and in --log-format json.
//
// Lines fit a width: on a terminal they are folded at spaces onto indented
// continuation lines (nothing is cut, and the terminal never wraps a word);
// on a pipe each event stays one line, shortened by textfit.Text so that the
// cause, at the end of an error chain, survives.
type Handler struct {
	w     io.Writer
	level slog.Leveler
	attrs []slog.Attr
	width func() int // columns; asked per line, as a terminal may be resized
	tty   bool       // fold instead of shortening; no time of day (the live view keeps time)
}

// PipeWidth bounds a line on a pipe or in a file: CI logs are read in a
// browser, where 160 columns show without scrolling.
const PipeWidth = 160

// KeyWidth is the node column: most ids fit, longer ones push the text.
const KeyWidth = 10

// New is a Handler writing to w from level up. On a terminal, width gives
// its columns, asked per line; nil means a pipe or a file, where lines fit
// PipeWidth.
func New(w io.Writer, level slog.Leveler, width func() int) *Handler {
	if width == nil {
		return &Handler{w: w, level: level, width: func() int { return PipeWidth }}
	}
	return &Handler{w: w, level: level, width: width, tty: true}
}

// shownKeys are the attributes the line itself renders; machine keys are
// the rest of a diagnostic's attributes, which only the journal and JSON keep.
var shownKeys = map[string]bool{"run": true, "diag": true, "code": true, "node": true, "attempt": true, "error": true, "err": true, "sim": true}

func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *Handler) Handle(_ context.Context, r slog.Record) error {
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
	body := Bounded(r.Message)
	if strings.Contains(body, cause) {
		cause = ""
	}
	cause = Bounded(cause)
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
	prefix := fmt.Sprintf("%-*s ", KeyWidth, key)
	if !h.tty {
		prefix = r.Time.Format("15:04:05") + " " + prefix
	}
	width := h.width() - utf8.RuneCountInString(suffix)
	var out string
	if h.tty {
		if cause != "" {
			body += ": " + cause
		}
		out = textfit.Fold(prefix, body, width, utf8.RuneCountInString(prefix)) + suffix
	} else {
		out = prefix + textfit.Pair(body, cause, width-utf8.RuneCountInString(prefix)) + suffix
	}
	_, err := io.WriteString(h.w, out+"\n")
	return err
}

func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &c
}

// WithGroup is not used by noderun's loggers; groups are flattened.
func (h *Handler) WithGroup(string) slog.Handler { return h }

// valueText renders an attribute of a plain log line (not a diagnostic):
// durations as people write them.
func valueText(v slog.Value) string {
	if v.Kind() == slog.KindDuration {
		return v.Duration().Round(time.Millisecond).String()
	}
	return textfit.Text(v.String(), 120)
}

// MaxValue bounds one message or value on stderr: a server's error body
// (kept to 8 KiB) is quoted whole in the journal, not on every log line.
const MaxValue = 2 << 10

// Bounded cuts s to MaxValue bytes, saying how long it was.
func Bounded(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	cut := MaxValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [%d bytes; the journal has it whole]", s[:cut], len(s))
}

// BoundAttr bounds a record's string and error values (slog.HandlerOptions.ReplaceAttr).
func BoundAttr(_ []string, a slog.Attr) slog.Attr {
	switch {
	case a.Value.Kind() == slog.KindString && len(a.Value.String()) > MaxValue:
		return slog.String(a.Key, Bounded(a.Value.String()))
	case a.Value.Kind() == slog.KindAny:
		if err, ok := a.Value.Any().(error); ok && len(err.Error()) > MaxValue {
			return slog.String(a.Key, Bounded(err.Error()))
		}
	}
	return a
}
