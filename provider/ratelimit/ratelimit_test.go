package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

var now = time.Date(2025, 1, 15, 14, 23, 0, 0, time.UTC)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      http.Header
		want   Snapshot
		wantOK bool
	}{
		{
			name:   "none",
			h:      header("content-type", "application/json", "x-request-id", "req_1"),
			wantOK: false,
		},
		{
			// the example table of OpenAI's rate-limits guide
			name: "openai docs",
			h: header(
				"x-ratelimit-limit-requests", "60",
				"x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59",
				"x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s",
				"x-ratelimit-reset-tokens", "6m0s"),
			want: Snapshot{
				Requests: Window{Limit: 60, Remaining: 59, Reset: time.Second},
				Tokens:   Window{Limit: 150000, Remaining: 149984, Reset: 6 * time.Minute},
			},
			wantOK: true,
		},
		{
			// as a user posted them from a live chat completion, with the
			// extra usage-based family (ignored)
			name: "openai observed",
			h: header(
				"X-Ratelimit-Limit-Requests", "5000",
				"X-Ratelimit-Limit-Tokens", "160000",
				"X-Ratelimit-Limit-Tokens_usage_based", "160000",
				"X-Ratelimit-Remaining-Requests", "4999",
				"X-Ratelimit-Remaining-Tokens", "159976",
				"X-Ratelimit-Reset-Requests", "12ms",
				"X-Ratelimit-Reset-Tokens", "9ms"),
			want: Snapshot{
				Requests: Window{Limit: 5000, Remaining: 4999, Reset: 12 * time.Millisecond},
				Tokens:   Window{Limit: 160000, Remaining: 159976, Reset: 9 * time.Millisecond},
			},
			wantOK: true,
		},
		{
			name: "openai fractional and compound resets",
			h: header(
				"x-ratelimit-reset-requests", "1m30.5s",
				"x-ratelimit-reset-tokens", "7.66s"),
			want: Snapshot{
				Requests: Window{Reset: 90*time.Second + 500*time.Millisecond},
				Tokens:   Window{Reset: 7660 * time.Millisecond},
			},
			wantOK: true,
		},
		{
			name: "openai 429",
			h: header(
				"x-ratelimit-limit-requests", "60",
				"x-ratelimit-remaining-requests", "0",
				"x-ratelimit-reset-requests", "20ms",
				"retry-after", "1",
				"retry-after-ms", "20"),
			want: Snapshot{
				Requests:   Window{Limit: 60, Remaining: 0, Reset: 20 * time.Millisecond},
				RetryAfter: 20 * time.Millisecond,
			},
			wantOK: true,
		},
		{
			name:   "retry-after-ms fractional",
			h:      header("retry-after-ms", "1500.5"),
			want:   Snapshot{RetryAfter: 1500*time.Millisecond + 500*time.Microsecond},
			wantOK: true,
		},
		{
			name:   "reset as plain seconds",
			h:      header("x-ratelimit-reset-tokens", "2.5"),
			want:   Snapshot{Tokens: Window{Reset: 2500 * time.Millisecond}},
			wantOK: true,
		},
		{
			// the header names and forms of Anthropic's rate-limits page
			name: "anthropic",
			h: header(
				"anthropic-ratelimit-requests-limit", "4000",
				"anthropic-ratelimit-requests-remaining", "3201",
				"anthropic-ratelimit-requests-reset", "2025-01-15T14:24:00Z",
				"anthropic-ratelimit-tokens-limit", "400000",
				"anthropic-ratelimit-tokens-remaining", "312000",
				"anthropic-ratelimit-tokens-reset", "2025-01-15T14:23:15Z",
				"anthropic-ratelimit-input-tokens-limit", "320000",
				"anthropic-ratelimit-input-tokens-remaining", "300000",
				"anthropic-ratelimit-input-tokens-reset", "2025-01-15T14:23:15.250Z",
				"anthropic-ratelimit-output-tokens-limit", "80000",
				"anthropic-ratelimit-output-tokens-remaining", "12000",
				"anthropic-ratelimit-output-tokens-reset", "2025-01-15T15:23:15+01:00"),
			want: Snapshot{
				Requests:     Window{Limit: 4000, Remaining: 3201, Reset: time.Minute},
				Tokens:       Window{Limit: 400000, Remaining: 312000, Reset: 15 * time.Second},
				InputTokens:  Window{Limit: 320000, Remaining: 300000, Reset: 15250 * time.Millisecond},
				OutputTokens: Window{Limit: 80000, Remaining: 12000, Reset: 15 * time.Second},
			},
			wantOK: true,
		},
		{
			name: "anthropic 429",
			h: header(
				"anthropic-ratelimit-requests-limit", "50",
				"anthropic-ratelimit-requests-remaining", "0",
				"anthropic-ratelimit-requests-reset", "2025-01-15T14:23:01.2Z",
				"retry-after", "2"),
			want: Snapshot{
				Requests:   Window{Limit: 50, Remaining: 0, Reset: 1200 * time.Millisecond},
				RetryAfter: 2 * time.Second,
			},
			wantOK: true,
		},
		{
			name:   "anthropic reset in the past",
			h:      header("anthropic-ratelimit-tokens-reset", "2025-01-15T14:22:00Z"),
			want:   Snapshot{},
			wantOK: true,
		},
		{
			name:   "retry-after as an HTTP date",
			h:      header("Retry-After", "Wed, 15 Jan 2025 14:23:30 GMT"),
			want:   Snapshot{RetryAfter: 30 * time.Second},
			wantOK: true,
		},
		{
			name: "garbage field by field",
			h: header(
				"x-ratelimit-limit-requests", "sixty",
				"x-ratelimit-remaining-requests", "-3",
				"x-ratelimit-reset-requests", "soon",
				"x-ratelimit-limit-tokens", "1000",
				"x-ratelimit-remaining-tokens", "NaN",
				"x-ratelimit-reset-tokens", "-5s",
				"retry-after-ms", "Inf",
				"retry-after", "-1"),
			want:   Snapshot{Tokens: Window{Limit: 1000}},
			wantOK: true,
		},
		{
			name: "absurd values capped",
			h: header(
				"x-ratelimit-limit-tokens", "999999999999999999999999",
				"x-ratelimit-remaining-tokens", "1e300",
				"x-ratelimit-reset-tokens", "100000h",
				"retry-after", "1e30"),
			want: Snapshot{
				Tokens:     Window{Limit: MaxCount, Remaining: MaxCount, Reset: MaxDuration},
				RetryAfter: MaxDuration,
			},
			wantOK: true,
		},
		{
			name:   "remaining above limit",
			h:      header("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "11"),
			want:   Snapshot{Requests: Window{Limit: 10, Remaining: 10}},
			wantOK: true,
		},
		{
			name:   "empty values still say the provider reports limits",
			h:      header("x-ratelimit-limit-requests", ""),
			want:   Snapshot{},
			wantOK: true,
		},
		{
			name:   "whitespace",
			h:      header("x-ratelimit-limit-requests", " 60 ", "retry-after", " 3"),
			want:   Snapshot{Requests: Window{Limit: 60}, RetryAfter: 3 * time.Second},
			wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.h, now)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("Parse = %+v, %v\nwant    %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestWindowKnown(t *testing.T) {
	for _, tc := range []struct {
		w    Window
		want bool
	}{
		{Window{}, false},
		{Window{Remaining: 5, Reset: time.Second}, false},
		{Window{Limit: 1}, true},
	} {
		if got := tc.w.Known(); got != tc.want {
			t.Errorf("%+v.Known() = %v", tc.w, got)
		}
	}
}

// FuzzParse: the headers come from the network; Parse must never panic,
// and what it returns stays within its documented bounds.
func FuzzParse(f *testing.F) {
	f.Add("x-ratelimit-reset-tokens", "6m0s", "retry-after-ms", "20")
	f.Add("anthropic-ratelimit-requests-reset", "2025-01-15T14:24:00Z", "retry-after", "2")
	f.Add("x-ratelimit-limit-requests", "1e400", "retry-after", "Wed, 15 Jan 2025 14:23:30 GMT")
	f.Add("anthropic-ratelimit-output-tokens-remaining", "-0", "x-ratelimit-reset-requests", "9223372036854775807ns")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		h := http.Header{}
		h.Add(k1, v1)
		h.Add(k2, v2)
		s, _ := Parse(h, now)
		for _, w := range []Window{s.Requests, s.Tokens, s.InputTokens, s.OutputTokens} {
			if w.Limit < 0 || w.Limit > MaxCount || w.Remaining < 0 || w.Remaining > MaxCount ||
				w.Reset < 0 || w.Reset > MaxDuration || w.Known() && w.Remaining > w.Limit {
				t.Fatalf("out of bounds: %+v from %q=%q %q=%q", w, k1, v1, k2, v2)
			}
		}
		if s.RetryAfter < 0 || s.RetryAfter > MaxDuration {
			t.Fatalf("RetryAfter %v from %q=%q %q=%q", s.RetryAfter, k1, v1, k2, v2)
		}
	})
}
