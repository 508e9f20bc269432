package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider"
)

// Unit tests against a scripted server on 127.0.0.1 (httptest), for the
// translation rules; the recovery scenarios run against provider/sim in
// sim_test.go.

func ciPolicy() profile.Profile { return profile.Builtins()["ci"] }

// recorder collects emitted events; safe for the race detector.
type recorder struct {
	mu  sync.Mutex
	evs []provider.Event
	err error // returned by emit when set
}

func (r *recorder) emit(ev provider.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	return r.err
}

func (r *recorder) events() []provider.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]provider.Event(nil), r.evs...)
}

func (r *recorder) text() string {
	var b strings.Builder
	for _, ev := range r.events() {
		switch ev.Kind {
		case provider.KindReset:
			b.Reset()
		case provider.KindDelta:
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r *recorder) kinds() string {
	var ks []string
	for _, ev := range r.events() {
		k := string(ev.Kind)
		if ev.Kind == provider.KindDiagnostic {
			k += ":" + ev.Diag.Code.Name
		}
		ks = append(ks, fmt.Sprintf("%s@%d", k, ev.Seq))
	}
	return strings.Join(ks, " ")
}

func (r *recorder) last() provider.Event {
	evs := r.events()
	if len(evs) == 0 {
		return provider.Event{}
	}
	return evs[len(evs)-1]
}

// sseWriter writes Responses events.
type sseWriter struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return sseWriter{w}
}

func (s sseWriter) raw(str string) {
	_, _ = io.WriteString(s.w, str)
	s.w.(http.Flusher).Flush()
}

func (s sseWriter) event(seq int, typ string, fields map[string]any) {
	m := map[string]any{"type": typ, "sequence_number": seq}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	s.raw("event: " + typ + "\ndata: " + string(b) + "\n\n")
}

func respObj(id, status string, extra map[string]any) map[string]any {
	m := map[string]any{"id": id, "object": "response", "status": status, "model": "m", "output": []any{}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func message(text string) []any {
	return []any{map[string]any{"type": "message", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text}}}}
}

func newFake(t *testing.T, h http.HandlerFunc) *Provider {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func req() provider.Request {
	return provider.Request{Node: "n", Model: "m", System: "sys", Prompt: "hi", ReasoningEffort: "high", MaxOutputTokens: 99, Policy: ciPolicy()}
}

func TestStreamTranslatesEvents(t *testing.T) {
	var body map[string]any
	var auth string
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
			http.Error(w, "unexpected", 500)
			return
		}
		auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&body)
		s := newSSE(w)
		s.event(0, "response.created", map[string]any{"response": respObj("resp_1", "queued", nil)})
		s.raw(": keepalive\n\n")
		s.event(1, "response.in_progress", map[string]any{"response": respObj("resp_1", "in_progress", nil)})
		s.event(2, "response.reasoning_summary_text.delta", map[string]any{"delta": "think"})
		s.event(3, "response.output_item.added", nil)
		s.event(4, "response.output_text.delta", map[string]any{"delta": "Hel"})
		s.event(5, "response.output_text.delta", map[string]any{"delta": "lo"})
		s.event(6, "response.output_text.done", map[string]any{"text": "Hello"})
		s.event(7, "response.completed", map[string]any{"response": respObj("resp_1", "completed", map[string]any{
			"output": message("Hello"),
			"usage":  map[string]any{"input_tokens": 3, "output_tokens": 2, "total_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 1}},
		})})
	})
	var rec recorder
	if err := p.Stream(context.Background(), req(), rec.emit); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.kinds(), "ref@0 progress@1 reasoning@2 progress@3 delta@4 delta@5 progress@6 done@7"; got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	evs := rec.events()
	if evs[0].Ref != "resp_1" || evs[4].Ref != "resp_1" || evs[2].Text != "think" || rec.text() != "Hello" {
		t.Fatalf("bad events %+v", evs)
	}
	if u := rec.last().Usage; u == nil || *u != (provider.Usage{InputTokens: 3, OutputTokens: 2, ReasoningTokens: 1}) {
		t.Fatalf("usage %+v", u)
	}
	if auth != "Bearer k" {
		t.Fatalf("auth %q", auth)
	}
	for k, want := range map[string]any{"background": true, "stream": true, "store": true, "model": "m",
		"instructions": "sys", "input": "hi", "max_output_tokens": 99.0} {
		if body[k] != want {
			t.Errorf("request %s = %v, want %v", k, body[k], want)
		}
	}
	if r, _ := body["reasoning"].(map[string]any); r["effort"] != "high" {
		t.Errorf("reasoning %v", body["reasoning"])
	}
}

func TestTerminalEvents(t *testing.T) {
	tests := []struct {
		name     string
		typ      string
		fields   map[string]any
		class    diagnostics.Class
		sentinel error
		msg      string
	}{
		{"failed", "response.failed", map[string]any{"response": respObj("r", "failed", map[string]any{"error": map[string]any{"code": "server_error", "message": "boom"}})},
			diagnostics.ClassDeterministic, ErrFailed, "boom"},
		{"incomplete", "response.incomplete", map[string]any{"response": respObj("r", "incomplete", map[string]any{"incomplete_details": map[string]any{"reason": "max_output_tokens"}})},
			diagnostics.ClassDeterministic, ErrIncomplete, "max_output_tokens"},
		{"error event", "error", map[string]any{"code": "invalid_prompt", "message": "bad prompt"},
			diagnostics.ClassDeterministic, ErrErrorEvent, "bad prompt"},
		{"cancelled", "response.cancelled", map[string]any{"response": respObj("r", "cancelled", nil)},
			diagnostics.ClassDeterministic, ErrCancelled, "cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				s := newSSE(w)
				s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
				s.event(1, "response.output_text.delta", map[string]any{"delta": "x"})
				s.event(2, tt.typ, tt.fields)
			})
			var rec recorder
			err := p.Stream(context.Background(), req(), rec.emit)
			var de *diagnostics.Error
			if !errors.As(err, &de) || de.Class != tt.class || !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v", err)
			}
			if diagnostics.Classify(err).Class != tt.class {
				t.Fatalf("Classify = %v", diagnostics.Classify(err).Class)
			}
			for _, ev := range rec.events() {
				if ev.Kind == provider.KindDone {
					t.Fatal("KindDone on a failed response")
				}
			}
		})
	}
}

func TestStreamEndWithoutCompleted(t *testing.T) {
	for _, tail := range []string{"", "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"delta\":\"LOST\"}\n"} {
		p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			s := newSSE(w)
			s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
			s.event(1, "response.output_text.delta", map[string]any{"delta": "x"})
			s.raw(tail) // a cut event: its blank line never comes
		})
		var rec recorder
		err := p.Stream(context.Background(), req(), rec.emit)
		if !errors.Is(err, diagnostics.ErrDisconnected) || diagnostics.Classify(err).Class != diagnostics.ClassDisconnect {
			t.Fatalf("err = %v", err)
		}
		if tail != "" && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut event: err = %v", err)
		}
		if rec.text() != "x" || rec.last().Seq != 1 {
			t.Fatalf("cut event delivered: %s %q", rec.kinds(), rec.text())
		}
	}
}

func TestResumeDropsEventsAtOrBelowCursor(t *testing.T) {
	var query string
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Path + "?" + r.URL.RawQuery
		s := newSSE(w)
		// A server that ignores starting_after and replays everything.
		s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
		for i, d := range []string{"a", "b", "c", "d"} {
			s.event(i+1, "response.output_text.delta", map[string]any{"delta": d})
		}
		s.event(5, "response.completed", map[string]any{"response": respObj("r", "completed", map[string]any{"output": message("abcd")})})
	})
	var rec recorder
	if err := p.Resume(context.Background(), req(), provider.Cursor{Ref: "r", Seq: 2}, rec.emit); err != nil {
		t.Fatal(err)
	}
	if query != "/v1/responses/r?starting_after=2&stream=true" {
		t.Fatalf("query %q", query)
	}
	if got, want := rec.kinds(), "diagnostic:reattached@-1 delta@3 delta@4 done@5"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if rec.text() != "cd" {
		t.Fatalf("text %q", rec.text())
	}
	d := rec.events()[0].Diag
	if d.Message != "re-attached to r from sequence 2" || len(d.Attrs) < 2 || d.Attrs[0].Key != "ref" || d.Attrs[1].Value.Int64() != 2 {
		t.Fatalf("diag %+v", d)
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		class      diagnostics.Class
		wantAfter  time.Duration
	}{
		{401, "", diagnostics.ClassDeterministic, 0},
		{429, "7", diagnostics.ClassRateLimited, 7 * time.Second},
		{500, "", diagnostics.ClassServer, 0},
		{503, "2", diagnostics.ClassDisconnect, 2 * time.Second},
	}
	for _, tt := range tests {
		p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			if tt.retryAfter != "" {
				w.Header().Set("Retry-After", tt.retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tt.status)
			_, _ = io.WriteString(w, `{"error":{"message":"nope","type":"x","code":"c"}}`)
		})
		ops := map[string]func() error{
			"create": func() error { return p.Stream(context.Background(), req(), func(provider.Event) error { return nil }) },
			"resume": func() error {
				return p.Resume(context.Background(), req(), provider.Cursor{Ref: "r", Seq: 3}, func(provider.Event) error { return nil })
			},
			"check":  func() error { _, err := p.Check(context.Background(), "r"); return err },
			"cancel": func() error { return p.Cancel(context.Background(), "r") },
		}
		for op, f := range ops {
			err := f()
			var de *diagnostics.Error
			if !errors.As(err, &de) || de.Status != tt.status || de.Class != tt.class || de.RetryAfter != tt.wantAfter || !strings.Contains(err.Error(), "nope") {
				t.Errorf("%d %s: err = %#v (%v)", tt.status, op, de, err)
			}
		}
	}
}

func TestWrongContentType(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	})
	err := p.Stream(context.Background(), req(), func(provider.Event) error { return nil })
	if !errors.Is(err, diagnostics.ErrProtocol) || diagnostics.Classify(err).Class != diagnostics.ClassProtocol ||
		!strings.Contains(err.Error(), `"application/json"`) || !strings.Contains(err.Error(), `begins "{}"`) {
		t.Fatalf("create: %v", err)
	}
	err = p.Resume(context.Background(), req(), provider.Cursor{Ref: "r", Seq: 1}, func(provider.Event) error { return nil })
	if !errors.Is(err, diagnostics.ErrProtocol) {
		t.Fatalf("resume: %v", err)
	}
}

func TestMalformedEvent(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		s := newSSE(w)
		s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
		s.raw("data: {not json\n\n")
	})
	err := p.Stream(context.Background(), req(), func(provider.Event) error { return nil })
	if !errors.Is(err, ErrProtocol) || diagnostics.Classify(err).Class != diagnostics.ClassProtocol || !strings.Contains(err.Error(), "{not json") {
		t.Fatalf("err %v", err)
	}
}

// A sequence gap that lost a delta is repaired from the completed response.
func TestCompletedOutputRepairsGap(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		s := newSSE(w)
		s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
		s.event(1, "response.output_text.delta", map[string]any{"delta": "a"})
		s.event(3, "response.output_text.delta", map[string]any{"delta": "c"})
		s.event(4, "response.completed", map[string]any{"response": respObj("r", "completed", map[string]any{"output": message("abc")})})
	})
	var rec recorder
	if err := p.Stream(context.Background(), req(), rec.emit); err != nil {
		t.Fatal(err)
	}
	if rec.text() != "abc" || !strings.Contains(rec.kinds(), "reset@-1 delta@-1 done@4") {
		t.Fatalf("%s %q", rec.kinds(), rec.text())
	}
}

func TestEmitErrorReturnedUnchanged(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		s := newSSE(w)
		s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
		s.event(1, "response.output_text.delta", map[string]any{"delta": "a"})
	})
	boom := errors.New("journal full")
	rec := recorder{err: boom}
	if err := p.Stream(context.Background(), req(), rec.emit); err != boom {
		t.Fatalf("err %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		s := newSSE(w)
		s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	err := p.Stream(ctx, req(), func(ev provider.Event) error {
		if ev.Kind == provider.KindRef {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || diagnostics.Classify(err).Class != diagnostics.ClassCanceled {
		t.Fatalf("err %v", err)
	}
}

func TestCheckMapsStatus(t *testing.T) {
	resp := map[string]map[string]any{
		"done": respObj("done", "completed", map[string]any{"output": []any{
			map[string]any{"type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": "not output"}}},
			message("one ")[0], message("two")[0]},
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 2}}),
		"bad":  respObj("bad", "failed", map[string]any{"error": map[string]any{"code": "server_error", "message": "oops"}}),
		"half": respObj("half", "incomplete", map[string]any{"incomplete_details": map[string]any{"reason": "max_output_tokens"}}),
		"wait": respObj("wait", "queued", nil),
	}
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/responses/")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp[id])
	})
	check := func(id string) provider.Status {
		st, err := p.Check(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := check("done"); st.State != provider.StateCompleted || st.Output != "one two" || st.Usage.OutputTokens != 2 {
		t.Fatalf("%+v", st)
	}
	if st := check("bad"); st.State != provider.StateFailed || st.Error != "server_error: oops" {
		t.Fatalf("%+v", st)
	}
	if st := check("half"); st.State != provider.StateIncomplete || st.Error != "max_output_tokens" {
		t.Fatalf("%+v", st)
	}
	if st := check("wait"); st.State != provider.StateQueued || st.Output != "" {
		t.Fatalf("%+v", st)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:1", "ftp://x/v1"} {
		if _, err := New(Config{BaseURL: u}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func fastPolicy() profile.Profile {
	p := ciPolicy()
	p.PollAfter = profile.D(300 * time.Millisecond)
	p.PollInterval = profile.D(20 * time.Millisecond)
	p.StuckAfter = profile.D(200 * time.Millisecond)
	return p
}

// Silence with keepalives: the stream is let go after the idle window (the
// keepalives do not hold it), the status is polled until the output grows,
// and the re-attach continues from the cursor.
func TestPollThroughSilence(t *testing.T) {
	var mu sync.Mutex
	polls, streams := 0, 0
	var resumeQuery string
	createClosed := make(chan time.Duration, 1)
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			start := time.Now()
			s := newSSE(w)
			s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
			s.event(1, "response.in_progress", map[string]any{"response": respObj("r", "in_progress", nil)})
			s.event(2, "response.output_text.delta", map[string]any{"delta": "a"})
			for {
				select {
				case <-r.Context().Done():
					createClosed <- time.Since(start)
					return
				case <-time.After(50 * time.Millisecond):
					s.raw(": keepalive\n\n")
				}
			}
		case r.URL.Query().Get("stream") == "true":
			mu.Lock()
			streams++
			resumeQuery = r.URL.RawQuery
			mu.Unlock()
			s := newSSE(w)
			s.event(3, "response.output_text.delta", map[string]any{"delta": "b"})
			s.event(4, "response.completed", map[string]any{"response": respObj("r", "completed", map[string]any{"output": message("ab")})})
		default:
			mu.Lock()
			polls++
			n := polls
			mu.Unlock()
			out := message("a")
			if n > 5 {
				out = message("ab")
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(respObj("r", "in_progress", map[string]any{"output": out}))
		}
	})
	rq := req()
	rq.Policy = fastPolicy()
	var rec recorder
	if err := p.Stream(context.Background(), rq, rec.emit); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.kinds(), "ref@0 progress@1 delta@2 diagnostic:polling_started@-1 "+
		// five polls find it in progress with nothing new: alive, though silent
		strings.Repeat("alive@-1 ", 5)+
		"diagnostic:status_checked@-1 diagnostic:reattached@-1 delta@3 done@4"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if d := <-createClosed; d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("idle stream let go after %v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if polls != 6 || streams != 1 || resumeQuery != "starting_after=2&stream=true" {
		t.Fatalf("polls %d streams %d query %q", polls, streams, resumeQuery)
	}
	if rec.text() != "ab" {
		t.Fatalf("text %q", rec.text())
	}
}

func TestPollStuckQueued(t *testing.T) {
	t.Parallel()
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s := newSSE(w)
			s.event(0, "response.created", map[string]any{"response": respObj("r", "queued", nil)})
			s.event(1, "response.queued", map[string]any{"response": respObj("r", "queued", nil)})
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(respObj("r", "queued", nil))
	})
	rq := req()
	rq.Policy = fastPolicy()
	rq.Policy.StuckAfter = profile.D(time.Second)
	var rec recorder
	start := time.Now()
	err := p.Stream(context.Background(), rq, rec.emit)
	el := time.Since(start)
	if !errors.Is(err, diagnostics.ErrStuck) || diagnostics.Classify(err).Class != diagnostics.ClassStuck {
		t.Fatalf("err %v", err)
	}
	// Queued since the last event: stuck about StuckAfter after it, polling
	// having started after the idle window.
	if el < time.Second || el > 3*time.Second {
		t.Fatalf("stuck after %v", el)
	}
	if !strings.HasSuffix(rec.kinds(), "diagnostic:polling_started@-1 diagnostic:status_checked@-1") {
		t.Fatalf("%s", rec.kinds())
	}
}

func TestPollSeesFailure(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s := newSSE(w)
			s.event(0, "response.created", map[string]any{"response": respObj("r", "in_progress", nil)})
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(respObj("r", "failed", map[string]any{"error": map[string]any{"code": "server_error", "message": "died"}}))
	})
	rq := req()
	rq.Policy = fastPolicy()
	err := p.Stream(context.Background(), rq, func(provider.Event) error { return nil })
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "died") {
		t.Fatalf("err %v", err)
	}
}

// Silence before response.created: there is nothing to poll, so it is an
// idle disconnect.
func TestIdleBeforeRef(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		s := newSSE(w)
		s.raw(": keepalive\n\n")
		<-r.Context().Done()
	})
	rq := req()
	rq.Policy = fastPolicy()
	var rec recorder
	err := p.Stream(context.Background(), rq, rec.emit)
	if !errors.Is(err, diagnostics.ErrIdleTimeout) || diagnostics.Classify(err).Class != diagnostics.ClassDisconnect || len(rec.events()) != 0 {
		t.Fatalf("err %v events %s", err, rec.kinds())
	}
}

// A re-attach that gets no answer at all within the idle window is silence
// too: the adapter polls, then re-attaches again.
func TestResumeNoAnswerPolls(t *testing.T) {
	var mu sync.Mutex
	streams := 0
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(respObj("r", "completed", map[string]any{"output": message("abc")}))
			return
		}
		mu.Lock()
		streams++
		n := streams
		mu.Unlock()
		if n == 1 {
			<-r.Context().Done() // no headers, nothing
			return
		}
		s := newSSE(w)
		s.event(3, "response.output_text.delta", map[string]any{"delta": "c"})
		s.event(4, "response.completed", map[string]any{"response": respObj("r", "completed", map[string]any{"output": message("abc")})})
	})
	rq := req()
	rq.Policy = fastPolicy()
	var rec recorder
	if err := p.Resume(context.Background(), rq, provider.Cursor{Ref: "r", Seq: 2}, rec.emit); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.kinds(), "diagnostic:polling_started@-1 diagnostic:status_checked@-1 diagnostic:reattached@-1 delta@3 done@4"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// A status poll that gets no answer is bounded by the idle window too.
func TestPollNoAnswer(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s := newSSE(w)
			s.event(0, "response.created", map[string]any{"response": respObj("r", "in_progress", nil)})
		}
		<-r.Context().Done()
	})
	rq := req()
	rq.Policy = fastPolicy()
	start := time.Now()
	err := p.Stream(context.Background(), rq, func(provider.Event) error { return nil })
	if el := time.Since(start); diagnostics.Classify(err).Class != diagnostics.ClassDisconnect || el > 2*time.Second {
		t.Fatalf("err %v after %v", err, el)
	}
}

// Completed, but the stream never answers again: a disconnect, so that the
// executor takes the output from a status check instead of waiting.
func TestCompletedButStreamSilent(t *testing.T) {
	p := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			s := newSSE(w)
			s.event(0, "response.created", map[string]any{"response": respObj("r", "in_progress", nil)})
		case r.URL.Query().Get("stream") != "true":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(respObj("r", "completed", map[string]any{"output": message("abc")}))
			return
		}
		<-r.Context().Done()
	})
	rq := req()
	rq.Policy = fastPolicy()
	var rec recorder
	err := p.Stream(context.Background(), rq, rec.emit)
	if !errors.Is(err, diagnostics.ErrIdleTimeout) || diagnostics.Classify(err).Class != diagnostics.ClassDisconnect {
		t.Fatalf("err %v", err)
	}
	if got, want := rec.kinds(), "ref@0 diagnostic:polling_started@-1 diagnostic:status_checked@-1"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
