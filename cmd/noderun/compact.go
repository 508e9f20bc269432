package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// compactHandler prints diagnostics for a person at a terminal: code, node
// and message on one short line, with only the attributes that explain the
// step. The full record is in the journal (noderun events) and in the
// key=value lines written when stderr is not a terminal.
type compactHandler struct {
	w     io.Writer
	level slog.Leveler
	attrs []slog.Attr
}

// quiet are attributes the line already shows, or that only a machine needs.
var quiet = map[string]bool{"run": true, "diag": true, "code": true, "node": true, "attempt": true,
	"retries_left": true, "reconnects_left": true, "delay": true, "class": true, "ref": true, "seq": true}

func (h *compactHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *compactHandler) Handle(_ context.Context, r slog.Record) error {
	code, node, attempt := "", "", ""
	var extra []string
	add := func(a slog.Attr) bool {
		switch a.Key {
		case "code":
			code = a.Value.String()
		case "node":
			node = a.Value.String()
		case "attempt":
			attempt = a.Value.String()
		}
		if !quiet[a.Key] {
			extra = append(extra, a.Key+"="+oneLine(a.Value.String(), 90))
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if code == "" {
		code = strings.ToLower(r.Level.String())
	}
	if node != "" && attempt != "" {
		node += "#" + attempt
	}
	line := fmt.Sprintf("  %-6s %-14s %s", code, node, bounded(r.Message))
	if len(extra) > 0 {
		line += "  (" + strings.Join(extra, " ") + ")"
	}
	_, err := io.WriteString(h.w, line+"\n")
	return err
}

func (h *compactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &compactHandler{w: h.w, level: h.level, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

// WithGroup is not used by noderun's loggers; groups are flattened.
func (h *compactHandler) WithGroup(string) slog.Handler { return h }
