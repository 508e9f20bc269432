package sim

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// TestResumeFidelity: a background stream read to sequence N, dropped and
// resumed with starting_after=N yields every event exactly once and in
// order; the text equals a never-dropped run's; nothing is generated twice.
func TestResumeFidelity(t *testing.T) {
	const tokens, n = 60, 12
	cfg := Config{Seed: 11, Tokens: tokens, TokensPerSecond: 400}

	ref, err := readResp(t, client(t, start(t, cfg)), bgReq("resume me"), nil)
	if err != nil || ref.final == nil {
		t.Fatalf("reference run: %v %+v", err, ref.err)
	}

	s := start(t, cfg)
	c := client(t, s)
	var before []string // raw data of the events read before the drop
	st, err := c.CreateResponseStream(ctxT(t), bgReq("resume me"))
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		ev, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == openai.ResponseStreamEventCreated {
			id = ev.Response.ID
		}
		before = append(before, string(ev.Raw))
		if ev.SequenceNumber == n {
			break
		}
	}
	st.Close() // the drop, mid-generation

	resp := resume(t, ctxT(t), s, id, n)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("resume: %s", resp.Status)
	}
	var after []sseEvent
	if _, err := readSSE(resp.Body, func(e sseEvent) bool { after = append(after, e); return true }); err != io.EOF {
		t.Fatalf("resume read: %v", err)
	}
	for i, e := range after {
		if e.seq() != n+1+i {
			t.Fatalf("event %d has sequence_number %d, want %d", i, e.seq(), n+1+i)
		}
		if e.Name != e.field("type") {
			t.Fatalf("event: line %q != type %q", e.Name, e.field("type"))
		}
	}
	var types []string
	var text strings.Builder
	for _, raw := range before {
		e := sseEvent{Data: raw}
		types = append(types, e.field("type"))
		text.WriteString(e.field("delta"))
	}
	for _, e := range after {
		types = append(types, e.field("type"))
		text.WriteString(e.field("delta"))
	}
	if !slices.Equal(types, ref.types) {
		t.Fatalf("event types differ from the undisturbed run:\n got %v\nwant %v", types, ref.types)
	}
	if text.String() != ref.text || text.String() != want("sim", "resume me", 11, tokens) {
		t.Fatalf("text differs:\n got %q\nwant %q", text.String(), ref.text)
	}
	st2 := s.Stats()
	if st2.ResponsesCreated != 1 || st2.TokensGenerated != tokens || st2.Requests[EndpointResponsesStream] != 1 {
		t.Fatalf("stats %+v", st2)
	}

	// A full replay (starting_after=-1) is byte-identical to what the two
	// readers got.
	var replay []string
	resp = resume(t, ctxT(t), s, id, -1)
	_, _ = readSSE(resp.Body, func(e sseEvent) bool { replay = append(replay, e.Data); return true })
	got := append(slices.Clone(before), eventsData(after)...)
	if !slices.Equal(replay, got) {
		t.Fatal("replay differs from the events read across the drop")
	}
}

func eventsData(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Data
	}
	return out
}

// TestResumeThroughFaults: the create stream and the first resume are both
// broken by faults; a second resume finishes; every event arrives once.
func TestResumeThroughFaults(t *testing.T) {
	s := start(t, Config{Tokens: 40, TokensPerSecond: 500, Keepalive: 20 * time.Millisecond, Faults: []Fault{
		{Endpoint: EndpointResponsesCreate, Kind: FaultClose, AfterEvents: 8},
		{Endpoint: EndpointResponsesStream, Requests: []int{1}, Kind: FaultReset, AfterEvents: 5},
		{Endpoint: EndpointResponsesStream, Requests: []int{2}, Kind: FaultCut, AfterEvents: 5},
		{Endpoint: EndpointResponsesStream, Requests: []int{3}, Kind: FaultSilence, AfterEvents: 3, Duration: 100 * time.Millisecond},
	}})
	c := client(t, s)
	r, err := readResp(t, c, bgReq("x"), nil)
	if err != nil || r.err != io.EOF || len(r.seqs) != 8 {
		t.Fatalf("create: %v %v %d", err, r.err, len(r.seqs))
	}
	last := r.seqs[len(r.seqs)-1]
	text := r.text
	wantErrs := []func(error) bool{
		func(err error) bool { return errors.Is(err, syscall.ECONNRESET) },
		func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) },
		func(err error) bool { return err == io.EOF },
	}
	var done bool
	comments := 0
	for i, ok := range wantErrs {
		resp := resume(t, ctxT(t), s, r.id, last)
		k, err := readSSE(resp.Body, func(e sseEvent) bool {
			if e.seq() != last+1 {
				t.Fatalf("resume %d: sequence_number %d after %d", i+1, e.seq(), last)
			}
			last = e.seq()
			text += e.field("delta")
			done = e.Name == "response.completed"
			return true
		})
		comments += k
		if !ok(err) {
			t.Fatalf("resume %d ended with %v", i+1, err)
		}
	}
	if !done || text != want("sim", "x", 0, 40) {
		t.Fatalf("done=%v text %q", done, text)
	}
	if comments == 0 {
		t.Fatal("no keepalive during the silence fault")
	}
	st := s.Stats()
	if st.TokensGenerated != 40 || st.Faults["reset"] != 1 || st.Faults["cut"] != 1 || st.Faults["close"] != 1 || st.Faults["silence"] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResumeErrors(t *testing.T) {
	s := start(t, Config{Tokens: 3})
	c := client(t, s)
	fg, _ := readResp(t, c, respReq("a"), nil)
	bgPlain, err := c.CreateResponse(ctxT(t), bgReq("b"))
	if err != nil {
		t.Fatal(err)
	}
	bg, _ := readResp(t, c, bgReq("c"), nil)
	for _, tc := range []struct {
		id, after string
		code      int
	}{
		{fg.id, "0", http.StatusBadRequest},
		{bgPlain.ID, "0", http.StatusBadRequest},
		{"resp_unknown", "0", http.StatusNotFound},
		{bg.id, "x", http.StatusBadRequest},
		{bg.id, "-2", http.StatusBadRequest},
		{bg.id, "2", http.StatusOK},
		{bg.id, "1000", http.StatusOK}, // nothing after: ends at once
	} {
		resp, err := http.Get(s.BaseURL() + "/responses/" + tc.id + "?stream=true&starting_after=" + tc.after)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s after %s: %d %s", tc.id, tc.after, resp.StatusCode, body)
		}
	}
	// go-openai's GetResponse with StartingAfter polls (JSON), it never streams
	after := 2
	got, err := c.GetResponse(ctxT(t), bg.id, openai.RetrieveResponseOptions{StartingAfter: &after})
	if err != nil || got.Status != openai.ResponseStatusCompleted {
		t.Fatalf("%v %v", err, got.Status)
	}
}

// TestBackgroundOutlivesClient: a background stream's client goes after two
// events; the response completes anyway and a late resume gets the rest.
func TestBackgroundOutlivesClient(t *testing.T) {
	s := start(t, Config{Tokens: 30, TokensPerSecond: 300})
	c := client(t, s)
	r, err := readResp(t, c, bgReq("late"), func(ev openai.ResponseStreamEvent) bool { return ev.SequenceNumber == 1 })
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, err := c.GetResponse(ctxT(t), r.id)
		return err == nil && got.Status == openai.ResponseStatusCompleted
	})
	var text strings.Builder
	var lastType string
	resp := resume(t, ctxT(t), s, r.id, 1)
	if _, err := readSSE(resp.Body, func(e sseEvent) bool {
		text.WriteString(e.field("delta"))
		lastType = e.Name
		return true
	}); err != io.EOF || lastType != "response.completed" || text.String() != want("sim", "late", 0, 30) {
		t.Fatalf("%v %s %q", err, lastType, text.String())
	}
}

// TestFaultByResponseID: a fault added at runtime for one response id hits
// only requests about that response.
func TestFaultByResponseID(t *testing.T) {
	s := start(t, Config{Tokens: 3})
	c := client(t, s)
	a, _ := readResp(t, c, bgReq("a"), nil)
	b, _ := readResp(t, c, bgReq("b"), nil)
	s.AddFault(Fault{ResponseID: a.id, Kind: FaultStatus, Status: 500, Times: 1})
	if _, err := c.GetResponse(ctxT(t), b.id); err != nil {
		t.Fatalf("other response faulted: %v", err)
	}
	if _, err := c.GetResponse(ctxT(t), a.id); !isStatus(err, 500) {
		t.Fatalf("fault for %s not applied: %v", a.id, err)
	}
	if _, err := c.GetResponse(ctxT(t), a.id); err != nil {
		t.Fatalf("times: 1 not honoured: %v", err)
	}
}
