// Rate limits: the simulator answers like a rate-limited account (Config.Limits).

package sim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noderun/noderun/provider"
)

// headerForm is how an endpoint reports its limits: the provider it
// imitates.
type headerForm int

const (
	formOpenAI    headerForm = iota // x-ratelimit-*, retry-after-ms; OpenAI's error body
	formAnthropic                   // anthropic-ratelimit-*; Anthropic's error body
	formGoogle                      // no headers but Retry-After on a 429; Google's error body
)

// limiter holds every key's buckets. One mutex guards them: a generation
// request takes it once, never per token, which is cheap beside the
// request's JSON; a Server without Limits has no limiter at all.
type limiter struct {
	reqCap, tokCap float64 // capacities; 0 = unlimited
	window         time.Duration
	now            func() time.Time // the limiter's clock (tests set it)

	mu   sync.Mutex
	keys map[string]*keyBuckets
	// sweepAt is the map size at which full buckets are dropped: a full
	// bucket is what a key never seen gets, so forgetting it changes
	// nothing, and a client inventing keys cannot grow the map for good.
	sweepAt int
}

type keyBuckets struct {
	requests, tokens bucket
}

// bucket is a token bucket; level is what it holds at time at.
type bucket struct {
	level float64
	at    time.Time
}

func newLimiter(l Limits) *limiter {
	if l.Window <= 0 {
		l.Window = DefaultLimitWindow
	}
	return &limiter{reqCap: float64(l.RequestsPerWindow), tokCap: float64(l.TokensPerWindow),
		window: l.Window, now: time.Now, keys: map[string]*keyBuckets{}, sweepAt: 1024}
}

// slack absorbs float rounding: a client that waited exactly the time it
// was told finds the bucket holding what it needs.
const slack = 1e-9

// fill brings b up to date at now.
func (b *bucket) fill(capacity float64, window time.Duration, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.level = min(capacity, b.level+capacity*d.Seconds()/window.Seconds())
	}
	b.at = now
}

// wait is how long until b holds need (0 if it does).
func (b *bucket) wait(capacity, need float64, window time.Duration) time.Duration {
	if b.level+slack >= need {
		return 0
	}
	return ceilDuration((need - b.level) / capacity * window.Seconds())
}

// state is what b reports: remaining is its floor, reset the time until it
// is full again.
func (b *bucket) state(capacity float64, window time.Duration) limitState {
	st := limitState{limit: int64(capacity), remaining: int64(math.Floor(b.level + slack))}
	if b.level+slack < capacity {
		st.reset = ceilDuration((capacity - b.level) / capacity * window.Seconds())
	}
	return st
}

// ceilDuration rounds seconds up to a Duration, except for float noise: a
// wait that is a whole number of nanoseconds but for 1e-15 of its size
// stays that number.
func ceilDuration(seconds float64) time.Duration {
	ns := seconds * float64(time.Second)
	if r := math.Round(ns); math.Abs(ns-r) < 1e-3 {
		return time.Duration(r)
	}
	return time.Duration(math.Ceil(ns))
}

// limitState is one limit as a response reports it.
type limitState struct {
	limit, remaining int64
	reset            time.Duration // until full
}

// verdict is the limiter's answer to one request.
type verdict struct {
	ok bool
	// retryAfter is how long until both buckets hold what the request
	// needs; 0 with !ok when it needs more tokens than the bucket can ever
	// hold.
	retryAfter       time.Duration
	requests, tokens *limitState // after the deduction; nil for an unlimited one
	at               time.Time   // the limiter's clock when it decided
	// tooLarge: the request needs more tokens than the bucket's capacity
	tooLarge bool
	// tokenLimitReached: the token bucket said no (for the message)
	tokenLimitReached bool
}

// take charges key one request and tokens tokens if both buckets hold
// them, and reports the state after.
func (l *limiter) take(key string, tokens int) verdict {
	need := float64(max(tokens, 0))
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	kb := l.keys[key]
	if kb == nil {
		l.sweepLocked(now)
		kb = &keyBuckets{requests: bucket{l.reqCap, now}, tokens: bucket{l.tokCap, now}}
		l.keys[key] = kb
	}
	v := verdict{ok: true, at: now}
	var waitReq, waitTok time.Duration
	if l.reqCap > 0 {
		kb.requests.fill(l.reqCap, l.window, now)
		waitReq = kb.requests.wait(l.reqCap, 1, l.window)
	}
	if l.tokCap > 0 {
		kb.tokens.fill(l.tokCap, l.window, now)
		if need > l.tokCap {
			v.ok, v.tooLarge, v.tokenLimitReached = false, true, true
		} else {
			waitTok = kb.tokens.wait(l.tokCap, need, l.window)
		}
	}
	if waitReq > 0 || waitTok > 0 {
		v.ok = false
		v.tokenLimitReached = v.tokenLimitReached || waitTok > waitReq
	}
	if !v.ok && !v.tooLarge {
		v.retryAfter = max(waitReq, waitTok)
	}
	if v.ok {
		kb.requests.level = max(kb.requests.level-1, 0)
		kb.tokens.level = max(kb.tokens.level-need, 0)
	}
	if l.reqCap > 0 {
		st := kb.requests.state(l.reqCap, l.window)
		v.requests = &st
	}
	if l.tokCap > 0 {
		st := kb.tokens.state(l.tokCap, l.window)
		v.tokens = &st
	}
	return v
}

// sweepLocked drops the buckets that are full at now, when the map has
// grown to sweepAt.
func (l *limiter) sweepLocked(now time.Time) {
	if len(l.keys) < l.sweepAt {
		return
	}
	for k, kb := range l.keys {
		kb.requests.fill(l.reqCap, l.window, now)
		kb.tokens.fill(l.tokCap, l.window, now)
		if kb.requests.level >= l.reqCap && kb.tokens.level >= l.tokCap {
			delete(l.keys, k)
		}
	}
	l.sweepAt = max(1024, 2*len(l.keys))
}

// reset refills every bucket.
func (l *limiter) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = map[string]*keyBuckets{}
	l.sweepAt = 1024
}

// apiKey is the key a request's limits are counted under: its bearer
// token, else x-api-key (Anthropic), else x-goog-api-key or the key query
// parameter (Google). A request without any has the key "".
func apiKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			return strings.TrimSpace(a[7:])
		}
		return a
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// admit applies Config.Limits to a generation request for node costing
// tokens (its input and the output it will be answered with). It sets the
// rate-limit headers of form on w and reports true, or answers 429 and
// reports false. Without Limits it does nothing.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, endpoint, node string, form headerForm, tokens int) bool {
	if s.limits == nil {
		return true
	}
	v := s.limits.take(apiKey(r), tokens)
	h := w.Header()
	switch form {
	case formOpenAI:
		openAIHeaders(h, v)
	case formAnthropic:
		anthropicHeaders(h, v)
	}
	if v.ok {
		return true
	}
	s.stats.rateLimited(node)
	msg := limitMessage(v, s.limits, tokens)
	if !v.tooLarge {
		secs := int64(math.Ceil(v.retryAfter.Seconds()))
		h.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		if form == formOpenAI {
			ms := int64(math.Ceil(float64(v.retryAfter) / float64(time.Millisecond)))
			h.Set("Retry-After-Ms", strconv.FormatInt(max(ms, 1), 10))
		}
	}
	s.log.Info("simulated rate limit: "+msg, "endpoint", endpoint, "node", node, "retry_after", v.retryAfter)
	switch form {
	case formAnthropic:
		writeAnthropicError(w, http.StatusTooManyRequests, msg)
	case formGoogle:
		writeGeminiRateLimit(w, msg, v)
	default:
		writeError(w, http.StatusTooManyRequests, msg, "")
	}
	return false
}

// limitMessage is the 429's message, in the words of OpenAI's.
func limitMessage(v verdict, l *limiter, tokens int) string {
	per := "min"
	if l.window != time.Minute {
		per = l.window.String()
	}
	switch {
	case v.tooLarge:
		return fmt.Sprintf("sim: Request too large on tokens per %s (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.", per, int64(l.tokCap), tokens)
	case v.tokenLimitReached:
		return fmt.Sprintf("sim: Rate limit reached on tokens per %s (TPM): Limit %d, Used %d, Requested %d. Please try again in %s.",
			per, v.tokens.limit, v.tokens.limit-v.tokens.remaining, tokens, v.retryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("sim: Rate limit reached on requests per %s (RPM): Limit %d, Used %d, Requested 1. Please try again in %s.",
		per, v.requests.limit, v.requests.limit-v.requests.remaining, v.retryAfter.Round(time.Millisecond))
}

// generationCost is what a Responses or Interactions request costs: its
// input tokens and the output it will be answered with, reasoning
// included, as its usage will report them.
func generationCost(prompt string, tokens int, effort string) int {
	cost := provider.EstimateTokens(prompt) + tokens
	if effort != "" {
		cost += reasoningTokens(effort)
	}
	return cost
}

// openAIHeaders sets OpenAI's x-ratelimit-* headers.
func openAIHeaders(h http.Header, v verdict) {
	set := func(name string, st *limitState) {
		if st == nil {
			return
		}
		h.Set("X-Ratelimit-Limit-"+name, strconv.FormatInt(st.limit, 10))
		h.Set("X-Ratelimit-Remaining-"+name, strconv.FormatInt(st.remaining, 10))
		h.Set("X-Ratelimit-Reset-"+name, openAIReset(st.reset))
	}
	set("Requests", v.requests)
	set("Tokens", v.tokens)
}

// openAIReset formats a reset as OpenAI does ("12ms", "7.66s", "6m0s"):
// a Go duration rounded up to the millisecond below a second, to 10ms below
// a minute, to the second above.
func openAIReset(d time.Duration) string {
	unit := time.Second
	switch {
	case d < time.Second:
		unit = time.Millisecond
	case d < time.Minute:
		unit = 10 * time.Millisecond
	}
	return ((d + unit - 1) / unit * unit).String()
}

// anthropicHeaders sets Anthropic's anthropic-ratelimit-* headers; the
// simulator's one token bucket counts input and output tokens together,
// which is what Anthropic's anthropic-ratelimit-tokens-* report.
func anthropicHeaders(h http.Header, v verdict) {
	set := func(name string, st *limitState) {
		if st == nil {
			return
		}
		h.Set("Anthropic-Ratelimit-"+name+"-Limit", strconv.FormatInt(st.limit, 10))
		h.Set("Anthropic-Ratelimit-"+name+"-Remaining", strconv.FormatInt(st.remaining, 10))
		h.Set("Anthropic-Ratelimit-"+name+"-Reset", anthropicReset(v.at, st.reset))
	}
	set("Requests", v.requests)
	set("Tokens", v.tokens)
}

// anthropicReset is the RFC 3339 time at which a limit is full again, in
// UTC to the millisecond, rounded up.
func anthropicReset(at time.Time, d time.Duration) string {
	t := at.Add(d).UTC()
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		t = r.Add(time.Millisecond)
	}
	return t.Format("2006-01-02T15:04:05.000Z07:00")
}

// writeGeminiRateLimit answers Google's 429: RESOURCE_EXHAUSTED, with the
// delay also in a google.rpc.RetryInfo detail, where Google's clients look
// for it.
func writeGeminiRateLimit(w http.ResponseWriter, msg string, v verdict) {
	e := map[string]any{"code": http.StatusTooManyRequests, "message": msg, "status": geminiStatus(http.StatusTooManyRequests)}
	if !v.tooLarge {
		secs := math.Ceil(v.retryAfter.Seconds())
		e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": strconv.FormatFloat(max(secs, 1), 'f', -1, 64) + "s"}}
	}
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": e})
}
