package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

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
	// The basic streaming example of Anthropic's reference, event for event
	// (https://platform.claude.com/docs/en/build-with-claude/streaming).
	doc := fixture(t, "anthropic-messages.sse")
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

// keyPaths are a JSON document's object keys, as dotted paths (an array's
// elements under "[]"), sorted: its shape, whatever its values.
func keyPaths(t *testing.T, doc []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				out = append(out, prefix+k)
				walk(prefix+k+".", e)
			}
		case []any:
			for _, e := range x {
				walk(prefix+"[].", e)
			}
		}
	}
	walk("", v)
	slices.Sort(out)
	return slices.Compact(out)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fidelity", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastData is the data of a stream's last event named name.
func lastData(stream []byte, name string) []byte {
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	in := false
	for sc.Scan() {
		l := sc.Text()
		if n, ok := strings.CutPrefix(l, "event: "); ok {
			in = n == name
		} else if d, ok := strings.CutPrefix(l, "data: "); ok && in {
			out = []byte(d)
		}
	}
	return out
}

// Issue 43: Anthropic's documented error shapes (a 429 body, an
// overloaded_error event mid-stream), replayed over real sockets, are
// classified as the reference says (rate limited; transient, the text
// before it kept), and the simulator's answers for the same faults have
// the same shape, key for key.
func TestFidelityWithTheDocumentedErrors(t *testing.T) {
	body := fixture(t, "anthropic-error-429.json")
	events := fixture(t, "anthropic-error-event.sse")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(events)
	}))
	defer ts.Close()
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(body)
	}))
	defer limited.Close()
	r := stream(t, New(Config{BaseURL: limited.URL, APIKey: "k"}), req)
	if ce := diagnostics.Classify(r.err); ce.Class != diagnostics.ClassRateLimited || ce.Status != 429 || !strings.Contains(r.err.Error(), "rate_limit_error") {
		t.Errorf("the documented 429: %v (class %s)", r.err, ce.Class)
	}
	r = stream(t, New(Config{BaseURL: ts.URL, APIKey: "k"}), req)
	if ce := diagnostics.Classify(r.err); ce.Class != diagnostics.ClassServer || r.out != "Hello" || !strings.Contains(r.err.Error(), "overloaded_error") {
		t.Errorf("the documented overloaded_error event: out %q, %v (class %s)", r.out, r.err, ce.Class)
	}

	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 12})
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{1}, Kind: sim.FaultStatus, Status: 429})
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{2}, Kind: sim.FaultErrorEvent, Status: 529, AfterEvents: 3})
	post := func() []byte {
		resp, err := http.Post(srv.BaseURL()+"/messages", "application/json", strings.NewReader(
			`{"model":"claude-opus-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return b.Bytes()
	}
	if want, have := keyPaths(t, body), keyPaths(t, post()); !slices.Equal(want, have) {
		t.Errorf("the simulator's 429 body has the keys %v; the documented one %v", have, want)
	}
	if want, have := keyPaths(t, lastData(events, "error")), keyPaths(t, lastData(post(), "error")); !slices.Equal(want, have) {
		t.Errorf("the simulator's error event has the keys %v; the documented one %v", have, want)
	}
}

// Issue 43: every error type Anthropic documents
// (testdata/fidelity/anthropic-errors.json, from
// https://platform.claude.com/docs/en/api/errors and the SDK's ErrorObject
// types), answered to a request over a real socket, is classified as the
// reference implies (4xx deterministic, 429 rate limited, 500 and 529 a
// server error, 504 a cut), its type and message kept in the error; the
// simulator's status fault of the same status answers the same type in the
// same shape, with a request-id header equal to the body's request_id.
func TestFidelityWithEveryDocumentedError(t *testing.T) {
	var docs []struct {
		Status int
		Body   json.RawMessage
	}
	if err := json.Unmarshal(fixture(t, "anthropic-errors.json"), &docs); err != nil {
		t.Fatal(err)
	}
	classes := map[string]diagnostics.Class{
		"invalid_request_error": diagnostics.ClassDeterministic,
		"authentication_error":  diagnostics.ClassDeterministic,
		"billing_error":         diagnostics.ClassDeterministic,
		"permission_error":      diagnostics.ClassDeterministic,
		"not_found_error":       diagnostics.ClassDeterministic,
		"request_too_large":     diagnostics.ClassDeterministic,
		"rate_limit_error":      diagnostics.ClassRateLimited,
		"api_error":             diagnostics.ClassServer,
		"timeout_error":         diagnostics.ClassDisconnect,
		"overloaded_error":      diagnostics.ClassServer,
	}
	if len(docs) != len(classes) {
		t.Fatalf("%d documented errors in the fixture, %d types expected", len(docs), len(classes))
	}
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 12})
	for i, d := range docs {
		var doc struct {
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(d.Body, &doc); err != nil {
			t.Fatal(err)
		}
		want, ok := classes[doc.Error.Type]
		if !ok {
			t.Fatalf("fixture entry %d: type %q has no expected class", i, doc.Error.Type)
		}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(d.Status)
			_, _ = w.Write(d.Body)
		}))
		r := stream(t, New(Config{BaseURL: ts.URL, APIKey: "k"}), req)
		ts.Close()
		ce := diagnostics.Classify(r.err)
		if ce.Class != want || ce.Status != d.Status || !strings.Contains(r.err.Error(), doc.Error.Type) || !strings.Contains(r.err.Error(), doc.Error.Message) {
			t.Errorf("documented %d %s: %v (class %s, status %d), want class %s naming the type and message", d.Status, doc.Error.Type, r.err, ce.Class, ce.Status, want)
		}

		srv.AddFault(sim.Fault{Endpoint: sim.EndpointMessages, Requests: []int{i + 1}, Kind: sim.FaultStatus, Status: d.Status})
		resp, err := http.Post(srv.BaseURL()+"/messages", "application/json", strings.NewReader(
			`{"model":"claude-opus-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got struct {
			Error     struct{ Type string }
			RequestID string `json:"request_id"`
		}
		if resp.StatusCode != d.Status || json.Unmarshal(body, &got) != nil || got.Error.Type != doc.Error.Type {
			t.Errorf("the simulator's %d: %d %s, want type %s", d.Status, resp.StatusCode, body, doc.Error.Type)
		}
		if want, have := keyPaths(t, d.Body), keyPaths(t, body); !slices.Equal(want, have) {
			t.Errorf("the simulator's %d body has the keys %v; the documented one %v", d.Status, have, want)
		}
		if h := resp.Header.Get("request-id"); h == "" || h != got.RequestID {
			t.Errorf("the simulator's %d: request-id header %q, body request_id %q", d.Status, h, got.RequestID)
		}
	}
}
