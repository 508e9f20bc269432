package anthropic

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// transcript is testdata/fidelity/anthropic-messages.sse: the basic
// streaming example of Anthropic's reference, event for event
// (https://platform.claude.com/docs/en/build-with-claude/streaming,
// "Basic streaming request").
func transcript(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fidelity", "anthropic-messages.sse"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// skeleton is a stream's event names with runs of one name folded into one:
// its shape, whatever the answer's length.
func skeleton(stream []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok && (len(out) == 0 || out[len(out)-1] != name) {
			out = append(out, name)
		}
	}
	return out
}

// Issue 43: the documented stream, replayed over a real socket, is read by
// the adapter as the answer it carries (text, stop, usage); and the
// simulator's stream for the same request has the documented shape, so
// what the chaos matrix tests is what users meet.
func TestFidelityWithTheDocumentedStream(t *testing.T) {
	doc := transcript(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(doc)
	}))
	defer ts.Close()
	r := stream(t, New(Config{BaseURL: ts.URL, APIKey: "k"}), req)
	if r.err != nil || r.out != "Hello!" || r.usage == nil || r.usage.OutputTokens != 15 || r.usage.InputTokens != 25 {
		t.Fatalf("the documented stream: out %q, usage %+v, err %v", r.out, r.usage, r.err)
	}

	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 12})
	resp, err := http.Post(srv.BaseURL()+"/messages", "application/json", strings.NewReader(
		`{"model":"claude-opus-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	_, _ = got.ReadFrom(resp.Body)
	if want, have := skeleton(doc), skeleton(got.Bytes()); !slices.Equal(want, have) {
		t.Errorf("the simulator's stream has the shape %v; the documented one %v", have, want)
	}
}
