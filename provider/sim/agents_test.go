package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// The Anthropic Messages and Gemini endpoints, read with a raw HTTP client
// and the spec-following SSE reader. (The real Claude Code and Gemini CLI
// run against them in runner's and harness's tests.)

// claudeBody is a Messages request shaped like Claude Code's: a system
// entry inside messages, user content in several text blocks, the first a
// <system-reminder>.
func claudeBody(prompt string, stream bool, maxTokens int) map[string]any {
	return map[string]any{
		"model": "sim", "max_tokens": maxTokens, "stream": stream,
		"system":   []any{map[string]any{"type": "text", "text": "You are Claude Code."}},
		"metadata": map[string]any{"user_id": `{"session_id":"x"}`},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "<system-reminder>\nToday is a day.\n</system-reminder>"},
				map[string]any{"type": "text", "text": prompt},
			}},
			map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "# Environment"}}},
		},
	}
}

func geminiBody(prompt string) map[string]any {
	return map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{
			map[string]any{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"},
			map[string]any{"text": prompt},
		}}},
		"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are Gemini CLI."}}},
		"generationConfig":  map[string]any{"temperature": 1},
	}
}

func postStream(t *testing.T, url string, body any) (*http.Response, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, bytes.NewReader(b))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// readMessages reads a Messages stream: the text, the event names in order,
// the stop reason and the error that ended it.
func readMessages(t *testing.T, resp *http.Response) (text string, names []string, stop string, err error) {
	t.Helper()
	var b strings.Builder
	_, err = readSSE(resp.Body, func(e sseEvent) bool {
		names = append(names, e.Name)
		var v struct {
			Type  string `json:"type"`
			Delta struct {
				Type       string `json:"type"`
				Text       string `json:"text"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
		}
		if jerr := json.Unmarshal([]byte(e.Data), &v); jerr != nil || v.Type != e.Name {
			t.Errorf("event %s: data %s", e.Name, e.Data)
		}
		switch e.Name {
		case "content_block_delta":
			b.WriteString(v.Delta.Text)
		case "message_delta":
			stop = v.Delta.StopReason
		}
		return true
	})
	return b.String(), names, stop, err
}

func TestMessagesStream(t *testing.T) {
	s := start(t, Config{Seed: 3})
	resp, err := postStream(t, "http://"+s.Addr()+"/v1/messages?beta=true", claudeBody("Write it.", true, 32000))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text, names, stop, err := readMessages(t, resp)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v", err)
	}
	if w := want("sim", "Write it.", 3, DefaultTokens); text != w {
		t.Errorf("text\n got %q\nwant %q", text, w)
	}
	// A ping after the first content_block_start, where the Messages API's
	// documented stream has it.
	head := []string{"message_start", "content_block_start", "ping", "content_block_delta"}
	tail := []string{"content_block_stop", "message_delta", "message_stop"}
	if len(names) != len(head)+DefaultTokens-1+len(tail) || !equal(names[:4], head) || !equal(names[len(names)-3:], tail) || stop != "end_turn" {
		t.Errorf("events %v, stop %q", names, stop)
	}
	if st := s.Stats(); st.Requests[EndpointMessages] != 1 || st.TokensGenerated != DefaultTokens {
		t.Errorf("stats %+v", st)
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

func TestMessagesMaxTokensAndNonStreaming(t *testing.T) {
	s := start(t, Config{})
	resp, err := postStream(t, "http://"+s.Addr()+"/v1/messages", claudeBody("Short.", true, 5))
	if err != nil {
		t.Fatal(err)
	}
	text, _, stop, _ := readMessages(t, resp)
	if text != want("sim", "Short.", 0, 5) || stop != "max_tokens" {
		t.Errorf("cut text %q, stop %q", text, stop)
	}
	code, _, body := post(t, "http://"+s.Addr()+"/v1/messages", claudeBody("Whole.", false, 1000))
	var msg struct {
		Type    string `json:"type"`
		Content []struct{ Type, Text string }
		Stop    string `json:"stop_reason"`
		Usage   struct {
			In  int `json:"input_tokens"`
			Out int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(body, &msg); err != nil || code != 200 || msg.Type != "message" || len(msg.Content) != 1 ||
		msg.Content[0].Text != want("sim", "Whole.", 0, DefaultTokens) || msg.Stop != "end_turn" || msg.Usage.Out != DefaultTokens {
		t.Errorf("non-streaming: %d %s (%v)", code, body, err)
	}
}

func TestMessagesFaults(t *testing.T) {
	s := start(t, Config{})
	s.AddFault(Fault{Endpoint: EndpointMessages, Requests: []int{1}, Kind: FaultClose, AfterEvents: 4})
	s.AddFault(Fault{Endpoint: EndpointMessages, Requests: []int{2}, Kind: FaultReset, AfterEvents: 4})
	s.AddFault(Fault{Endpoint: EndpointMessages, Requests: []int{3}, Kind: FaultStatus, Status: 529})
	s.AddFault(Fault{Endpoint: EndpointMessages, Requests: []int{4}, Kind: FaultStatus, Status: 401})
	url := "http://" + s.Addr() + "/v1/messages"

	resp, err := postStream(t, url, claudeBody("x", true, 100))
	if err != nil {
		t.Fatal(err)
	}
	text, names, _, err := readMessages(t, resp)
	// AfterEvents counts what carries the answer: the ping is not one of them.
	if !errors.Is(err, io.EOF) || len(names) != 5 || names[4] != "content_block_delta" || text != want("sim", "x", 0, 2) {
		t.Errorf("close: %v %v %q", err, names, text)
	}
	resp, err = postStream(t, url, claudeBody("x", true, 100))
	if err != nil {
		t.Fatal(err)
	}
	if _, names, _, err = readMessages(t, resp); !errors.Is(err, syscall.ECONNRESET) || len(names) != 5 {
		t.Errorf("reset: %v after %v", err, names)
	}
	for _, tc := range []struct {
		status int
		typ    string
	}{{529, "overloaded_error"}, {401, "authentication_error"}} {
		code, _, body := post(t, url, claudeBody("x", true, 100))
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if json.Unmarshal(body, &e) != nil || code != tc.status || e.Type != "error" || e.Error.Type != tc.typ {
			t.Errorf("status %d: %d %s", tc.status, code, body)
		}
	}
	if st := s.Stats(); st.Requests[EndpointMessages] != 4 || st.Faults["status"] != 2 || st.Faults["close"] != 1 || st.Faults["reset"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

// readGemini reads a streamGenerateContent stream: the text, the number of
// chunks, the last finishReason and the error that ended it.
func readGemini(t *testing.T, resp *http.Response) (text string, chunks int, finish string, err error) {
	t.Helper()
	var b strings.Builder
	_, err = readSSE(resp.Body, func(e sseEvent) bool {
		chunks++
		var v struct {
			Candidates []struct {
				Content struct {
					Role  string
					Parts []struct{ Text string }
				}
				FinishReason string
			}
		}
		if jerr := json.Unmarshal([]byte(e.Data), &v); jerr != nil || len(v.Candidates) != 1 || v.Candidates[0].Content.Role != "model" {
			t.Errorf("chunk %s", e.Data)
			return true
		}
		for _, p := range v.Candidates[0].Content.Parts {
			b.WriteString(p.Text)
		}
		finish = v.Candidates[0].FinishReason
		return true
	})
	return b.String(), chunks, finish, err
}

func TestGeminiStreamAndGenerate(t *testing.T) {
	s := start(t, Config{Seed: 5})
	base := "http://" + s.Addr() + "/v1beta/models/"
	resp, err := postStream(t, base+"sim:streamGenerateContent?alt=sse", geminiBody("Write it."))
	if err != nil {
		t.Fatal(err)
	}
	text, chunks, finish, err := readGemini(t, resp)
	if !errors.Is(err, io.EOF) || text != want("sim", "Write it.", 5, DefaultTokens) || chunks != DefaultTokens || finish != "STOP" {
		t.Errorf("stream: %v, %d chunks, finish %q, text %q", err, chunks, finish, text)
	}
	code, _, body := post(t, base+"other:generateContent", geminiBody("Write it."))
	var v struct {
		Candidates []struct {
			Content      struct{ Parts []struct{ Text string } }
			FinishReason string
		}
		UsageMetadata struct{ CandidatesTokenCount int }
	}
	if json.Unmarshal(body, &v) != nil || code != 200 || len(v.Candidates) != 1 ||
		v.Candidates[0].Content.Parts[0].Text != want("other", "Write it.", 5, DefaultTokens) || v.UsageMetadata.CandidatesTokenCount != DefaultTokens {
		t.Errorf("generate: %d %s", code, body)
	}
	if code, _, body := post(t, base+"sim:countTokens", geminiBody("x")); code != 404 || !strings.Contains(string(body), "NOT_FOUND") {
		t.Errorf("unknown method: %d %s", code, body)
	}
	if st := s.Stats(); st.Requests[EndpointGeminiStream] != 1 || st.Requests[EndpointGeminiGenerate] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestGeminiFaults(t *testing.T) {
	s := start(t, Config{})
	s.AddFault(Fault{Endpoint: EndpointGeminiStream, Requests: []int{1}, Kind: FaultClose, AfterEvents: 3})
	s.AddFault(Fault{Endpoint: EndpointGeminiStream, Requests: []int{2}, Kind: FaultStatus, Status: 401})
	url := "http://" + s.Addr() + "/v1beta/models/sim:streamGenerateContent?alt=sse"
	resp, err := postStream(t, url, geminiBody("x"))
	if err != nil {
		t.Fatal(err)
	}
	if text, chunks, finish, err := readGemini(t, resp); !errors.Is(err, io.EOF) || chunks != 3 || finish != "" || text != want("sim", "x", 0, 3) {
		t.Errorf("close: %v, %d chunks, finish %q", err, chunks, finish)
	}
	code, _, body := post(t, url, geminiBody("x"))
	var e struct {
		Error struct {
			Code   int
			Status string
		}
	}
	if json.Unmarshal(body, &e) != nil || code != 401 || e.Error.Code != 401 || e.Error.Status != "UNAUTHENTICATED" {
		t.Errorf("401: %d %s", code, body)
	}
}

func TestAgentInputs(t *testing.T) {
	b, _ := json.Marshal(claudeBody("Write it.", true, 1))
	if got, err := MessagesInput(b); err != nil || got != "Write it." {
		t.Errorf("MessagesInput %q %v", got, err)
	}
	// Claude Code merges a resumed turn into the cut one's user message.
	merged := `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"A\n"},{"type":"text","text":"B"}]}]}`
	if got, _ := MessagesInput([]byte(merged)); got != "A\n\nB" {
		t.Errorf("merged %q", got)
	}
	if got, _ := MessagesInput([]byte(`{"messages":[{"role":"user","content":"plain"},{"role":"assistant","content":"a"}]}`)); got != "plain" {
		t.Errorf("string content %q", got)
	}
	b, _ = json.Marshal(geminiBody("Write it."))
	if got, err := GeminiInput(b); err != nil || got != "Write it." {
		t.Errorf("GeminiInput %q %v", got, err)
	}
	if _, err := GeminiInput([]byte(`{"contents":7}`)); err == nil {
		t.Error("bad contents accepted")
	}
}

func FuzzMessagesInput(f *testing.F) {
	b, _ := json.Marshal(claudeBody("x", true, 3))
	f.Add(b)
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := MessagesInput(body)
		if err == nil && !utf8.ValidString(in) {
			t.Fatalf("input is not UTF-8: %q", in)
		}
	})
}

func FuzzGeminiInput(f *testing.F) {
	b, _ := json.Marshal(geminiBody("x"))
	f.Add(b)
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := GeminiInput(body)
		if err == nil && !utf8.ValidString(in) {
			t.Fatalf("input is not UTF-8: %q", in)
		}
	})
}
