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

// minPiece is the shortest piece of a secret masked wherever it appears: a
// secret cut by a truncation (an error body kept to 8 KiB, an excerpt, a
// line cut to its width), before or after it reached us, still leaves no 12
// of its characters together. At an end of the text, or just before an
// ellipsis (where noderun cuts), minSecret characters of its start or end
// are enough.
const minPiece = 12

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
	pieces  map[string]bool // every minPiece-long substring of a secret
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
		r.pieces = map[string]bool{}
		for _, s := range r.secrets {
			for i := 0; i+minPiece <= len(s); i++ {
				r.pieces[s[i:i+minPiece]] = true
			}
		}
	}
	return r
}

// cutPieces masks what is left of a secret that was cut: any minPiece
// characters of one, wherever they are, and minSecret characters of one's
// start at the end of s or before an ellipsis, or of its end at s's start.
func (r *Redactor) cutPieces(s string) string {
	if len(r.pieces) == 0 {
		return s
	}
	var b strings.Builder
	last := 0 // s[:last] is written
	for i := 0; i+minPiece <= len(s); {
		if !r.pieces[s[i:i+minPiece]] {
			i++
			continue
		}
		j := i + minPiece
		for j < len(s) && r.inSecret(s[i:j+1]) {
			j++
		}
		b.WriteString(s[last:i])
		b.WriteString(Mask)
		last, i = j, j
	}
	if last > 0 {
		b.WriteString(s[last:])
		s = b.String()
	}
	for _, sec := range r.secrets {
		// its start, cut at the end of s (or before an ellipsis)
		for n := min(len(sec)-1, len(s)); n >= minSecret; n-- {
			head := sec[:n]
			if strings.HasSuffix(s, head) {
				s = s[:len(s)-n] + Mask
				break
			}
			if k := strings.Index(s, head+"…"); k >= 0 {
				s = s[:k] + Mask + s[k+n:]
				break
			}
			if k := strings.Index(s, head+" …"); k >= 0 {
				s = s[:k] + Mask + s[k+n:]
				break
			}
		}
		// its end, at the start of s
		for n := min(len(sec)-1, len(s)); n >= minSecret; n-- {
			if strings.HasPrefix(s, sec[len(sec)-n:]) {
				s = Mask + s[n:]
				break
			}
		}
	}
	return s
}

// inSecret reports whether p is a substring of a secret.
func (r *Redactor) inSecret(p string) bool {
	for _, s := range r.secrets {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	if r.repl != nil {
		s = r.cutPieces(r.repl.Replace(s))
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
