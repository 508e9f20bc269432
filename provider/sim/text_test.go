package sim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextIsPureAndPrefixStable(t *testing.T) {
	a := Text("m", "hello", 7, 500)
	b := Text("m", "hello", 7, 500)
	if !slices.Equal(a, b) {
		t.Fatal("Text is not deterministic")
	}
	if len(a) != 500 {
		t.Fatalf("len = %d, want 500", len(a))
	}
	for _, k := range []int{0, 1, 2, 17, 499} {
		if got := Text("m", "hello", 7, k); !slices.Equal(got, a[:k]) {
			t.Fatalf("Text(%d) is not a prefix of Text(500)", k)
		}
	}
	for _, other := range [][]string{Text("n", "hello", 7, 500), Text("m", "hello!", 7, 500), Text("m", "hello", 8, 500)} {
		if slices.Equal(a, other) {
			t.Fatal("model, input and seed must all change the text")
		}
	}
	joined := strings.Join(a, "")
	if !utf8.ValidString(joined) {
		t.Fatal("text is not valid UTF-8")
	}
	for _, tok := range a {
		if tok == "" {
			t.Fatal("empty token")
		}
	}
	if !strings.Contains(joined, "\n") || len(joined) == utf8.RuneCountInString(joined) {
		t.Fatalf("text should contain newlines and multi-byte runes: %q", joined)
	}
	if strings.HasPrefix(joined, " ") {
		t.Fatal("text starts with a space")
	}
}

func TestInputs(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"first"},
		{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"text","text":"b"}]}]}`
	if got, err := ChatInput([]byte(chat)); err != nil || got != "a\nb" {
		t.Fatalf("ChatInput = %q, %v", got, err)
	}
	cases := map[string]string{
		`{"input":"just this","instructions":"ignored"}`: "just this",
		`{"input":[{"role":"developer","content":"dev"},{"type":"message","role":"user","content":[{"type":"input_text","text":"ctx"}]},
		  {"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello"}]},{"type":"function_call_output","call_id":"c","output":"x"}]}`: "Say hello",
		`{"input":[{"role":"user","content":"plain"}]}`: "plain",
		`{}`: "",
	}
	for body, wantIn := range cases {
		if got, err := ResponsesInput([]byte(body)); err != nil || got != wantIn {
			t.Errorf("ResponsesInput(%s) = %q, %v; want %q", body, got, err, wantIn)
		}
	}
	if _, err := ResponsesInput([]byte(`{"input":42}`)); err == nil {
		t.Error("numeric input accepted")
	}
}

func FuzzResponsesInput(f *testing.F) {
	f.Add([]byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}]}`))
	f.Add([]byte(`{"input":"x","metadata":{"sim_tokens":"5"}}`))
	f.Add([]byte(`{"input":[{"role":"user","content":{"a":1}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := ResponsesInput(body)
		if err != nil {
			return
		}
		var req responsesRequest
		if json.Unmarshal(body, &req) != nil {
			t.Fatal("ResponsesInput accepted what json rejects")
		}
		s := New(Config{})
		if _, err := s.params(req.MaxOutputTokens, req.Metadata); err == nil {
			if !slices.Equal(Text(req.Model, in, 1, 8), Text(req.Model, in, 1, 8)) {
				t.Fatal("Text not deterministic")
			}
		}
	})
}

func FuzzChatInput(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"metadata":{"sim_silence":"1s"}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := ChatInput(body); err != nil {
			return
		}
		var req chatRequest
		_ = json.Unmarshal(body, &req)
		s := New(Config{})
		if p, err := s.params(req.maxTokens(), req.Metadata); err == nil && (p.tokens < 0 || p.tokens > maxTokensLimit) {
			t.Fatalf("tokens out of range: %d", p.tokens)
		}
	})
}
