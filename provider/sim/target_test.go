package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// nodeChat streams one chat request for node (named by NodeHeader, or by
// metadata when byMeta) and reports its HTTP status, text, whether [DONE]
// came, and the error that ended the body.
func nodeChat(t *testing.T, s *Server, node string, byMeta bool) (status int, text string, done bool, err error) {
	t.Helper()
	body := map[string]any{"model": "sim", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "hello " + node}}}
	if byMeta {
		body["metadata"] = map[string]any{NodeMetadata: node}
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.BaseURL()+"/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if !byMeta {
		req.Header.Set(NodeHeader, node)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", false, nil
	}
	var sb strings.Builder
	_, err = readSSE(resp.Body, func(ev sseEvent) bool {
		if ev.Data == "[DONE]" {
			done = true
			return true
		}
		var ch openai.ChatCompletionStreamResponse
		if json.Unmarshal([]byte(ev.Data), &ch) == nil && len(ch.Choices) > 0 {
			sb.WriteString(ch.Choices[0].Delta.Content)
		}
		return true
	})
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return resp.StatusCode, sb.String(), done, err
}

// A fault aimed at a node counts that node's requests only: the other
// node's traffic, before or between, does not move it.
func TestFaultTargetsNodeAndAttempt(t *testing.T) {
	s := start(t, Config{Tokens: 12, Faults: []Fault{
		{Endpoint: EndpointChat, Node: "b", Requests: []int{2}, Kind: FaultStatus, Status: 503},
		{Node: "a", Requests: []int{1}, Kind: FaultClose, AfterEvents: 3},
	}})
	for i := range 3 { // other nodes and unnamed clients first: they never hit b's fault
		if st, _, done, err := nodeChat(t, s, "c", false); st != 200 || !done || err != nil {
			t.Fatalf("c request %d: %d %v %v", i+1, st, done, err)
		}
	}
	if st, _, done, _ := nodeChat(t, s, "b", false); st != 200 || !done {
		t.Fatalf("b's first request was faulted: %d", st)
	}
	if st, _, done, err := nodeChat(t, s, "a", true); st != 200 || done || err != nil {
		t.Fatalf("a's first request (named by metadata) should close without [DONE]: %d done=%v err=%v", st, done, err)
	}
	if st, _, _, _ := nodeChat(t, s, "b", false); st != http.StatusServiceUnavailable {
		t.Fatalf("b's second request: status %d, want 503", st)
	}
	if st, _, done, _ := nodeChat(t, s, "b", false); st != 200 || !done {
		t.Fatalf("b's third request: %d", st)
	}
	st := s.Stats()
	if st.Nodes["b"].Requests[EndpointChat] != 3 || st.Nodes["a"].Requests[EndpointChat] != 1 || st.Requests[EndpointChat] != 7 {
		t.Fatalf("counters %+v", st)
	}
	// a's stream closed after the role chunk and 2 tokens; b's first and third made 12 each
	if st.Nodes["b"].TokensGenerated != 24 || st.Nodes["a"].TokensGenerated != 2 {
		t.Fatalf("node tokens %+v", st.Nodes)
	}
	// role, 12 tokens, finish_reason, [DONE] twice; b's 503 wrote none
	if st.Nodes["b"].Events != 2*15 || st.Nodes["c"].Events != 3*15 {
		t.Fatalf("node events %+v", st.Nodes)
	}
}

// POST /sim/reset drops faults and counters and arms the faults it is given,
// with the YAML schema's field names.
func TestResetOverHTTP(t *testing.T) {
	s := start(t, Config{Tokens: 5, Faults: []Fault{{Kind: FaultStatus, Status: 500}}})
	if st, _, _, _ := nodeChat(t, s, "a", false); st != 500 {
		t.Fatalf("configured fault did not act: %d", st)
	}
	code, _, body := post(t, strings.TrimSuffix(s.BaseURL(), "/v1")+"/sim/reset",
		map[string]any{"faults": []any{map[string]any{"node": "a", "requests": []int{2}, "kind": "status", "status": 429, "retry_after": "1"}}})
	if code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	if st := s.Stats(); st.Requests[EndpointChat] != 0 || len(st.Faults) != 0 || len(st.Nodes) != 0 {
		t.Fatalf("counters not reset: %+v", st)
	}
	if st, _, done, _ := nodeChat(t, s, "a", false); st != 200 || !done {
		t.Fatalf("a's first request after the reset: %d", st)
	}
	if st, _, _, _ := nodeChat(t, s, "a", false); st != 429 {
		t.Fatalf("a's second request after the reset: %d, want 429", st)
	}
	for _, bad := range []string{`{"faults":[{"kind":"refuse","node":"a"}]}`, `{"faults":[{"kind":"nap"}]}`, `{"fault":[]}`} {
		resp, err := http.Post(strings.TrimSuffix(s.BaseURL(), "/v1")+"/sim/reset", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("reset %s: %d, want 400", bad, resp.StatusCode)
		}
	}
	code, _, body = post(t, strings.TrimSuffix(s.BaseURL(), "/v1")+"/sim/faults",
		[]any{map[string]any{"node": "z", "kind": "close"}, map[string]any{"kind": "outage", "duration": "1s", "node": "y"}})
	if code != 201 || !bytes.Contains(body, []byte(`"duration":"1s"`)) {
		t.Fatalf("list of faults: %d %s", code, body)
	}
}

// An outage aimed at a node's request takes the server down for its
// duration: that request is reset, new connections are refused, then the
// server serves again on the same address.
func TestOutageFault(t *testing.T) {
	s := start(t, Config{Tokens: 5, Faults: []Fault{{Node: "a", Requests: []int{1}, Kind: FaultOutage, Duration: 400 * time.Millisecond}}})
	if _, _, _, err := nodeChat(t, s, "a", false); err == nil {
		t.Fatal("the outage's own request got an answer")
	}
	if _, _, _, err := nodeChat(t, s, "b", false); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("during the outage: %v, want connection refused", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _, done, err := nodeChat(t, s, "a", false)
		if err == nil && st == 200 && done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outage did not end: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.Stats().Faults[string(FaultOutage)] != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

// Fidelity with the official SDKs: usage details objects, a max below the
// natural length ends with "length", GET /v1/responses/{id} with stream in a
// JSON body streams.
func TestFidelity(t *testing.T) {
	s := start(t, Config{Tokens: 30})
	c := client(t, s)
	req := chatReq("p")
	req.MaxCompletionTokens = 6
	res := readChat(t, c, req)
	if res.finish != openai.FinishReasonLength || res.text != want("sim", "p", 0, 6) {
		t.Fatalf("max below natural: finish=%q text=%q", res.finish, res.text)
	}
	if res.usage == nil || res.usage.PromptTokensDetails == nil || res.usage.CompletionTokensDetails == nil {
		t.Fatalf("usage details missing: %+v", res.usage)
	}

	r, err := readResp(t, c, openai.CreateResponseRequest{Model: "sim", Input: "q", Background: true, Store: new(true)}, func(ev openai.ResponseStreamEvent) bool {
		return ev.SequenceNumber >= 4
	})
	if err != nil || r.id == "" {
		t.Fatalf("create: %v %q", err, r.id)
	}
	hreq, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, s.BaseURL()+"/responses/"+r.id+"?starting_after=4", strings.NewReader(`{"stream":true}`))
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream in the body: content type %q", ct)
	}
	first, last := -1, ""
	_, _ = readSSE(resp.Body, func(ev sseEvent) bool {
		if first < 0 {
			first = ev.seq()
		}
		last = ev.Name
		return true
	})
	if first != 5 || last != "response.completed" {
		t.Fatalf("resumed from %d, last %q", first, last)
	}
	if st := s.Stats(); st.Requests[EndpointResponsesStream] != 1 {
		t.Fatalf("counted as %+v", st.Requests)
	}
}

// The YAML file and the admin API share one schema, node and outage included.
func TestNodeFaultSchema(t *testing.T) {
	cfg, err := ParseConfig([]byte("faults:\n  - {node: plan, endpoint: chat, requests: [2], kind: outage, duration: 2s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Fault{Node: "plan", Endpoint: EndpointChat, Requests: []int{2}, Kind: FaultOutage, Duration: 2 * time.Second}
	b, _ := json.Marshal(cfg.Faults[0])
	var back Fault
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want) || !reflect.DeepEqual(cfg.Faults[0], want) {
		t.Fatalf("yaml %+v, json %s -> %+v (%v)", cfg.Faults[0], b, back, err)
	}
	for _, bad := range []string{
		"faults: [{kind: refuse, node: a}]",
		"faults: [{kind: outage}]",
		"faults: [{kind: outage, duration: 2h}]",
		"faults: [{kind: close, duration: 1s}]",
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
