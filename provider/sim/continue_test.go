package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// contReq is a non-streaming chat request whose last message is the partial
// answer prefix in the given form ("" for none: an ordinary request).
func contReq(form, prefix string) map[string]any {
	msgs := []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": "continue me"}}
	req := map[string]any{"model": "sim", "messages": msgs}
	if form == "" {
		return req
	}
	last := map[string]any{"role": "assistant", "content": prefix}
	switch form {
	case FormPrefix:
		last["prefix"] = true
	case FormContinueFinal:
		req["continue_final_message"], req["add_generation_prompt"] = true, false
	}
	req["messages"] = append(msgs, last)
	return req
}

// answerOf posts req and returns the answer's content, failing on any status
// but 200.
func answerOf(t *testing.T, s *Server, req map[string]any) (string, int) {
	t.Helper()
	status, _, body := post(t, s.BaseURL()+"/chat/completions", req)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage chatUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message.Content, resp.Usage.CompletionTokens
}

// A continued request whose prefix is a prefix of the answer gets exactly
// the rest, in every form, however the prefix ends (on a token boundary,
// inside a token), and generates
// only the tokens it sends.
func TestContinuationStreamsTheRest(t *testing.T) {
	s := start(t, Config{Seed: 5, Tokens: 30})
	full := strings.Join(Text("sim", "continue me", 5, 30), "")
	var cuts []int
	for _, k := range []int{1, 3, 15, 29} {
		cuts = append(cuts, len(strings.Join(Text("sim", "continue me", 5, 30)[:k], "")))
	}
	_, first := utf8.DecodeRuneInString(full)
	cuts = append(cuts, first) // inside the first token, after its first character
	// (A cut inside a character cannot be sent: JSON holds whole characters.
	// The adapter sends the whole-character part: provider.SplitWhole.)
	for _, form := range []string{FormPrefix, FormContinueFinal, FormAssistantLast} {
		for _, cut := range cuts {
			before := s.Stats()
			got, completion := answerOf(t, s, contReq(form, full[:cut]))
			if got != full[cut:] {
				t.Fatalf("%s cut at %d: got %q, want %q", form, cut, got, full[cut:])
			}
			after := s.Stats()
			if gen := after.TokensGenerated - before.TokensGenerated; gen != int64(completion) || after.ContinuedRequests != before.ContinuedRequests+1 {
				t.Fatalf("%s cut at %d: %d tokens generated for %d completion tokens; continued %d -> %d", form, cut, gen, completion, before.ContinuedRequests, after.ContinuedRequests)
			}
		}
	}
	// Any other prefix gets a deterministic continuation of its own.
	a, _ := answerOf(t, s, contReq(FormPrefix, "Nothing like the answer"))
	b, _ := answerOf(t, s, contReq(FormPrefix, "Nothing like the answer"))
	if a == "" || a != b || strings.HasPrefix(full, a) {
		t.Fatalf("foreign prefix: %q then %q", a, b)
	}
}

// The validation errors of the real servers, and what a server that does not
// know a form does.
func TestContinuationValidation(t *testing.T) {
	all := start(t, Config{Seed: 5, Tokens: 10})
	only := start(t, Config{Seed: 5, Tokens: 10, Continuation: []string{FormAssistantLast}})
	none := start(t, Config{Seed: 5, Tokens: 10, Continuation: []string{"none"}})
	full := strings.Join(Text("sim", "continue me", 5, 10), "")
	prefixNotLast := contReq(FormPrefix, "x")
	msgs := prefixNotLast["messages"].([]map[string]any)
	prefixNotLast["messages"] = append(msgs, map[string]any{"role": "user", "content": "continue me"})
	prefixOnUser := contReq("", "")
	prefixOnUser["messages"].([]map[string]any)[1]["prefix"] = true
	bothFlags := contReq(FormContinueFinal, "x")
	delete(bothFlags, "add_generation_prompt") // vLLM's default is true
	finalNotAssistant := contReq("", "")
	finalNotAssistant["continue_final_message"], finalNotAssistant["add_generation_prompt"] = true, false
	cases := []struct {
		name string
		s    *Server
		req  map[string]any
		msg  string
	}{
		{"prefix on a message that is not last", all, prefixNotLast, "only allowed on the last message"},
		{"prefix on a user message", all, prefixOnUser, "only allowed on the last message"},
		{"continue_final_message with add_generation_prompt", all, bothFlags, "Cannot set both"},
		{"continue_final_message after a user message", all, finalNotAssistant, "not an assistant message"},
		{"prefix unknown to the server", only, contReq(FormPrefix, full[:3]), "'prefix' was unexpected"},
		{"continue_final_message unknown to the server", only, contReq(FormContinueFinal, full[:3]), "Unrecognized request argument supplied: continue_final_message"},
	}
	for _, c := range cases {
		status, _, body := post(t, c.s.BaseURL()+"/chat/completions", c.req)
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.msg) {
			t.Errorf("%s: %d %s, want 400 with %q", c.name, status, body, c.msg)
		}
	}
	// A server that does not continue answers a last assistant message from scratch.
	if got, _ := answerOf(t, none, contReq(FormAssistantLast, full[:3])); got != full {
		t.Errorf("assistant_last on a server without it: %q, want the whole answer", got)
	}
	if st := none.Stats(); st.ContinuedRequests != 0 {
		t.Errorf("continued_requests = %d on a server that does not continue", st.ContinuedRequests)
	}
	if got, _ := answerOf(t, only, contReq(FormAssistantLast, full[:3])); got != full[3:] {
		t.Errorf("assistant_last: %q, want %q", got, full[3:])
	}
}

// A server that repeats the prefix sends it before the continuation, and
// generates only the continuation.
func TestContinuationEcho(t *testing.T) {
	s := start(t, Config{Seed: 5, Tokens: 10, ContinuationEcho: true})
	full := strings.Join(Text("sim", "continue me", 5, 10), "")
	got, completion := answerOf(t, s, contReq(FormContinueFinal, full[:7]))
	if got != full || s.Stats().TokensGenerated != int64(completion) {
		t.Fatalf("echo: %q (%d generated, %d completion), want %q", got, s.Stats().TokensGenerated, completion, full)
	}
}

func TestContinuationConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte("continuation: [prefix, assistant_last]\ncontinuation_echo: true\n"))
	if err != nil || len(cfg.Continuation) != 2 || !cfg.ContinuationEcho {
		t.Fatalf("%+v %v", cfg, err)
	}
	for _, bad := range []string{"continuation: [prefill]\n", "continuation: prefix\n"} {
		if _, err := ParseConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
