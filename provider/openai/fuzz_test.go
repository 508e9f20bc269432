package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// bodyTransport answers every request with one event-stream body: the
// fuzzer's bytes, as a server would send them.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
}

// FuzzChatStream feeds arbitrary bytes to the chat adapter as a stream
// body: it never panics, never succeeds without both terminal signs
// (finish_reason and [DONE]), and any error it returns is classified.
func FuzzChatStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"))
	f.Add([]byte(": keepalive\n\ndata: [DONE]\n"))
	f.Add([]byte("data: {\"choices\": [nonsense\n\n"))
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := New(Config{BaseURL: "http://127.0.0.1:1/v1", HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		var done bool
		err := p.Stream(context.Background(), provider.Request{Model: "m", Prompt: "p"}, func(ev provider.Event) error {
			if done {
				t.Fatalf("event %s after done", ev.Kind)
			}
			done = ev.Kind == provider.KindDone
			return nil
		})
		if err == nil && (!done || !strings.Contains(string(body), "[DONE]") || !strings.Contains(string(body), "finish_reason")) {
			t.Fatalf("success without terminal evidence on %q", body)
		}
		if err != nil && diagnostics.Classify(err).Class == diagnostics.ClassNone {
			t.Fatalf("unclassified error %v", err)
		}
	})
}

// FuzzLeanChunk holds the lean chunk decoder (chunk.go) to encoding/json
// into go-openai's chunk type on any input: where encoding/json succeeds,
// decodeChunk succeeds with the same values of every field it reads; where
// encoding/json fails, decodeChunk fails too, unless encoding/json's only
// complaint is a type error in a field noderun does not read; and a chunk
// decodeChunk accepts carries the values encoding/json decoded around such
// an error. Decoding into a reused chunk gives the same as into a new one.
func FuzzLeanChunk(f *testing.F) {
	for _, s := range leanSeeds {
		f.Add([]byte(s))
	}
	var reused chunk
	f.Fuzz(func(t *testing.T, data []byte) {
		var fresh chunk
		err := decodeChunk(data, &fresh)
		var want goopenai.ChatCompletionStreamResponse
		jerr := json.Unmarshal(data, &want)
		var te *json.UnmarshalTypeError
		switch {
		case jerr == nil && err != nil:
			t.Fatalf("lean: %v; encoding/json decodes %q", err, data)
		case jerr != nil && err == nil && !errors.As(jerr, &te) && fresh.errRaw == nil:
			t.Fatalf("lean accepts %q; encoding/json: %v", data, jerr)
		case jerr != nil && err == nil && errors.As(jerr, &te) && fresh.errRaw == nil && readField(te.Field):
			t.Fatalf("lean accepts %q; encoding/json: type error in %q, which noderun reads", data, te.Field)
		case jerr != nil && err != nil && err.Error() != jerr.Error():
			t.Fatalf("lean error %q, encoding/json's %q", err, jerr)
		}
		if err == nil && (jerr == nil || fresh.errRaw == nil) {
			if got, exp := fresh.String(), fromGoOpenAI(want).String(); got != exp {
				t.Fatalf("%q:\n lean         %s\n encoding/json %s", data, got, exp)
			}
		}
		err2 := decodeChunk(data, &reused)
		if (err2 == nil) != (err == nil) || err == nil && reused.String() != fresh.String() {
			t.Fatalf("%q: into a reused chunk %s (%v), into a new one %s (%v)", data, reused.String(), err2, fresh.String(), err)
		}
	})
}

// readField: the dotted paths (encoding/json's UnmarshalTypeError.Field)
// of what decodeChunk reads, or of an object or array on the way to it.
func readField(path string) bool {
	switch strings.ToLower(path) {
	case "", "choices", "choices.index", "choices.delta", "choices.delta.content", "choices.delta.reasoning_content",
		"choices.delta.tool_calls", "choices.delta.tool_calls.index", "choices.delta.tool_calls.id",
		"choices.delta.tool_calls.type", "choices.delta.tool_calls.function", "choices.delta.tool_calls.function.name",
		"choices.delta.tool_calls.function.arguments", "choices.finish_reason", "usage", "usage.prompt_tokens",
		"usage.completion_tokens", "usage.completion_tokens_details", "usage.completion_tokens_details.reasoning_tokens":
		return true
	}
	return false
}
