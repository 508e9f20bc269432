package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/ratelimit"
)

// fakeClock is a limiter clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// withClock makes a server's limiter read clk.
func withClock(clk *fakeClock) func(*Server) {
	return func(s *Server) { s.limits.now = clk.now }
}

func TestLimiterBuckets(t *testing.T) {
	type step struct {
		advance time.Duration
		key     string
		tokens  int
		ok      bool
		retry   time.Duration // when !ok
		req     limitState    // after the step
		tok     limitState
	}
	for _, tc := range []struct {
		name   string
		limits Limits
		steps  []step
	}{
		{
			name:   "requests burst, then refill at capacity per window",
			limits: Limits{RequestsPerWindow: 3, TokensPerWindow: 100},
			steps: []step{
				{key: "a", tokens: 10, ok: true, req: limitState{3, 2, 20 * time.Second}, tok: limitState{100, 90, 6 * time.Second}},
				{key: "a", tokens: 10, ok: true, req: limitState{3, 1, 40 * time.Second}, tok: limitState{100, 80, 12 * time.Second}},
				{key: "a", tokens: 10, ok: true, req: limitState{3, 0, 60 * time.Second}, tok: limitState{100, 70, 18 * time.Second}},
				// nothing deducted on a 429; it says when one request is back
				{key: "a", tokens: 10, ok: false, retry: 20 * time.Second, req: limitState{3, 0, 60 * time.Second}, tok: limitState{100, 70, 18 * time.Second}},
				{advance: 19 * time.Second, key: "a", tokens: 10, ok: false, retry: time.Second, req: limitState{3, 0, 41 * time.Second}, tok: limitState{100, 100, 0}},
				{advance: time.Second, key: "a", tokens: 10, ok: true, req: limitState{3, 0, 60 * time.Second}, tok: limitState{100, 90, 6 * time.Second}},
				// another key has buckets of its own
				{key: "b", tokens: 0, ok: true, req: limitState{3, 2, 20 * time.Second}, tok: limitState{100, 100, 0}},
			},
		},
		{
			name:   "tokens bound with requests left",
			limits: Limits{RequestsPerWindow: 100, TokensPerWindow: 100, Window: 10 * time.Second},
			steps: []step{
				{key: "k", tokens: 60, ok: true, req: limitState{100, 99, 100 * time.Millisecond}, tok: limitState{100, 40, 6 * time.Second}},
				// 50 needs 10 more: 10/100 of the window
				{key: "k", tokens: 50, ok: false, retry: time.Second, req: limitState{100, 99, 100 * time.Millisecond}, tok: limitState{100, 40, 6 * time.Second}},
				{advance: time.Second, key: "k", tokens: 50, ok: true, req: limitState{100, 99, 100 * time.Millisecond}, tok: limitState{100, 0, 10 * time.Second}},
				// more than the bucket can ever hold: no retry helps
				{advance: time.Hour, key: "k", tokens: 101, ok: false, retry: 0, req: limitState{100, 100, 0}, tok: limitState{100, 100, 0}},
			},
		},
		{
			name:   "unlimited requests",
			limits: Limits{TokensPerWindow: 10, Window: time.Second},
			steps: []step{
				{key: "", tokens: 10, ok: true, tok: limitState{10, 0, time.Second}},
				{key: "", tokens: 1, ok: false, retry: 100 * time.Millisecond, tok: limitState{10, 0, time.Second}},
				{advance: 250 * time.Millisecond, key: "", tokens: 1, ok: true, tok: limitState{10, 1, 850 * time.Millisecond}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			l := newLimiter(tc.limits)
			l.now = clk.now
			for i, st := range tc.steps {
				clk.advance(st.advance)
				v := l.take(st.key, st.tokens)
				if v.ok != st.ok || !v.ok && v.retryAfter != st.retry || v.tooLarge != (!st.ok && st.retry == 0) {
					t.Fatalf("step %d: ok %v retry %v tooLarge %v, want ok %v retry %v", i, v.ok, v.retryAfter, v.tooLarge, st.ok, st.retry)
				}
				if got := deref(v.requests); got != st.req {
					t.Errorf("step %d: requests %+v, want %+v", i, got, st.req)
				}
				if got := deref(v.tokens); got != st.tok {
					t.Errorf("step %d: tokens %+v, want %+v", i, got, st.tok)
				}
			}
		})
	}
}

func deref(st *limitState) limitState {
	if st == nil {
		return limitState{}
	}
	return *st
}

// TestLimiterSweep: keys whose buckets are full again are forgotten, so
// clients inventing keys cannot grow the map for good.
func TestLimiterSweep(t *testing.T) {
	clk := newFakeClock()
	l := newLimiter(Limits{RequestsPerWindow: 1, Window: time.Second})
	l.now = clk.now
	for i := range 5000 {
		l.take(strconv.Itoa(i), 0)
		if i%100 == 99 {
			clk.advance(2 * time.Second)
		}
	}
	if n := len(l.keys); n > 1100 {
		t.Fatalf("%d keys kept", n)
	}
	// a key still draining is kept: its next request is refused
	clk.advance(2 * time.Second)
	l.take("busy", 0)
	for i := range 3000 {
		l.take("x"+strconv.Itoa(i), 0)
	}
	if v := l.take("busy", 0); v.ok {
		t.Fatal("a draining key was forgotten")
	}
}

func TestResetFormats(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{time.Nanosecond, "1ms"},
		{12*time.Millisecond + 300*time.Microsecond, "13ms"},
		{999*time.Millisecond + 1, "1s"},
		{7654 * time.Millisecond, "7.66s"},
		{59*time.Second + 995*time.Millisecond + 1, "1m0s"},
		{6 * time.Minute, "6m0s"},
		{90*time.Second + 1, "1m31s"},
	} {
		if got := openAIReset(tc.d); got != tc.want {
			t.Errorf("openAIReset(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "2026-03-01T11:00:00.000Z"},
		{1500 * time.Millisecond, "2026-03-01T11:00:01.500Z"},
		{time.Microsecond, "2026-03-01T11:00:00.001Z"},
	} {
		if got := anthropicReset(at, tc.d); got != tc.want {
			t.Errorf("anthropicReset(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestApiKey(t *testing.T) {
	for _, tc := range []struct {
		h     http.Header
		query string
		want  string
	}{
		{http.Header{"Authorization": {"Bearer sk-1"}}, "", "sk-1"},
		{http.Header{"Authorization": {"bearer  sk-2"}}, "", "sk-2"},
		{http.Header{"Authorization": {"Basic abc"}}, "", "Basic abc"},
		{http.Header{"X-Api-Key": {"ant-1"}}, "", "ant-1"},
		{http.Header{"X-Goog-Api-Key": {"goog-1"}}, "", "goog-1"},
		{http.Header{}, "key=goog-2", "goog-2"},
		{http.Header{}, "", ""},
	} {
		r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/x?"+tc.query, nil)
		r.Header = tc.h
		if got := apiKey(r); got != tc.want {
			t.Errorf("apiKey(%v %q) = %q, want %q", tc.h, tc.query, got, tc.want)
		}
	}
}

// rawAnswer is one raw generation request's answer.
type rawAnswer struct {
	status int
	h      http.Header
	body   []byte
	sent   time.Time // just before the request went out
	got    time.Time // when the answer's headers were in
}

// send POSTs body as JSON to url with headers kv..., and reads the whole answer.
func send(t testing.TB, url string, body any, kv ...string) rawAnswer {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	a := rawAnswer{sent: time.Now()}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	a.got = time.Now()
	defer resp.Body.Close()
	a.body, _ = io.ReadAll(resp.Body)
	a.status, a.h = resp.StatusCode, resp.Header
	return a
}

func chatBody(input string) map[string]any {
	return map[string]any{"model": "sim", "messages": []any{map[string]any{"role": "user", "content": input}}}
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// TestLimitsOpenAIHeaders: with the sim's clock held still, the headers of
// a chat completion parse back to exactly the buckets' state, and the token
// cost is the usage the answer reports.
func TestLimitsOpenAIHeaders(t *testing.T) {
	clk := newFakeClock()
	s := start(t, Config{Tokens: 10, Limits: &Limits{RequestsPerWindow: 5, TokensPerWindow: 1000}}, withClock(clk))
	url := s.BaseURL() + "/chat/completions"
	a := send(t, url, chatBody("hello there"), bearer("sk-a")...)
	if a.status != http.StatusOK {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var out struct {
		Usage struct {
			Total int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil {
		t.Fatal(err)
	}
	cost := provider.EstimateTokens("hello there") + 10
	if out.Usage.Total != cost {
		t.Fatalf("usage total %d, want %d", out.Usage.Total, cost)
	}
	snap, ok := ratelimit.Parse(a.h, clk.now())
	want := ratelimit.Snapshot{
		Requests: ratelimit.Window{Limit: 5, Remaining: 4, Reset: 12 * time.Second},
		Tokens: ratelimit.Window{Limit: 1000, Remaining: int64(1000 - cost),
			Reset: time.Duration(cost) * time.Minute / 1000},
	}
	if !ok || snap != want {
		t.Fatalf("headers %v\nparse to %+v\nwant      %+v", a.h, snap, want)
	}
	if a.h.Get("X-Ratelimit-Reset-Requests") != "12s" || a.h.Get("Anthropic-Ratelimit-Requests-Limit") != "" {
		t.Errorf("headers %v", a.h)
	}
	// a streamed answer carries them too, sent before the first event
	st := chatBody("hello there")
	st["stream"] = true
	a = send(t, url, st, bearer("sk-a")...)
	if a.status != http.StatusOK || a.h.Get("X-Ratelimit-Remaining-Requests") != "3" ||
		a.h.Get("X-Ratelimit-Remaining-Tokens") != strconv.Itoa(1000-2*cost) {
		t.Fatalf("stream: %d %v", a.status, a.h)
	}
}

// TestLimitsBurstRetryAfter: a burst beyond the limit gets 429s with a
// Retry-After (and retry-after-ms); waiting that long is enough, in real time.
func TestLimitsBurstRetryAfter(t *testing.T) {
	s := start(t, Config{Tokens: 5, Limits: &Limits{RequestsPerWindow: 4, Window: time.Second}})
	url := s.BaseURL() + "/chat/completions"
	const burst = 20
	limited := 0
	var last rawAnswer
	began := time.Now()
	for range burst {
		a := send(t, url, chatBody("burst"), bearer("k")...)
		switch a.status {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			limited++
			last = a
		default:
			t.Fatalf("%d %s", a.status, a.body)
		}
	}
	// 4 from the full bucket, and what refilled at 4/s while the burst ran
	if maxOK := 4 + int(time.Since(began).Seconds()*4) + 1; burst-limited > maxOK || limited == 0 {
		t.Fatalf("%d of %d admitted, at most %d may be", burst-limited, burst, maxOK)
	}
	var e struct {
		Error struct {
			Type, Code, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(last.body, &e); err != nil || e.Error.Code != "rate_limit_exceeded" ||
		!strings.Contains(e.Error.Message, "requests per 1s") {
		t.Fatalf("429 body %s", last.body)
	}
	snap, _ := ratelimit.Parse(last.h, last.got)
	ra, _ := strconv.Atoi(last.h.Get("Retry-After"))
	if snap.RetryAfter <= 0 || snap.RetryAfter > 250*time.Millisecond || ra != 1 ||
		snap.Requests.Remaining != 0 || snap.Requests.Limit != 4 {
		t.Fatalf("429 headers %v parse to %+v", last.h, snap)
	}
	time.Sleep(snap.RetryAfter)
	if a := send(t, url, chatBody("burst"), bearer("k")...); a.status != http.StatusOK {
		t.Fatalf("after retry-after-ms: %d %s", a.status, a.body)
	}
	if st := s.Stats(); st.RateLimited != int64(limited) || st.Requests[EndpointChat] != burst+1 {
		t.Fatalf("stats %+v, client saw %d 429s", st, limited)
	}
}

// TestLimitsRefillRate: the buckets refill at capacity per Window in real
// time. The sim's own reading of the elapsed time (from its reset headers)
// must fall within what the client measured around the two requests.
func TestLimitsRefillRate(t *testing.T) {
	const rpm, tpm = 20, 2000
	window := 2 * time.Second
	s := start(t, Config{Tokens: 40, Limits: &Limits{RequestsPerWindow: rpm, TokensPerWindow: tpm, Window: window}})
	url := s.BaseURL() + "/chat/completions"
	// half empty first, so that neither bucket is full again by b
	for range rpm / 2 {
		if a := send(t, url, chatBody("refill"), bearer("k")...); a.status != http.StatusOK {
			t.Fatalf("%d %s", a.status, a.body)
		}
	}
	a := send(t, url, chatBody("refill"), bearer("k")...)
	time.Sleep(300 * time.Millisecond)
	b := send(t, url, chatBody("refill"), bearer("k")...)
	if a.status != http.StatusOK || b.status != http.StatusOK {
		t.Fatalf("%d %d", a.status, b.status)
	}
	sa, _ := ratelimit.Parse(a.h, a.got)
	sb, _ := ratelimit.Parse(b.h, b.got)
	cost := provider.EstimateTokens("refill") + 40
	// Between the deductions the sim saw elapsed time e; each bucket's time
	// to full grew by one request's worth and shrank by e.
	for _, c := range []struct {
		name   string
		ra, rb time.Duration
		per    time.Duration // refill time of one request's cost
	}{
		{"requests", sa.Requests.Reset, sb.Requests.Reset, window / rpm},
		{"tokens", sa.Tokens.Reset, sb.Tokens.Reset, window * time.Duration(cost) / tpm},
	} {
		elapsed := c.ra + c.per - c.rb
		lo, hi := b.sent.Sub(a.got), b.got.Sub(a.sent)
		const rounding = 20 * time.Millisecond // resets are rounded up to 10ms
		if elapsed < lo-rounding || elapsed > hi+rounding {
			t.Errorf("%s: the sim refilled for %v, the client measured %v..%v (resets %v, %v)", c.name, elapsed, lo, hi, c.ra, c.rb)
		}
	}
	if sb.Requests.Reset <= 0 || sb.Tokens.Reset <= 0 {
		t.Errorf("a bucket was full again: %+v", sb)
	}
}

// TestLimitsPerKey: every key has its own buckets, whichever header names it.
func TestLimitsPerKey(t *testing.T) {
	clk := newFakeClock()
	s := start(t, Config{Tokens: 3, Limits: &Limits{RequestsPerWindow: 1}}, withClock(clk))
	chat := s.BaseURL() + "/chat/completions"
	msgs := s.BaseURL() + "/messages"
	mbody := map[string]any{"model": "claude-x", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for i, c := range []struct {
		url    string
		body   any
		kv     []string
		status int
	}{
		{chat, chatBody("x"), bearer("alice"), 200},
		{chat, chatBody("x"), bearer("alice"), 429},
		{chat, chatBody("x"), bearer("bob"), 200},
		{chat, chatBody("x"), nil, 200}, // "" is a key too
		{chat, chatBody("x"), nil, 429},
		{msgs, mbody, []string{"X-Api-Key", "alice"}, 429}, // the same key by another header
		{msgs, mbody, []string{"X-Api-Key", "carol"}, 200},
	} {
		if a := send(t, c.url, c.body, c.kv...); a.status != c.status {
			t.Fatalf("request %d: %d %s, want %d", i, a.status, a.body, c.status)
		}
	}
	if got := s.Stats().RateLimited; got != 3 {
		t.Fatalf("RateLimited %d, want 3", got)
	}
}

// TestLimitsTokensBound: a request whose tokens exceed what is left gets a
// 429 although requests are left; one larger than the whole bucket gets a
// 429 without Retry-After, since no wait helps.
func TestLimitsTokensBound(t *testing.T) {
	clk := newFakeClock()
	cost := provider.EstimateTokens("tokens") + 20
	s := start(t, Config{Tokens: 20, Limits: &Limits{RequestsPerWindow: 100, TokensPerWindow: 2*cost + cost/2}}, withClock(clk))
	url := s.BaseURL() + "/chat/completions"
	for i, want := range []int{200, 200, 429} {
		a := send(t, url, chatBody("tokens"), bearer("k")...)
		if a.status != want {
			t.Fatalf("request %d: %d %s", i, a.status, a.body)
		}
		if want != 429 {
			continue
		}
		snap, _ := ratelimit.Parse(a.h, clk.now())
		left := int64(cost / 2)
		wantWait := time.Duration(cost-int(left)) * time.Minute / time.Duration(2*cost+cost/2)
		if snap.Requests.Remaining != 98 || snap.Tokens.Remaining != left ||
			snap.RetryAfter < wantWait || snap.RetryAfter > wantWait+time.Millisecond ||
			!strings.Contains(string(a.body), "tokens per min (TPM)") {
			t.Fatalf("429: %+v (want wait %v) %s", snap, wantWait, a.body)
		}
	}
	big := chatBody("tokens")
	big["metadata"] = map[string]any{MetaTokens: 1000}
	a := send(t, url, big, bearer("k")...)
	if a.status != 429 || a.h.Get("Retry-After") != "" || !strings.Contains(string(a.body), "Request too large") {
		t.Fatalf("too large: %d %v %s", a.status, a.h, a.body)
	}
}

// TestLimitsAnthropic: /v1/messages reports Anthropic's header form, with
// absolute resets, and answers its own 429 body.
func TestLimitsAnthropic(t *testing.T) {
	clk := newFakeClock()
	s := start(t, Config{Tokens: 8, Limits: &Limits{RequestsPerWindow: 2, TokensPerWindow: 600, Window: 30 * time.Second}}, withClock(clk))
	url := s.BaseURL() + "/messages"
	body := map[string]any{"model": "claude-x", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": "anthropic"}}}
	cost := provider.EstimateTokens("anthropic") + 8
	a := send(t, url, body, "X-Api-Key", "ant")
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if a.h.Get("Anthropic-Ratelimit-Requests-Reset") != "2026-03-01T12:00:15.000Z" || a.h.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Fatalf("headers %v", a.h)
	}
	snap, _ := ratelimit.Parse(a.h, clk.now())
	want := ratelimit.Snapshot{
		Requests: ratelimit.Window{Limit: 2, Remaining: 1, Reset: 15 * time.Second},
		Tokens:   ratelimit.Window{Limit: 600, Remaining: int64(600 - cost), Reset: time.Duration(cost) * 30 * time.Second / 600},
	}
	if snap != want {
		t.Fatalf("parse %+v\nwant  %+v", snap, want)
	}
	body["stream"] = true
	if a := send(t, url, body, "X-Api-Key", "ant"); a.status != 200 || a.h.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" {
		t.Fatalf("stream: %d %v", a.status, a.h)
	}
	clk.advance(time.Second)
	a = send(t, url, body, "X-Api-Key", "ant")
	var e struct {
		Type  string                `json:"type"`
		Error struct{ Type string } `json:"error"`
	}
	if a.status != 429 || json.Unmarshal(a.body, &e) != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" ||
		a.h.Get("Retry-After") != "14" || a.h.Get("Retry-After-Ms") != "" {
		t.Fatalf("429: %d %v %s", a.status, a.h, a.body)
	}
	if snap, _ := ratelimit.Parse(a.h, clk.now()); snap.Requests.Remaining != 0 || snap.Requests.Reset != 29*time.Second {
		t.Fatalf("429 parses to %+v", snap)
	}
}

// TestLimitsGeminiAndResponses: Gemini endpoints send no rate-limit headers
// but Retry-After on a 429, in Google's error body; the Responses and
// Interactions create endpoints cost a request; polls, resumes and cancels
// cost nothing.
func TestLimitsGeminiAndResponses(t *testing.T) {
	clk := newFakeClock()
	s := start(t, Config{Tokens: 4, Limits: &Limits{RequestsPerWindow: 2}}, withClock(clk))
	base := "http://" + s.Addr()
	gem := map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "g"}}}}}
	gemURL := base + "/v1beta/models/gemini-x:generateContent"
	if a := send(t, gemURL, gem, "X-Goog-Api-Key", "g"); a.status != 200 || a.h.Get("X-Ratelimit-Limit-Requests") != "" || a.h.Get("Retry-After") != "" {
		t.Fatalf("gemini: %d %v %s", a.status, a.h, a.body)
	}
	inter := map[string]any{"model": "gemini-x", "input": "i", "background": true, "stream": true}
	if a := send(t, base+"/v1beta/interactions", inter, "X-Goog-Api-Key", "g"); a.status != 200 {
		t.Fatalf("interaction: %d %s", a.status, a.body)
	}
	a := send(t, base+"/v1beta/models/gemini-x:streamGenerateContent?alt=sse", gem, "X-Goog-Api-Key", "g")
	var e struct {
		Error struct {
			Code    int
			Status  string
			Details []map[string]any
		}
	}
	if a.status != 429 || json.Unmarshal(a.body, &e) != nil || e.Error.Status != "RESOURCE_EXHAUSTED" ||
		a.h.Get("Retry-After") != "30" || len(e.Error.Details) != 1 || e.Error.Details[0]["retryDelay"] != "30s" {
		t.Fatalf("gemini 429: %d %v %s", a.status, a.h, a.body)
	}

	resp := map[string]any{"model": "sim", "input": "r", "background": true}
	a = send(t, s.BaseURL()+"/responses", resp, bearer("o")...)
	if a.status != 200 || a.h.Get("X-Ratelimit-Remaining-Requests") != "1" {
		t.Fatalf("responses: %d %v %s", a.status, a.h, a.body)
	}
	var created struct{ ID string }
	_ = json.Unmarshal(a.body, &created)
	if a = send(t, s.BaseURL()+"/responses", resp, bearer("o")...); a.status != 200 {
		t.Fatalf("responses 2: %d", a.status)
	}
	// the bucket is empty: a poll, a cancel and a resume still answer
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, s.BaseURL()+"/responses/"+created.ID, nil)
		req.Header.Set("Authorization", "Bearer o")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 || r.Header.Get("X-Ratelimit-Limit-Requests") != "" {
			t.Fatalf("poll: %d %v", r.StatusCode, r.Header)
		}
	}
	if a := send(t, s.BaseURL()+"/responses/"+created.ID+"/cancel", nil, bearer("o")...); a.status != 200 {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	if a := send(t, s.BaseURL()+"/responses", resp, bearer("o")...); a.status != 429 || a.h.Get("Retry-After-Ms") != "30000" {
		t.Fatalf("responses 3: %d %v", a.status, a.h)
	}
	st := s.Stats()
	if st.RateLimited != 2 || st.ResponsesCreated != 2 || st.InteractionsCreated != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLimitsFaultsFirst: a fault that answers a status acts before the
// limits and costs nothing; Stats count the two apart.
func TestLimitsFaultsFirst(t *testing.T) {
	clk := newFakeClock()
	s := start(t, Config{Tokens: 2, Limits: &Limits{RequestsPerWindow: 1},
		Faults: []Fault{{Endpoint: EndpointChat, Requests: []int{1}, Kind: FaultStatus, Status: 429, RetryAfter: "7"}}},
		withClock(clk))
	url := s.BaseURL() + "/chat/completions"
	for i, want := range []struct {
		status     int
		retryAfter string
	}{{429, "7"}, {200, ""}, {429, "60"}} {
		a := send(t, url, chatBody("f"), "X-Noderun-Node", "n1")
		if a.status != want.status || a.h.Get("Retry-After") != want.retryAfter {
			t.Fatalf("request %d: %d %v %s", i+1, a.status, a.h, a.body)
		}
		if i == 0 && a.h.Get("X-Ratelimit-Limit-Requests") != "" {
			t.Fatalf("a status fault reported limits: %v", a.h)
		}
	}
	st := s.Stats()
	if st.RateLimited != 1 || st.Faults[string(FaultStatus)] != 1 || st.Nodes["n1"].RateLimited != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Reset refills the buckets and zeroes the counter
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if a := send(t, url, chatBody("f")); a.status != 200 || s.Stats().RateLimited != 0 {
		t.Fatalf("after Reset: %d %+v", a.status, s.Stats())
	}
}

// TestLimitsConcurrent: concurrent requests of one key are admitted exactly
// up to the limit, and RateLimited counts exactly the 429s the clients saw.
func TestLimitsConcurrent(t *testing.T) {
	const n, limit = 60, 25
	s := start(t, Config{Tokens: 3, Limits: &Limits{RequestsPerWindow: limit, Window: time.Hour}})
	url := s.BaseURL() + "/chat/completions"
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := chatBody("c")
			body["stream"] = i%2 == 0
			switch a := send(t, url, body, "X-Noderun-Node", "c"); a.status {
			case 200:
				ok.Add(1)
			case 429:
				limited.Add(1)
			default:
				t.Errorf("%d %s", a.status, a.body)
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if ok.Load() != limit || limited.Load() != n-limit || st.RateLimited != n-limit || st.Nodes["c"].RateLimited != n-limit {
		t.Fatalf("ok %d, limited %d, stats %d / node %d", ok.Load(), limited.Load(), st.RateLimited, st.Nodes["c"].RateLimited)
	}
}

// TestNoLimitsNoHeaders: without Limits nothing changes.
func TestNoLimitsNoHeaders(t *testing.T) {
	s := start(t, Config{Tokens: 2})
	for range 3 {
		a := send(t, s.BaseURL()+"/chat/completions", chatBody("n"))
		if _, ok := ratelimit.Parse(a.h, time.Now()); a.status != 200 || ok {
			t.Fatalf("%d %v", a.status, a.h)
		}
	}
	if s.limits != nil {
		t.Fatal("a limiter without Limits")
	}
}

// TestLimitsConfig: what the server makes of Limits the config left
// partly unset or invalid (decoding is simconfig's TestLimitsConfig).
func TestLimitsConfig(t *testing.T) {
	if cfg, err := ParseConfig([]byte("limits: {requests_per_minute: 3}\n")); err != nil || cfg.Limits.Window != 0 ||
		newLimiter(*cfg.Limits).window != time.Minute {
		t.Fatalf("%+v %v", cfg.Limits, err)
	}
	s := New(Config{Limits: &Limits{Window: -time.Second}})
	if err := s.Start(""); err == nil || !strings.Contains(err.Error(), "window must not be negative") {
		t.Fatalf("Start with bad limits: %v", err)
	}
	s.Close()
}

// ExampleLimits is how a test makes the simulator a rate-limited account.
func ExampleLimits() {
	s := New(Config{Limits: &Limits{RequestsPerWindow: 1, Window: time.Second}})
	if err := s.Start(""); err != nil {
		panic(err)
	}
	defer s.Close()
	for range 2 {
		b, _ := json.Marshal(chatBody("hi"))
		resp, err := http.Post(s.BaseURL()+"/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d remaining=%s retry-after=%q\n", resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining-Requests"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="1"
}

// BenchmarkLimiterTake: what Limits add to a generation request, with
// every core asking at once (one key, the contended case).
func BenchmarkLimiterTake(b *testing.B) {
	l := newLimiter(Limits{RequestsPerWindow: 1 << 30, TokensPerWindow: 1 << 30})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.take("sk", 300)
		}
	})
}
