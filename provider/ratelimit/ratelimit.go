// Package ratelimit reads the rate-limit state that LLM providers report in
// their response headers, so that a client can pace itself to the limits the
// provider announces instead of learning them from 429s.
//
// The headers are untrusted input: every field is read on its own, and a
// value that is missing, negative or not a number is left out (zero) without
// affecting the others. Absurdly large values are capped (MaxCount,
// MaxDuration), so that a bad header cannot make a client wait for years.
//
// # Forms
//
// OpenAI (https://platform.openai.com/docs/guides/rate-limits, "Rate limits
// in headers"), on every response:
//
//	x-ratelimit-limit-requests: 60
//	x-ratelimit-remaining-requests: 59
//	x-ratelimit-reset-requests: 1s      time until the limit is back to its initial state
//	x-ratelimit-limit-tokens: 150000
//	x-ratelimit-remaining-tokens: 149984
//	x-ratelimit-reset-tokens: 6m0s
//
// The reset is a Go-style duration ("6m0s", "1s", "12ms", "7.66s"); a plain
// number is read as seconds and an RFC 3339 time as an absolute time, as
// some OpenAI-compatible servers send them. On a 429, OpenAI's SDKs also
// honour retry-after-ms (milliseconds, possibly fractional) before
// retry-after.
//
// Anthropic (https://docs.anthropic.com/en/api/rate-limits, "Response
// headers"), on every response:
//
//	anthropic-ratelimit-requests-limit / -remaining / -reset
//	anthropic-ratelimit-tokens-limit / -remaining / -reset          the most restrictive token limit in effect
//	anthropic-ratelimit-input-tokens-limit / -remaining / -reset    input tokens per minute
//	anthropic-ratelimit-output-tokens-limit / -remaining / -reset   output tokens per minute
//
// where reset is the RFC 3339 time at which the limit is fully replenished
// ("2025-01-15T14:24:00Z"); Parse turns it into a duration from now. On a
// 429 Anthropic sends retry-after (seconds).
//
// retry-after (RFC 9110 section 10.2.3) is seconds or an HTTP date.
//
// Google's Gemini API sends no rate-limit headers; its 429s carry the delay
// in the error body (google.rpc.RetryInfo), which this package does not read.
package ratelimit

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Caps on what a header can claim. They are far beyond any real limit, and
// keep arithmetic on the values from overflowing.
const (
	MaxCount    = int64(1) << 50
	MaxDuration = 7 * 24 * time.Hour
)

// Window is one limit's state as a response reported it.
type Window struct {
	Limit, Remaining int64
	// Reset is the time from the response until the limit is fully
	// replenished; 0 if not said (or already full).
	Reset time.Duration
}

// Known reports whether the response said what the limit is.
func (w Window) Known() bool { return w.Limit > 0 }

// Snapshot is the rate-limit state one response reported.
type Snapshot struct {
	Requests, Tokens, InputTokens, OutputTokens Window
	// RetryAfter is retry-after-ms, else retry-after; 0 if absent.
	RetryAfter time.Duration
}

// Parse reads h. ok is false when h carries no rate-limit header at all (not
// even an unreadable one). now is the time the response was received: it
// converts absolute reset times (Anthropic's, an HTTP-date retry-after) into
// durations; a time in the past is 0.
func Parse(h http.Header, now time.Time) (s Snapshot, ok bool) {
	window := func(family, name string) (Window, bool) {
		var w Window
		l, lok := value(h, family+"limit"+name)
		r, rok := value(h, family+"remaining"+name)
		z, zok := value(h, family+"reset"+name)
		if family == "anthropic-ratelimit-" {
			l, lok = value(h, family+name+"-limit")
			r, rok = value(h, family+name+"-remaining")
			z, zok = value(h, family+name+"-reset")
		}
		if lok {
			w.Limit = count(l)
		}
		if rok {
			w.Remaining = count(r)
		}
		if zok {
			w.Reset = resetDuration(z, now)
		}
		if w.Known() && w.Remaining > w.Limit {
			w.Remaining = w.Limit
		}
		present := lok || rok || zok
		ok = ok || present
		return w, present
	}
	s.Requests, _ = window("x-ratelimit-", "-requests")
	s.Tokens, _ = window("x-ratelimit-", "-tokens")
	// A response carries one family; should it carry both, Anthropic's wins.
	if w, present := window("anthropic-ratelimit-", "requests"); present {
		s.Requests = w
	}
	if w, present := window("anthropic-ratelimit-", "tokens"); present {
		s.Tokens = w
	}
	s.InputTokens, _ = window("anthropic-ratelimit-", "input-tokens")
	s.OutputTokens, _ = window("anthropic-ratelimit-", "output-tokens")

	if v, present := value(h, "retry-after-ms"); present {
		ok = true
		if ms, num := number(v); num {
			s.RetryAfter = capDuration(ms * float64(time.Millisecond))
		}
	}
	if v, present := value(h, "retry-after"); present {
		ok = true
		if s.RetryAfter == 0 {
			s.RetryAfter = retryAfter(v, now)
		}
	}
	return s, ok
}

// value is header name's first value, trimmed; present even when empty.
func value(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return strings.TrimSpace(vs[0]), true
}

// number reads a non-negative decimal number ("12", "7.66", "1e6"); a
// number too large for a float64 is +Inf. Signs, "NaN", "Inf" and hex are
// not numbers here.
func number(v string) (float64, bool) {
	if v == "" || (v[0] < '0' || v[0] > '9') && v[0] != '.' {
		return 0, false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !math.IsInf(f, 1) {
		return 0, false
	}
	return f, true
}

// count reads a count, capped at MaxCount; garbage is 0.
func count(v string) int64 {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return min(n, MaxCount)
	}
	f, ok := number(v) // "1e6", "12.0", or beyond int64
	switch {
	case !ok:
		return 0
	case f >= float64(MaxCount):
		return MaxCount
	}
	return int64(f)
}

// resetDuration reads a reset value: a Go duration ("6m0s", "20ms"), a
// number of seconds, or an RFC 3339 time.
func resetDuration(v string, now time.Time) time.Duration {
	if f, ok := number(v); ok {
		return seconds(f)
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return until(t, now)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0
	}
	return capDuration(float64(d))
}

// retryAfter reads retry-after: delay-seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if f, ok := number(v); ok {
		return seconds(f)
	}
	if t, err := http.ParseTime(v); err == nil {
		return until(t, now)
	}
	return 0
}

func seconds(f float64) time.Duration {
	if f < 0 || math.IsNaN(f) {
		return 0
	}
	return capDuration(f * float64(time.Second))
}

func until(t, now time.Time) time.Duration {
	if !t.After(now) {
		return 0
	}
	// Sub saturates instead of overflowing
	return capDuration(float64(t.Sub(now)))
}

// capDuration converts nanoseconds to a Duration no larger than MaxDuration.
func capDuration(ns float64) time.Duration {
	if ns <= 0 || math.IsNaN(ns) {
		return 0
	}
	if ns >= float64(MaxDuration) {
		return MaxDuration
	}
	return time.Duration(ns)
}
