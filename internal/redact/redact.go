// Package redact removes secrets from text before it is journaled or logged:
// the values of the API keys a run uses, and credentials a server echoes back
// (an Authorization or api-key header quoted in an error body).
package redact

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "[redacted]"

// minSecret is the shortest value taken as a secret: shorter ones would mask
// ordinary words.
const minSecret = 8

// echoed finds credentials in the forms servers echo them: a bearer token,
// an api-key header or field, an OpenAI-style sk- key.
var echoed = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}` +
	`|((?:x-)?api[-_]?key["']?\s*[:=]\s*["']?)[^\s"',;}]{8,}` +
	`|\bsk-[A-Za-z0-9_-]{16,}`)

// Redactor masks a fixed set of secrets and the echoed-credential forms. The
// zero value masks only the forms. It is safe for concurrent use.
type Redactor struct {
	secrets []string
	repl    *strings.Replacer
}

// New returns a Redactor for secrets; values shorter than 8 bytes are ignored.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	var pairs []string
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
			pairs = append(pairs, s, Mask)
		}
	}
	if len(pairs) > 0 {
		r.repl = strings.NewReplacer(pairs...)
	}
	return r
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	if r.repl != nil {
		s = r.repl.Replace(s)
	}
	if !mayEcho(s) {
		return s
	}
	return echoed.ReplaceAllStringFunc(s, func(m string) string {
		sub := echoed.FindStringSubmatch(m)
		switch {
		case sub[1] != "":
			return sub[1] + Mask
		case sub[2] != "":
			return sub[2] + Mask
		}
		return Mask
	})
}

// mayEcho is a cheap test that skips the regular expression for most text.
func mayEcho(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "bearer") || strings.Contains(l, "key") || strings.Contains(l, "sk-")
}

// Bytes is String for bytes; b is returned as is when nothing is masked.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	s := string(b)
	if out := r.String(s); out != s {
		return []byte(out)
	}
	return b
}

// Any masks the strings inside v (a string, []byte, error, or a map or slice
// of them, as decoded JSON is), returning v's redacted copy.
func (r *Redactor) Any(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []byte:
		return r.Bytes(x)
	case error:
		return r.String(x.Error())
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.Any(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.Any(e)
		}
		return out
	}
	return v
}

// Handler wraps h so that every message and string attribute it logs is
// redacted.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &handler{h: h, r: r} }

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, e := range g {
			out[i] = h.attr(e)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.String(err.Error()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(out), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}
