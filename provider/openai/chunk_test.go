package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// String is a chunk's values, for comparisons.
func (c *chunk) String() string {
	var b strings.Builder
	for _, ch := range c.choices {
		fmt.Fprintf(&b, "[%d %q %q %q", ch.index, ch.content, ch.reasoning, ch.finish)
		for _, tc := range ch.toolCalls {
			fmt.Fprintf(&b, " {%v %d %q %q %q %q}", tc.hasIndex, tc.index, tc.id, tc.typ, tc.name, tc.arg)
		}
		b.WriteString("]")
	}
	if c.hasUsage {
		fmt.Fprintf(&b, " usage %+v", c.usage)
	}
	return b.String()
}

// fromGoOpenAI is what a chunk holds of go-openai's decoding.
func fromGoOpenAI(resp goopenai.ChatCompletionStreamResponse) *chunk {
	var c chunk
	raw, _ := json.Marshal(resp)
	if err := decodeSlow(raw, &c); err != nil {
		panic(err)
	}
	return &c
}

var leanSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"hello \"world\"\n\u00e9\ud83d\ude00"},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":50,"total_tokens":62,"completion_tokens_details":{"reasoning_tokens":7}}}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`,
	`{"choices":[{"index":1,"delta":{"content":"other"}}]}`,
	`{"error":{"message":"overloaded","type":"server_error","code":null}}`,
	`{"Choices":[{"INDEX":0,"Delta":{"Content":"x"}}]}`,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
	`{"ch\u006fices":[{"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":1.0}]}`,
	`{"choices":[{"index":"0"}]}`,
	`{"created":"yesterday","choices":[{"delta":{"content":"a"}}]}`,
	`{"usage":null,"choices":null}`,
	`{"choices":[null,{"delta":null}]}`,
	"{\"choices\":[{\"delta\":{\"content\":\"\\ud800x\xff\"}}]}",
	`{"choices": [nonsense`,
	`null`,
	`[]`,
	`"x"`,
	``,
	`{"choices":[{"index":-0,"delta":{"content":null}}]} `,
	`{"choices":[{"index":99999999999999999999}]}`,
	`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
}

// The fast walk decodes the usual chunks itself (no fall back to
// encoding/json), with the values encoding/json gives.
func TestLeanChunk(t *testing.T) {
	cases := []struct {
		in   string
		want string
		fast bool // decoded without encoding/json
	}{
		{leanSeeds[0], `[0 "hello \"world\"\né😀" "" ""]`, true},
		{leanSeeds[2], `[0 "" "think" ""]`, true},
		{leanSeeds[3], `[0 "" "" "stop"]`, true},
		{leanSeeds[4], ` usage {prompt:12 completion:50 hasDetails:true reasoning:7}`, true},
		{leanSeeds[5], `[0 "" "" "" {true 0 "call_1" "function" "f" "{\"a\":"}]`, true},
		{leanSeeds[8], `[0 "x" "" ""]`, false},            // keys in another case: encoding/json matches them
		{leanSeeds[9], `[0 "a" "" "stop"]`, false},        // a repeated member: encoding/json merges
		{leanSeeds[10], `[0 "a" "" ""]`, false},           // an escaped key
		{leanSeeds[13], `[0 "a" "" ""]`, true},            // a type error where noderun does not read
		{leanSeeds[15], `[0 "" "" ""][0 "" "" ""]`, true}, // null elements
		{leanSeeds[16], `[0 "�x�" "" ""]`, true},          // a lone surrogate, invalid UTF-8
		{leanSeeds[22], `[0 "" "" ""]`, true},             // -0, null content, trailing space
	}
	for _, c := range cases {
		var got chunk
		if err := decodeChunk([]byte(c.in), &got); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got.String() != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.in, got.String(), c.want)
		}
		var fast chunk
		d := leanDecoder{b: []byte(c.in)}
		if fastErr := d.top(&fast); (fastErr == nil) != c.fast {
			t.Errorf("%s: fast walk %v, want fast %v", c.in, fastErr, c.fast)
		}
	}
	for _, in := range []string{leanSeeds[11], leanSeeds[12], leanSeeds[17], leanSeeds[19], leanSeeds[20], leanSeeds[21], leanSeeds[23]} {
		var got chunk
		if err := decodeChunk([]byte(in), &got); err == nil {
			t.Errorf("%s: decoded (%s), want encoding/json's error", in, got.String())
		}
	}
	var e chunk
	if err := decodeChunk([]byte(leanSeeds[7]), &e); err != nil || string(e.errRaw) != `{"message":"overloaded","type":"server_error","code":null}` {
		t.Errorf("error object: %q, %v", e.errRaw, err)
	}
}

// The usual chunks are decoded without an allocation beyond their strings.
func TestLeanChunkAllocations(t *testing.T) {
	in := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"hello"},"logprobs":null,"finish_reason":null}]}`)
	var c chunk
	allocs := testing.AllocsPerRun(100, func() {
		if err := decodeChunk(in, &c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the content string
		t.Errorf("%.1f allocations per chunk, want at most 1", allocs)
	}
}

func BenchmarkChunkDecode(b *testing.B) {
	in := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764547200,"model":"sim","system_fingerprint":"fp_sim","choices":[{"index":0,"delta":{"content":" sockets"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("lean", func(b *testing.B) {
		var c chunk
		b.ReportAllocs()
		for b.Loop() {
			_ = decodeChunk(in, &c)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var resp goopenai.ChatCompletionStreamResponse
			_ = json.Unmarshal(in, &resp)
		}
	})
}

// How the chat adapter ends on a body, read by the SSE reader and the lean
// decoder: success only on terminal evidence, the error objects and
// undecodable chunks classified as go-openai's Recv had them classified.
func TestChatBodies(t *testing.T) {
	const (
		hi     = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
		finish = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		done   = "data: [DONE]\n\n"
	)
	cases := []struct {
		name, body string
		out        string
		class      diagnostics.Class // ClassNone: success
		says       string
	}{
		{"complete", hi + finish + done, "hi", diagnostics.ClassNone, ""},
		{"CRLF and keepalives", ": ping\r\n\r\n" + strings.ReplaceAll(hi+finish+done, "\n", "\r\n"), "hi", diagnostics.ClassNone, ""},
		{"[DONE] without its blank line", hi + finish + "data: [DONE]\n", "hi", diagnostics.ClassNone, ""},
		{"nothing after [DONE] is read", hi + finish + done + "data: {nonsense\n\n", "hi", diagnostics.ClassNone, ""},
		{"no [DONE]", hi + finish, "hi", diagnostics.ClassDisconnect, "body ended"},
		{"no finish_reason", hi + done, "hi", diagnostics.ClassDisconnect, "[DONE] true"},
		{"cut inside an event", hi + "data: {\"choi", "hi", diagnostics.ClassDisconnect, "inside an event"},
		{"[DONE] not as a line of its own", hi + finish + "data:  [DONE]\n\n", "hi", diagnostics.ClassDisconnect, "[DONE] false"},
		{"error object", hi + "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n", "hi", diagnostics.ClassDisconnect, "overloaded"},
		{"error object after other members", "data: {\"id\":\"x\",\"error\":{\"message\":\"overloaded\"}}\n\n", "", diagnostics.ClassDisconnect, "overloaded"},
		{"context length error object", "data: {\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\"}}\n\n", "", diagnostics.ClassDeterministic, "maximum context length"},
		{"an error that is no object", "data: {\"error\":\"down\"}\n\n", "", diagnostics.ClassProtocol, "error object"},
		{"undecodable", hi + "data: {\"choices\": [nonsense\n\n", "hi", diagnostics.ClassProtocol, "invalid character"},
		{"two chunks in one event", "data: {\"choices\":[]}\ndata: {\"choices\":[]}\n\n", "", diagnostics.ClassProtocol, "invalid character"},
		{"a type error where noderun reads", "data: {\"choices\":[{\"index\":\"0\"}]}\n\n", "", diagnostics.ClassProtocol, "cannot unmarshal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{BaseURL: "http://127.0.0.1:1/v1", HTTPClient: &http.Client{Transport: bodyTransport(c.body)}})
			var out strings.Builder
			err := p.Stream(context.Background(), provider.Request{Model: "m", Prompt: "p"}, func(ev provider.Event) error {
				if ev.Kind == provider.KindDelta {
					out.WriteString(ev.Text)
				}
				return nil
			})
			if got := diagnostics.Classify(err).Class; got != c.class {
				t.Errorf("class %s (%v), want %s", got, err, c.class)
			}
			if err != nil && !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
			if out.String() != c.out {
				t.Errorf("output %q, want %q", out.String(), c.out)
			}
		})
	}
}
