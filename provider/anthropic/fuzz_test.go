package anthropic

import (
	"bytes"
	"context"
	"io"
	"net/http"
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

const okStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5,\"cache_read_input_tokens\":7}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// FuzzMessagesStream feeds arbitrary bytes to the adapter as a Messages
// stream body: it never panics, never succeeds without message_stop after
// a stop_reason, emits nothing after done, never puts thinking in the
// output, and any error it returns is classified.
func FuzzMessagesStream(f *testing.F) {
	f.Add([]byte(okStream))
	f.Add([]byte(okStream[:len(okStream)/2]))
	f.Add([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add([]byte("data: {\"type\": [nonsense\n\n"))
	f.Add([]byte(": keepalive\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := New(Config{BaseURL: "http://127.0.0.1:1", HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		var done bool
		err := p.Stream(context.Background(), provider.Request{Model: "m", Prompt: "p"}, func(ev provider.Event) error {
			if done {
				t.Fatalf("event %s after done", ev.Kind)
			}
			done = ev.Kind == provider.KindDone
			if ev.Kind == provider.KindDone && ev.Usage == nil {
				t.Fatal("done without usage")
			}
			return nil
		})
		if err == nil && !done {
			t.Fatal("success without terminal evidence")
		}
		if err != nil {
			if done {
				t.Fatalf("error after done: %v", err)
			}
			if c := diagnostics.Classify(err).Class; c == diagnostics.ClassNone || c == diagnostics.ClassCanceled {
				t.Fatalf("error %v classified %q", err, c)
			}
		}
	})
}
