package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	r := New("s3cr3t-key-value-123", "short")
	cases := []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"key s3cr3t-key-value-123 in a body", "key [redacted] in a body"},
		{`{"echo":"Authorization: Bearer abcdefgh12345678"}`, `{"echo":"Authorization: Bearer [redacted]"}`},
		{"authorization: bearer xyz.abc-DEF_123", "authorization: bearer [redacted]"},
		{`"api-key": "0123456789abcdef"`, `"api-key": "[redacted]"`},
		{"x-api-key=0123456789abcdef;", "x-api-key=[redacted];"},
		{"api_key: abcdefghij", "api_key: [redacted]"},
		{"your key sk-proj-ABCDEFGHIJKLMNOPQRST is wrong", "your key [redacted] is wrong"},
		{"a short value stays short", "a short value stays short"},
		{"a keyboard and a monkey", "a keyboard and a monkey"},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var nilR *Redactor
	if nilR.String("Bearer abcdefgh12345678") != "Bearer abcdefgh12345678" {
		t.Error("a nil Redactor must pass text through")
	}
}

func TestAnyAndHandler(t *testing.T) {
	r := New("s3cr3t-key-value-123")
	got := r.Any(map[string]any{"a": []any{"x s3cr3t-key-value-123"}, "n": 3.0, "e": errors.New("s3cr3t-key-value-123")})
	m := got.(map[string]any)
	if m["a"].([]any)[0] != "x [redacted]" || m["n"] != 3.0 || m["e"] != "[redacted]" {
		t.Errorf("Any = %v", got)
	}
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, nil))).With("pre", "s3cr3t-key-value-123")
	log.Warn("got s3cr3t-key-value-123", "error", errors.New("Bearer abcdefgh12345678"), slog.Group("g", "k", "s3cr3t-key-value-123"))
	if out := buf.String(); strings.Contains(out, "s3cr3t") || strings.Contains(out, "abcdefgh") || strings.Count(out, Mask) != 4 {
		t.Errorf("log line not redacted: %s", out)
	}
}

func FuzzString(f *testing.F) {
	f.Add("Bearer abcdefgh12345678 and s3cr3t-key-value-123")
	r := New("s3cr3t-key-value-123")
	f.Fuzz(func(t *testing.T, s string) {
		if out := r.String(s); strings.Contains(out, "s3cr3t-key-value-123") {
			t.Fatalf("secret survived: %q", out)
		}
	})
}
