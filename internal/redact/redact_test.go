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

// A key cut anywhere (by our truncations, or before the text reached us)
// leaves none of its pieces: no 12 characters of it together anywhere,
// and no 8 of its start at a cut (the text's end, or before an ellipsis)
// nor of its end at the text's start; also glued to word characters.
func TestCutKeysLeaveNoPiece(t *testing.T) {
	const key = "sk-proj-Q7x9Lm2Vb8Nc4Rt6Yu1Io3Pa5Sd"
	r := New(key)
	leaks := func(s string) string {
		for i := 0; i+12 <= len(key); i++ {
			if strings.Contains(s, key[i:i+12]) {
				return key[i : i+12]
			}
		}
		return ""
	}
	text := strings.Repeat("filler ", 20) + "token=" + key + " and more text after it"
	for c := 0; c <= len(text); c++ {
		for _, s := range []string{text[:c], text[c:], text[:c] + " … [truncated: the body was 9000 bytes]", "glued" + text[:c] + "word"} {
			got := r.String(s)
			if p := leaks(got); p != "" {
				t.Fatalf("cut at %d: %q leaks %q", c, got, p)
			}
		}
		head := text[:c]
		if k := strings.Index(head, "token="); k >= 0 && len(head)-k-6 >= 8 && len(head)-k-6 < len(key) {
			for _, s := range []string{head, head + "…", head + " … [truncated]"} {
				if got := r.String(s); strings.Contains(got, key[:8]) {
					t.Fatalf("cut at %d: %q keeps the key's start", c, got)
				}
			}
		}
	}
	// what is not a key stays
	if got := r.String("nothing secret here, sk-pr is short"); got != "nothing secret here, sk-pr is short" {
		t.Errorf("masked what is not a key: %q", got)
	}
}
