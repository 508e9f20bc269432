package sim

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// TestRefuse: a refused connection is accepted and reset before a request is
// read; the client sees a reset (or EOF), never an HTTP status.
func TestRefuse(t *testing.T) {
	s := start(t, Config{Tokens: 3, Faults: []Fault{{Kind: FaultRefuse, Times: 2}}})
	c := client(t, s)
	for i := range 2 {
		r := readChat(t, c, chatReq("x"))
		var apiErr *openai.APIError
		if r.openErr == nil || errors.As(r.openErr, &apiErr) ||
			!(errors.Is(r.openErr, syscall.ECONNRESET) || errors.Is(r.openErr, syscall.EPIPE) || errors.Is(r.openErr, io.EOF)) {
			t.Fatalf("attempt %d: err = %v, want a reset, EPIPE or EOF", i+1, r.openErr)
		}
		t.Logf("refused: %v", r.openErr)
	}
	if r := readChat(t, c, chatReq("x")); r.err != io.EOF || r.finish != openai.FinishReasonStop {
		t.Fatalf("after the refusals: %v %v", r.openErr, r.err)
	}
	st := s.Stats()
	if st.Faults[string(FaultRefuse)] != 2 || st.Connections != 3 || st.Requests[EndpointChat] != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestOutage: during an outage connections are refused (a dial error), open
// streams are reset, and the server comes back on the same address.
func TestOutage(t *testing.T) {
	s := start(t, Config{Tokens: 200, TokensPerSecond: 100})
	c := client(t, s)
	addr := s.Addr()

	st, err := c.CreateChatCompletionStream(ctxT(t), chatReq("o"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	var recvErr error
	for recvErr == nil {
		_, recvErr = st.Recv()
	}
	if recvErr == io.EOF {
		t.Fatalf("open stream should break, got a clean EOF")
	}
	t.Logf("open stream at outage: %v", recvErr)
	r := readChat(t, c, chatReq("o"))
	if !errors.Is(r.openErr, syscall.ECONNREFUSED) {
		t.Fatalf("during outage: %v, want ECONNREFUSED", r.openErr)
	}
	t.Logf("during outage: %v", r.openErr)
	if err := s.SetOutage(false); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, s.Addr())
	}
	req := chatReq("o")
	req.Metadata = map[string]string{MetaTokens: "3", MetaTokensPerSecond: "0"}
	if r := readChat(t, c, req); r.err != io.EOF || r.finish != openai.FinishReasonStop {
		t.Fatalf("after outage: %v %v", r.openErr, r.err)
	}
}

// TestOutageOverHTTP: POST /sim/outage?for=D refuses connections for D.
func TestOutageOverHTTP(t *testing.T) {
	s := start(t, Config{Tokens: 2})
	resp, err := http.Post("http://"+s.Addr()+"/sim/outage?for=1s", "", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := http.Get("http://" + s.Addr() + "/sim/stats"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("during outage: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Addr() + "/sim/stats")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not come back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOutageOutlastsATakenPort: an outage that ends while something else
// holds its port (a client's connection may be given it as its own end)
// listens again as soon as the port is free, on the same address.
func TestOutageOutlastsATakenPort(t *testing.T) {
	s := start(t, Config{Tokens: 2})
	addr := s.Addr()
	resp, err := http.Post("http://"+addr+"/sim/outage?for=100ms", "", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	taken, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("taking the port during the outage: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // the outage ends meanwhile and finds the port taken
	taken.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/sim/stats")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen again once its port was free: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, s.Addr())
	}
}

func TestAddFaultOverHTTP(t *testing.T) {
	s := start(t, Config{Tokens: 2})
	code, _, body := post(t, "http://"+s.Addr()+"/sim/faults", map[string]any{"endpoint": "chat", "kind": "status", "status": 503, "times": 1})
	if code != http.StatusCreated {
		t.Fatalf("%d %s", code, body)
	}
	code, _, _ = post(t, "http://"+s.Addr()+"/sim/faults", map[string]any{"kind": "silence", "duration": "1s", "bogus": 1})
	if code != http.StatusBadRequest {
		t.Fatalf("unknown field accepted: %d", code)
	}
	code, _, _ = post(t, "http://"+s.Addr()+"/sim/faults", map[string]any{"kind": "silence"})
	if code != http.StatusBadRequest {
		t.Fatalf("silence without duration accepted: %d", code)
	}
	if r := readChat(t, client(t, s), chatReq("x")); !isStatus(r.openErr, 503) {
		t.Fatalf("runtime fault not applied: %v", r.openErr)
	}
	resp, err := http.Get("http://" + s.Addr() + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Stats
	if err := jsonDecode(resp.Body, &st); err != nil || st.Faults["status"] != 1 || st.Requests["chat"] != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

func TestCloseIsIdempotentAndStopsEverything(t *testing.T) {
	s := New(Config{Tokens: 1000, TokensPerSecond: 50})
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	// a background response generating, a stream tailing it, a chat stream
	st, err := c.CreateResponseStream(ctxT(t), openai.CreateResponseRequest{Model: "sim", Input: "x", Background: true, Store: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err := c.CreateChatCompletionStream(ctxT(t), chatReq("y"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	noSimGoroutines(t)
	if err := s.SetOutage(true); err == nil {
		t.Fatal("SetOutage after Close should fail")
	}
}

func ptr[T any](v T) *T { return &v }

// TestHandlerElsewhere: mounted on another server, the handler still
// serves, and a cut degrades to an aborted response (unexpected EOF).
func TestHandlerElsewhere(t *testing.T) {
	s := New(Config{Tokens: 4, Faults: []Fault{{Requests: []int{1}, Kind: FaultCut, AfterEvents: 2}}})
	defer s.Close()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = hs.URL + "/v1"
	c := openai.NewClientWithConfig(cfg)
	if r := readChat(t, c, chatReq("h")); !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut: %v", r.err)
	}
	if r := readChat(t, c, chatReq("h")); r.err != io.EOF || r.text != want("sim", "h", 0, 4) {
		t.Fatalf("%v %q", r.err, r.text)
	}
}

func TestModelsAndUnknownRoutes(t *testing.T) {
	s := start(t, Config{})
	models, err := client(t, s).ListModels(ctxT(t))
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "sim" {
		t.Fatalf("%v %+v", err, models)
	}
	resp, err := http.Get(s.BaseURL() + "/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown route: %d", resp.StatusCode)
	}
}
