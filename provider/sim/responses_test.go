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

func respReq(prompt string) openai.CreateResponseRequest {
	return openai.CreateResponseRequest{Model: "sim", Input: prompt, Instructions: "be brief"}
}

// respResult is what a go-openai Responses stream reader observed.
type respResult struct {
	id      string
	types   []string
	seqs    []int
	text    string
	summary string
	final   *openai.CreateResponseResponse // from the terminal event
	err     error
}

// readResp reads a Responses stream with go-openai; stop, if set, ends the
// read early (the stream is then closed: a client drop).
func readResp(t *testing.T, c *openai.Client, req openai.CreateResponseRequest, stop func(openai.ResponseStreamEvent) bool) (respResult, error) {
	t.Helper()
	var r respResult
	st, err := c.CreateResponseStream(ctxT(t), req)
	if err != nil {
		return r, err
	}
	defer st.Close()
	var text, summary strings.Builder
	for {
		ev, err := st.Recv()
		if err != nil {
			r.err = err
			break
		}
		r.types = append(r.types, string(ev.Type))
		r.seqs = append(r.seqs, ev.SequenceNumber)
		switch ev.Type {
		case openai.ResponseStreamEventCreated:
			r.id = ev.Response.ID
		case openai.ResponseStreamEventOutputTextDelta:
			text.WriteString(ev.Delta)
		case openai.ResponseStreamEventReasoningSummaryTextDelta:
			summary.WriteString(ev.Delta)
		case openai.ResponseStreamEventCompleted, openai.ResponseStreamEventIncomplete:
			r.final = ev.Response
		}
		if stop != nil && stop(ev) {
			break
		}
	}
	r.text, r.summary = text.String(), summary.String()
	return r, nil
}

var plainSequence = []string{
	"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
}

func TestResponsesStream(t *testing.T) {
	s := start(t, Config{Seed: 5, Tokens: 30})
	c := client(t, s)
	r, err := readResp(t, c, respReq("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.err != io.EOF || r.final == nil || r.final.Status != openai.ResponseStatusCompleted {
		t.Fatalf("err=%v final=%+v", r.err, r.final)
	}
	wantTypes := append(slices.Clone(plainSequence), slices.Repeat([]string{"response.output_text.delta"}, 30)...)
	wantTypes = append(wantTypes, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
	if !slices.Equal(r.types, wantTypes) {
		t.Fatalf("event types:\n got %v\nwant %v", r.types, wantTypes)
	}
	for i, n := range r.seqs {
		if n != i {
			t.Fatalf("sequence_number %d at %d", n, i)
		}
	}
	w := want("sim", "hello", 5, 30)
	if r.text != w || r.final.GetOutputText() != w {
		t.Fatalf("text %q / %q, want %q", r.text, r.final.GetOutputText(), w)
	}
	if u := r.final.Usage; u == nil || u.OutputTokens != 30 || u.TotalTokens != u.InputTokens+30 {
		t.Fatalf("usage %+v", u)
	}
	if !strings.HasPrefix(r.id, "resp_") || r.final.ID != r.id || r.final.Object != "response" {
		t.Fatalf("id %q / %q object %q", r.id, r.final.ID, r.final.Object)
	}
	// stored by default: a poll finds it completed
	got, err := c.GetResponse(ctxT(t), r.id)
	if err != nil || got.Status != openai.ResponseStatusCompleted || got.GetOutputText() != w {
		t.Fatalf("poll: %v %+v", err, got)
	}
}

func TestResponsesReasoning(t *testing.T) {
	s := start(t, Config{Tokens: 6, Silence: 50 * time.Millisecond})
	c := client(t, s)
	req := respReq("think")
	req.Reasoning = &openai.ResponseReasoning{Effort: "low", Summary: "auto"}
	r, err := readResp(t, c, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantSummary := strings.Join(ReasoningText("sim", "think", 0, "low"), "")
	if r.summary != wantSummary || r.text != want("sim", "think", 0, 6) {
		t.Fatalf("summary %q text %q", r.summary, r.text)
	}
	for _, typ := range []string{"response.reasoning_summary_part.added", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done"} {
		if !slices.Contains(r.types, typ) {
			t.Fatalf("missing %s in %v", typ, r.types)
		}
	}
	if u := r.final.Usage; u.OutputTokensDetails == nil || u.OutputTokensDetails.ReasoningTokens != 8 || u.OutputTokens != 14 {
		t.Fatalf("usage %+v", u)
	}
	if len(r.final.Output) != 2 {
		t.Fatalf("output items: %d", len(r.final.Output))
	}
	if st := s.Stats(); st.TokensGenerated != 6 || st.ReasoningTokens != 8 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResponsesMaxOutputTokens(t *testing.T) {
	s := start(t, Config{Tokens: 30})
	c := client(t, s)
	req := respReq("m")
	req.MaxOutputTokens = 5
	req.Metadata = map[string]any{MetaTokens: "20"}
	r, err := readResp(t, c, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.types[len(r.types)-1] != "response.incomplete" || r.final.Status != openai.ResponseStatusIncomplete ||
		r.final.IncompleteDetails == nil || r.final.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("final %v %+v", r.types[len(r.types)-1], r.final)
	}
	if r.text != want("sim", "m", 0, 5) {
		t.Fatalf("text %q", r.text)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	s := start(t, Config{Tokens: 9})
	c := client(t, s)
	resp, err := c.CreateResponse(ctxT(t), respReq("n"))
	if err != nil || resp.Status != openai.ResponseStatusCompleted || resp.GetOutputText() != want("sim", "n", 0, 9) {
		t.Fatalf("%v %+v", err, resp)
	}
	req := respReq("n")
	req.Store = ptr(false)
	resp, err = c.CreateResponse(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetResponse(ctxT(t), resp.ID); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("store=false response was kept: %v", err)
	}
	req.Background = true
	if _, err := c.CreateResponse(ctxT(t), req); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("background with store=false: %v", err)
	}
}

// TestBackgroundPollAndCancel: a background response answers queued at once,
// generates while polled, and cancel stops it (idempotently).
func TestBackgroundPollAndCancel(t *testing.T) {
	s := start(t, Config{Tokens: 1000, TokensPerSecond: 200})
	c := client(t, s)
	req := respReq("bg")
	req.Background, req.Store = true, ptr(true)
	resp, err := c.CreateResponse(ctxT(t), req)
	if err != nil || resp.Status != openai.ResponseStatusQueued || resp.Background == nil || !*resp.Background {
		t.Fatalf("%v %+v", err, resp)
	}
	var polled openai.CreateResponseResponse
	waitFor(t, func() bool {
		polled, err = c.GetResponse(ctxT(t), resp.ID)
		return err == nil && polled.Status == openai.ResponseStatusInProgress && len(polled.GetOutputText()) > 0
	})
	if !strings.HasPrefix(want("sim", "bg", 0, 1000), polled.GetOutputText()) {
		t.Fatalf("partial output is not a prefix: %q", polled.GetOutputText())
	}
	cancelled, err := c.CancelResponse(ctxT(t), resp.ID)
	if err != nil || cancelled.Status != openai.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %+v", err, cancelled.Status)
	}
	n := s.Stats().TokensGenerated
	time.Sleep(50 * time.Millisecond)
	if m := s.Stats().TokensGenerated; m > n+1 {
		t.Fatalf("generation went on after cancel: %d -> %d", n, m)
	}
	again, err := c.CancelResponse(ctxT(t), resp.ID)
	if err != nil || again.Status != openai.ResponseStatusCancelled {
		t.Fatalf("second cancel: %v %v", err, again.Status)
	}
	polled, err = c.GetResponse(ctxT(t), resp.ID)
	if err != nil || polled.Status != openai.ResponseStatusCancelled {
		t.Fatalf("poll after cancel: %v %v", err, polled.Status)
	}

	fgReq := respReq("fg")
	fgReq.Metadata = map[string]any{MetaTokens: 2}
	fg, err := c.CreateResponse(ctxT(t), fgReq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelResponse(ctxT(t), fg.ID); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("cancel of a non-background response: %v", err)
	}
	if _, err := c.CancelResponse(ctxT(t), "resp_nope"); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("cancel of an unknown response: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func bgReq(prompt string) openai.CreateResponseRequest {
	r := respReq(prompt)
	r.Background, r.Store = true, ptr(true)
	return r
}

// TestQueuedFault: the response stays queued; polls say so; cancel works
// and ends the stream.
func TestQueuedFault(t *testing.T) {
	s := start(t, Config{Tokens: 5, Faults: []Fault{{Kind: FaultQueued, Times: 1}}})
	c := client(t, s)
	st, err := c.CreateResponseStream(ctxT(t), bgReq("q"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var id string
	for _, wantType := range []openai.ResponseStreamEventType{openai.ResponseStreamEventCreated, openai.ResponseStreamEventQueued} {
		ev, err := st.Recv()
		if err != nil || ev.Type != wantType || ev.Response.Status != openai.ResponseStatusQueued {
			t.Fatalf("%v %v", err, ev.Type)
		}
		id = ev.Response.ID
	}
	time.Sleep(50 * time.Millisecond)
	if got, err := c.GetResponse(ctxT(t), id); err != nil || got.Status != openai.ResponseStatusQueued {
		t.Fatalf("poll: %v %v", err, got.Status)
	}
	if got, err := c.CancelResponse(ctxT(t), id); err != nil || got.Status != openai.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %v", err, got.Status)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("stream after cancel: %v, want a clean end", err)
	}
	if got := s.Stats(); got.TokensGenerated != 0 || got.Faults["queued"] != 1 {
		t.Fatalf("stats %+v", got)
	}
	// the next response is not faulted
	if r, err := readResp(t, c, bgReq("q"), nil); err != nil || r.final == nil {
		t.Fatalf("%v %+v", err, r)
	}
}

func TestResponsesFaults(t *testing.T) {
	for _, bg := range []bool{false, true} {
		for _, tc := range []struct {
			kind  FaultKind
			check func(error) bool
		}{
			{FaultClose, func(err error) bool { return err == io.EOF }},
			{FaultReset, func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
			{FaultCut, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		} {
			name := string(tc.kind)
			if bg {
				name += "/background"
			}
			t.Run(name, func(t *testing.T) {
				s := start(t, Config{Tokens: 20, Faults: []Fault{{Endpoint: EndpointResponsesCreate, Requests: []int{1}, Kind: tc.kind, AfterEvents: 6}}})
				c := client(t, s)
				req := respReq("f")
				if bg {
					req = bgReq("f")
				}
				r, err := readResp(t, c, req, nil)
				if err != nil || !tc.check(r.err) || r.final != nil || len(r.types) != 6 {
					t.Fatalf("open=%v err=%v events=%d final=%v", err, r.err, len(r.types), r.final != nil)
				}
				if !bg {
					// generation stopped with the connection; the stored response says so
					got, err := c.GetResponse(ctxT(t), r.id)
					if err != nil || got.Status != openai.ResponseStatusIncomplete {
						t.Fatalf("poll: %v %v", err, got.Status)
					}
					if n := s.Stats().TokensGenerated; n > 3 {
						t.Fatalf("non-background generation went on: %d tokens", n)
					}
					return
				}
				// the background generator went on regardless
				waitFor(t, func() bool {
					got, err := c.GetResponse(ctxT(t), r.id)
					return err == nil && got.Status == openai.ResponseStatusCompleted && got.GetOutputText() == want("sim", "f", 0, 20)
				})
			})
		}
	}
	t.Run("status", func(t *testing.T) {
		s := start(t, Config{Faults: []Fault{{Endpoint: EndpointResponsesCreate, Kind: FaultStatus, Status: 500}}})
		if _, err := client(t, s).CreateResponseStream(ctxT(t), respReq("x")); !isStatus(err, 500) {
			t.Fatalf("%v", err)
		}
		if st := s.Stats(); st.ResponsesCreated != 0 {
			t.Fatalf("a status fault created a response: %+v", st)
		}
	})
}
