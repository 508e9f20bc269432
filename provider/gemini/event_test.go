package gemini

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sse"
)

// Events as the Interactions API documents them (steps wire and legacy
// content wire), https://ai.google.dev/gemini-api/docs/interactions/streaming.
var docEvents = []string{
	`{"interaction":{"id":"v1_abc","status":"in_progress","object":"interaction","model":"gemini-3-flash-preview"},"event_type":"interaction.created","event_id":"e1"}`,
	`{"interaction_id":"v1_abc","status":"in_progress","event_type":"interaction.status_update","event_id":"e2"}`,
	`{"index":0,"step":{"type":"thought"},"event_type":"step.start","event_id":"e3"}`,
	`{"index":0,"delta":{"type":"thought_summary","content":{"type":"text","text":"Counting."}},"event_type":"step.delta","event_id":"e4"}`,
	`{"index":0,"delta":{"signature":"...","type":"thought_signature"},"event_type":"step.delta","event_id":"e5"}`,
	`{"index":0,"event_type":"step.stop","event_id":"e6"}`,
	`{"index":1,"step":{"type":"model_output"},"event_type":"step.start","event_id":"e7"}`,
	`{"index":1,"delta":{"text":"1, 2, 3, ","type":"text"},"event_type":"step.delta","event_id":"e8"}`,
	`{"index":1,"delta":{"text":"4, 5","type":"text"},"event_type":"step.delta","event_id":"e9"}`,
	`{"index":1,"event_type":"step.stop","event_id":"e10"}`,
	`{"interaction":{"id":"v1_abc","status":"completed","usage":{"total_input_tokens":5,"total_output_tokens":9,"total_thought_tokens":3}},"event_type":"interaction.completed","event_id":"e11"}`,
}

var legacyEvents = []string{
	`{"event_type":"interaction.start","interaction":{"id":"v1_old","status":"in_progress"},"event_id":"a"}`,
	`{"event_type":"content.start","index":0,"content":{"type":"thought"},"event_id":"b"}`,
	`{"event_type":"content.delta","index":0,"delta":{"type":"thought_summary","content":{"text":"hmm"}},"event_id":"c"}`,
	`{"event_type":"content.start","index":1,"content":{"type":"text"},"event_id":"d"}`,
	`{"event_type":"content.delta","index":1,"delta":{"type":"text","text":"Hi"},"event_id":"e"}`,
	`{"event_type":"content.stop","index":1,"event_id":"f"}`,
	`{"event_type":"interaction.complete","interaction":{"id":"v1_old","status":"completed"},"event_id":"g"}`,
}

func sseOf(datas []string) string {
	var b strings.Builder
	for _, d := range datas {
		b.WriteString("data: " + d + "\n\n")
	}
	return b.String()
}

// run feeds a whole stream to a fresh session, as Stream does.
func runStream(t *testing.T, body string) (*recorder, error) {
	t.Helper()
	p, _ := New(Config{})
	s := p.newSession(provider.Request{}, nil, provider.Cursor{Seq: -1})
	rec := &recorder{}
	s.emit = rec.emit
	s.fromStart = true
	r := sse.NewReader(strings.NewReader(body))
	for {
		ev, err := r.Next()
		if err != nil {
			return rec, err
		}
		_, done, err := s.handle(ev, time.Now())
		if err != nil || done {
			return rec, err
		}
	}
}

func TestDocumentedStream(t *testing.T) {
	for name, tc := range map[string]struct {
		events          []string
		out, thoughts   string
		ref             string
		wantReasoningEv bool
	}{
		"steps":  {docEvents, "1, 2, 3, 4, 5", "Counting.", "v1_abc", true},
		"legacy": {legacyEvents, "Hi", "hmm", "v1_old", true},
	} {
		t.Run(name, func(t *testing.T) {
			rec, err := runStream(t, sseOf(tc.events))
			if err != nil {
				t.Fatal(err)
			}
			checkStream(t, rec)
			if rec.events()[0].Ref != tc.ref {
				t.Fatal(rec.kinds())
			}
			if got := rec.text(provider.KindDelta); got != tc.out {
				t.Fatalf("output %q", got)
			}
			if got := rec.text(provider.KindReasoning); got != tc.thoughts {
				t.Fatalf("thoughts %q", got)
			}
		})
	}
}

// TestStreamEndIsNotCompletion: a stream cut before interaction.completed,
// or one whose last status update says completed, is no terminal evidence.
func TestStreamEndIsNotCompletion(t *testing.T) {
	evs := append(append([]string{}, docEvents[:9]...),
		`{"interaction_id":"v1_abc","status":"completed","event_type":"interaction.status_update"}`)
	rec, err := runStream(t, sseOf(evs))
	if err == nil || !strings.Contains(err.Error(), "EOF") && err.Error() != "EOF" {
		t.Fatalf("err %v", err)
	}
	for _, ev := range rec.events() {
		if ev.Kind == provider.KindDone {
			t.Fatal("KindDone without interaction.completed")
		}
	}
}

func TestTerminalStatuses(t *testing.T) {
	for _, last := range []string{
		`{"interaction":{"id":"v1_abc","status":"failed","error":{"code":500,"message":"boom"}},"event_type":"interaction.completed"}`,
		`{"interaction_id":"v1_abc","status":"cancelled","event_type":"interaction.status_update"}`,
		`{"error":{"code":"INVALID_ARGUMENT","message":"bad"},"event_type":"error"}`,
	} {
		_, err := runStream(t, sseOf(append(append([]string{}, docEvents[:3]...), last)))
		if err == nil || strings.Contains(err.Error(), "EOF") {
			t.Fatalf("%s: err %v", last, err)
		}
	}
}

// Every documented status has its class; one the API does not document is
// a protocol error naming it, never taken for queued (issue 43).
func TestEveryStatusHasAClass(t *testing.T) {
	for _, c := range []struct {
		status   string
		terminal bool
		class    diagnostics.Class
		is       error
		state    provider.State
	}{
		{statusInProgress, false, "", nil, provider.StateInProgress},
		{statusQueued, false, "", nil, provider.StateQueued},
		{statusCompleted, false, "", nil, provider.StateCompleted},
		{statusFailed, true, diagnostics.ClassDeterministic, ErrFailed, provider.StateFailed},
		{statusCancelled, true, diagnostics.ClassDeterministic, ErrCancelled, provider.StateCancelled},
		{statusIncomplete, true, diagnostics.ClassDeterministic, ErrIncomplete, provider.StateIncomplete},
		{statusRequiresAction, true, diagnostics.ClassDeterministic, ErrRequiresAction, provider.StateFailed},
		{statusBudgetExceeded, true, diagnostics.ClassDeterministic, ErrBudgetExceeded, provider.StateIncomplete},
		{"requires_continuation", true, diagnostics.ClassProtocol, ErrUnknownStatus, ""},
	} {
		if terminalStatus(c.status) != c.terminal {
			t.Errorf("%s: terminal %v, want %v", c.status, !c.terminal, c.terminal)
		}
		if c.state != "" && mapState(c.status) != c.state {
			t.Errorf("%s: state %s, want %s", c.status, mapState(c.status), c.state)
		}
		if !c.terminal {
			continue
		}
		err := terminalError("v1_x", c.status, "m")
		var de *diagnostics.Error
		if !errors.As(err, &de) || de.Class != c.class || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.status) && c.class == diagnostics.ClassProtocol {
			t.Errorf("%s: %v, want class %s and %v", c.status, err, c.class, c.is)
		}
	}
	// On the stream: a status update with an unknown status ends it, naming it.
	_, err := runStream(t, sseOf(append(append([]string{}, docEvents[:3]...),
		`{"interaction_id":"v1_abc","status":"requires_continuation","event_type":"interaction.status_update"}`)))
	if !errors.Is(err, ErrUnknownStatus) || !strings.Contains(err.Error(), `"requires_continuation"`) {
		t.Fatalf("an unknown status on the stream: %v", err)
	}
}

func TestErrorEventClass(t *testing.T) {
	_, err := runStream(t, sseOf([]string{docEvents[0], `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"},"event_type":"error"}`}))
	if err == nil || !strings.Contains(err.Error(), "RESOURCE_EXHAUSTED") {
		t.Fatal(err)
	}
}

// FuzzInteractionsStream feeds untrusted bytes through the SSE reader and the event
// parser of a session: it must never panic, never emit output after a
// terminal event, and keep the cursor strictly increasing.
func FuzzInteractionsStream(f *testing.F) {
	f.Add([]byte(sseOf(docEvents)))
	f.Add([]byte(sseOf(legacyEvents)))
	f.Add([]byte("event: step.delta\ndata: {\"delta\":{\"type\":\"text\",\"text\":\"x\"}}\n\n"))
	f.Add([]byte("data: {\"event_type\":\"error\",\"error\":\"plain\"}\n\ndata: null\n\n"))
	f.Add([]byte("data: {\"event_type\":\"step.delta\",\"delta\":{\"type\":\"thought_summary\",\"content\":[{\"text\":\"a\"},{\"text\":\"b\"}]}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, _ := New(Config{})
		rec := &recorder{}
		s := p.newSession(provider.Request{}, rec.emit, provider.Cursor{Seq: -1})
		s.fromStart = true
		r := sse.NewReader(bytes.NewReader(body))
		for i := 0; i < 10_000; i++ {
			ev, err := r.Next()
			if err != nil {
				break
			}
			_, done, err := s.handle(ev, time.Now())
			if err != nil || done {
				break
			}
		}
		last := int64(-1)
		evs := rec.events()
		for i, ev := range evs {
			if ev.Seq == -1 {
				continue
			}
			if ev.Seq <= last {
				t.Fatalf("seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
			if ev.Kind == provider.KindDone && i != len(evs)-1 {
				t.Fatal("events after KindDone")
			}
		}
	})
}

// retryDelay reads a protobuf Duration as RetryInfo carries it.
func TestRetryDelay(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"3s": 3 * time.Second, "0.500s": 500 * time.Millisecond, "12.5s": 12500 * time.Millisecond, " 1s ": time.Second,
		"": 0, "3": 0, "-1s": 0, "NaNs": 0, "xs": 0, "1e9s": 24 * time.Hour, "3m": 0,
	} {
		if got := retryDelay(in); got != want {
			t.Errorf("retryDelay(%q) = %s, want %s", in, got, want)
		}
	}
}
