package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

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
