package guard

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// docs/diagnostics.md states the limits this package enforces.
func TestDocsStateTheLimits(t *testing.T) {
	b, err := os.ReadFile("../../docs/diagnostics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{"## Limits", "| one stream line or event | 32 MiB |", "| error answer body kept | 8 KiB |"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/diagnostics.md lacks %q", want)
		}
	}
	if MaxEventBytes != 32<<20 || MaxErrorBody != 8<<10 {
		t.Errorf("the limits changed (%d, %d): update docs/diagnostics.md and this test", MaxEventBytes, MaxErrorBody)
	}
}

func TestBoundErrorBody(t *testing.T) {
	for _, c := range []struct {
		size      int
		truncated bool
		note      string
	}{
		{100, false, ""},
		{MaxErrorBody, false, ""},
		{MaxErrorBody + 1, true, "the body was 8193 bytes"},
		{3 << 20, true, "the body was more than"},
	} {
		body := strings.Repeat("é", c.size/2) + strings.Repeat("x", c.size%2)
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(body))}
		BoundErrorBody(resp)
		got, _ := io.ReadAll(resp.Body)
		if c.truncated != strings.Contains(string(got), "[truncated") || !strings.Contains(string(got), c.note) || len(got) > MaxErrorBody+100 {
			t.Errorf("%d bytes: kept %d bytes ending %q", c.size, len(got), got[max(0, len(got)-60):])
		}
		if !bytes.ContainsRune(got, 'é') && c.size > 2 {
			t.Errorf("%d bytes: lost the text", c.size)
		}
	}
}

func TestExcerptKeepsCharactersWhole(t *testing.T) {
	if got := Excerpt([]byte("aé"), 2); got != `"a"…` {
		t.Errorf("Excerpt cut inside a character: %s", got)
	}
	if got := Excerpt([]byte("<html>"), 10); got != `"<html>"` {
		t.Errorf("Excerpt = %s", got)
	}
}
