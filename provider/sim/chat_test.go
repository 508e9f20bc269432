package sim

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func chatReq(prompt string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model: "sim",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
			{Role: openai.ChatMessageRoleUser, Content: prompt},
		},
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
}

// chatResult is what a go-openai chat stream reader observed.
type chatResult struct {
	text     string
	finish   openai.FinishReason
	usage    *openai.Usage
	chunks   int
	err      error // the error that ended Recv (io.EOF after [DONE] or a clean close)
	openErr  error // the error of CreateChatCompletionStream
	roleSeen bool
}

func readChat(t *testing.T, c *openai.Client, req openai.ChatCompletionRequest) chatResult {
	t.Helper()
	var res chatResult
	st, err := c.CreateChatCompletionStream(ctxT(t), req)
	if err != nil {
		res.openErr = err
		return res
	}
	defer st.Close()
	var b strings.Builder
	for {
		ch, err := st.Recv()
		if err != nil {
			res.err = err
			break
		}
		res.chunks++
		if ch.Usage != nil {
			res.usage = ch.Usage
		}
		for _, c := range ch.Choices {
			if c.Delta.Role == "assistant" {
				res.roleSeen = true
			}
			b.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				res.finish = c.FinishReason
			}
		}
	}
	res.text = b.String()
	return res
}

func TestChatStream(t *testing.T) {
	s := start(t, Config{Seed: 3, Tokens: 40})
	c := client(t, s)
	res := readChat(t, c, chatReq("write a poem"))
	if res.err != io.EOF || res.finish != openai.FinishReasonStop || !res.roleSeen {
		t.Fatalf("err=%v finish=%q role=%v", res.err, res.finish, res.roleSeen)
	}
	if w := want("sim", "write a poem", 3, 40); res.text != w {
		t.Fatalf("text\n got %q\nwant %q", res.text, w)
	}
	if res.usage == nil || res.usage.CompletionTokens != 40 || res.usage.TotalTokens != res.usage.PromptTokens+40 {
		t.Fatalf("usage = %+v", res.usage)
	}
	// role + 40 tokens + finish + usage
	if res.chunks != 43 {
		t.Fatalf("chunks = %d, want 43", res.chunks)
	}
	again := readChat(t, c, chatReq("write a poem"))
	if again.text != res.text {
		t.Fatal("same request, different text")
	}
	st := s.Stats()
	if st.Requests[EndpointChat] != 2 || st.TokensGenerated != 80 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestChatMaxTokensAndMetadata(t *testing.T) {
	s := start(t, Config{Tokens: 40})
	c := client(t, s)

	req := chatReq("p")
	//lint:ignore SA1019 the simulator must honour the legacy field that clients still send
	req.MaxTokens = 7
	res := readChat(t, c, req)
	if res.finish != openai.FinishReasonLength || res.text != want("sim", "p", 0, 7) {
		t.Fatalf("max below the natural length (40): finish=%q text=%q", res.finish, res.text)
	}

	req.Metadata = map[string]string{MetaTokens: "20"}
	res = readChat(t, c, req)
	if res.finish != openai.FinishReasonLength || res.text != want("sim", "p", 0, 7) {
		t.Fatalf("cut by max: finish=%q text=%q", res.finish, res.text)
	}

	req = chatReq("p")
	req.Metadata = map[string]string{MetaTokens: "5", MetaTokensPerSecond: "100", MetaSilence: "150ms"}
	t0 := time.Now()
	res = readChat(t, c, req)
	if el := time.Since(t0); el < 150*time.Millisecond+4*10*time.Millisecond {
		t.Fatalf("silence and pace not honoured: %v", el)
	}
	if res.text != want("sim", "p", 0, 5) || res.finish != openai.FinishReasonStop {
		t.Fatalf("text %q", res.text)
	}

	req.Metadata = map[string]string{MetaSilence: "soon"}
	if res := readChat(t, c, req); !isStatus(res.openErr, http.StatusBadRequest) {
		t.Fatalf("bad metadata: %v", res.openErr)
	}
}

func isStatus(err error, code int) bool {
	var e *openai.APIError
	return errors.As(err, &e) && e.HTTPStatusCode == code
}

func TestChatKeepalive(t *testing.T) {
	s := start(t, Config{Tokens: 3, Silence: 300 * time.Millisecond, Keepalive: 50 * time.Millisecond})
	resp := rawChat(t, s, `{"model":"sim","stream":true,"messages":[{"role":"user","content":"k"}]}`)
	var text strings.Builder
	comments, err := readSSE(resp.Body, func(e sseEvent) bool {
		if e.Data != "[DONE]" {
			var ch openai.ChatCompletionStreamResponse
			_ = jsonUnmarshal(e.Data, &ch)
			if len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		return true
	})
	if err != io.EOF || comments < 3 {
		t.Fatalf("err=%v keepalive comments=%d, want >= 3", err, comments)
	}
	if text.String() != want("sim", "k", 0, 3) {
		t.Fatalf("text %q", text.String())
	}
}

func rawChat(t *testing.T, s *Server, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(s.BaseURL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestChatNonStreaming(t *testing.T) {
	s := start(t, Config{Seed: 9, Tokens: 12})
	c := client(t, s)
	req := chatReq("q")
	req.Stream, req.StreamOptions = false, nil
	resp, err := c.CreateChatCompletion(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != want("sim", "q", 9, 12) || resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Fatalf("got %q finish %q", got, resp.Choices[0].FinishReason)
	}
	if resp.Usage.CompletionTokens != 12 || resp.Object != "chat.completion" {
		t.Fatalf("resp = %+v", resp)
	}
}

// TestChatFaults checks what go-openai observes for each fault, as
// protocol-facts §3 says it must.
func TestChatFaults(t *testing.T) {
	const tokens = 10
	cases := []struct {
		name  string
		fault Fault
		check func(t *testing.T, r chatResult)
	}{
		{"close", Fault{Kind: FaultClose, AfterEvents: 4}, func(t *testing.T, r chatResult) {
			// a clean close reads as io.EOF, but no finish_reason arrived
			if r.err != io.EOF || r.finish != "" || r.text != want("sim", "f", 0, 3) {
				t.Fatalf("err=%v finish=%q text=%q", r.err, r.finish, r.text)
			}
		}},
		{"close before [DONE]", Fault{Kind: FaultClose, AfterEvents: tokens + 3}, func(t *testing.T, r chatResult) {
			if r.err != io.EOF || r.finish != openai.FinishReasonStop || r.usage == nil {
				t.Fatalf("err=%v finish=%q", r.err, r.finish)
			}
		}},
		{"reset", Fault{Kind: FaultReset, AfterEvents: 4}, func(t *testing.T, r chatResult) {
			if !errors.Is(r.err, syscall.ECONNRESET) {
				t.Fatalf("err = %v, want ECONNRESET", r.err)
			}
		}},
		{"cut", Fault{Kind: FaultCut, AfterEvents: 4}, func(t *testing.T, r chatResult) {
			if !errors.Is(r.err, io.ErrUnexpectedEOF) || r.text != want("sim", "f", 0, 3) {
				t.Fatalf("err=%v text=%q", r.err, r.text)
			}
		}},
		{"cut before first event", Fault{Kind: FaultCut}, func(t *testing.T, r chatResult) {
			if !errors.Is(r.err, io.ErrUnexpectedEOF) || r.chunks != 0 {
				t.Fatalf("err=%v chunks=%d", r.err, r.chunks)
			}
		}},
		{"silence", Fault{Kind: FaultSilence, AfterEvents: 2, Duration: 200 * time.Millisecond}, func(t *testing.T, r chatResult) {
			if r.err != io.EOF || r.finish != openai.FinishReasonStop || r.text != want("sim", "f", 0, tokens) {
				t.Fatalf("err=%v finish=%q", r.err, r.finish)
			}
		}},
	}
	for _, st := range []int{400, 401, 429, 500, 502, 503, 504} {
		cases = append(cases, struct {
			name  string
			fault Fault
			check func(t *testing.T, r chatResult)
		}{http.StatusText(st), Fault{Kind: FaultStatus, Status: st, RetryAfter: "2"}, func(t *testing.T, r chatResult) {
			if !isStatus(r.openErr, st) {
				t.Fatalf("err = %v, want APIError %d", r.openErr, st)
			}
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, Config{Tokens: tokens, Faults: []Fault{withRequests(tc.fault, 1)}})
			c := client(t, s)
			t0 := time.Now()
			tc.check(t, readChat(t, c, chatReq("f")))
			if tc.fault.Kind == FaultSilence && time.Since(t0) < tc.fault.Duration {
				t.Fatal("silence too short")
			}
			// request 2 is not faulted
			if r := readChat(t, c, chatReq("f")); r.err != io.EOF || r.finish != openai.FinishReasonStop || r.text != want("sim", "f", 0, tokens) {
				t.Fatalf("second request: err=%v open=%v finish=%q", r.err, r.openErr, r.finish)
			}
			if n := s.Stats().Faults[string(tc.fault.Kind)]; n != 1 {
				t.Fatalf("faults[%s] = %d, want 1", tc.fault.Kind, n)
			}
		})
	}
}

func withRequests(f Fault, n ...int) Fault {
	f.Requests = n
	return f
}

func TestStatusFaultRetryAfter(t *testing.T) {
	s := start(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 429, RetryAfter: "7", Times: 1}}})
	code, h, body := post(t, s.BaseURL()+"/chat/completions", chatReq("x"))
	if code != 429 || h.Get("Retry-After") != "7" || !strings.Contains(string(body), `"rate_limit_exceeded"`) {
		t.Fatalf("code=%d retry-after=%q body=%s", code, h.Get("Retry-After"), body)
	}
	if code, _, _ := post(t, s.BaseURL()+"/chat/completions", chatReq("x")); code != 200 {
		t.Fatalf("times: 1 not honoured: %d", code)
	}
}

func TestChatNonStreamingFaults(t *testing.T) {
	s := start(t, Config{Tokens: 5, Faults: []Fault{
		{Endpoint: EndpointChat, Requests: []int{1}, Kind: FaultReset},
		{Endpoint: EndpointChat, Requests: []int{2}, Kind: FaultCut},
		{Endpoint: EndpointChat, Requests: []int{3}, Kind: FaultClose},
		{Endpoint: EndpointChat, Requests: []int{4}, Kind: FaultSilence, Duration: 100 * time.Millisecond},
	}})
	c := client(t, s)
	req := chatReq("n")
	req.Stream, req.StreamOptions = false, nil
	_, err := c.CreateChatCompletion(ctxT(t), req)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reset: %v", err)
	}
	_, err = c.CreateChatCompletion(ctxT(t), req)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut: %v", err)
	}
	_, err = c.CreateChatCompletion(ctxT(t), req)
	if !errors.Is(err, io.EOF) {
		t.Errorf("close: %v", err)
	}
	resp, err := c.CreateChatCompletion(ctxT(t), req)
	if err != nil || resp.Choices[0].Message.Content != want("sim", "n", 0, 5) {
		t.Errorf("silence: %v", err)
	}
}

// TestRetryRegenerates: a chat retry after a drop produces its tokens again,
// and Stats shows it.
func TestRetryRegenerates(t *testing.T) {
	s := start(t, Config{Tokens: 10, Faults: []Fault{{Requests: []int{1}, Kind: FaultClose, AfterEvents: 5}}})
	c := client(t, s)
	readChat(t, c, chatReq("r"))
	if got := s.Stats().TokensGenerated; got != 4 {
		t.Fatalf("tokens after drop = %d, want 4 (role + 4 tokens were sent)", got)
	}
	readChat(t, c, chatReq("r"))
	if got := s.Stats().TokensGenerated; got != 14 {
		t.Fatalf("tokens after retry = %d, want 14", got)
	}
}

func TestChatBursts(t *testing.T) {
	s := start(t, Config{Tokens: 5})
	req := chatReq("b")
	req.Metadata = map[string]string{MetaBurstTokens: "2", MetaSilence: "60ms"}
	t0 := time.Now()
	// silences before tokens 0, 2 and 4
	if r := readChat(t, client(t, s), req); r.err != io.EOF || r.text != want("sim", "b", 0, 5) {
		t.Fatalf("%v %q", r.err, r.text)
	}
	if el := time.Since(t0); el < 180*time.Millisecond {
		t.Fatalf("bursts not separated by silences: %v", el)
	}
}

// TestClientGoneStopsGeneration: a non-background stream stops producing
// tokens when its client disconnects.
func TestClientGoneStopsGeneration(t *testing.T) {
	s := start(t, Config{Tokens: 400, TokensPerSecond: 200})
	st, err := client(t, s).CreateChatCompletionStream(ctxT(t), chatReq("g"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	var n int64
	waitFor(t, func() bool {
		m := s.Stats().TokensGenerated
		stable := m == n
		n = m
		time.Sleep(50 * time.Millisecond)
		return stable
	})
	if n >= 100 {
		t.Fatalf("generation went on after the client left: %d tokens", n)
	}
}
