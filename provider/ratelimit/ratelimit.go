// Package ratelimit: TEMPORARY stub until the simlimits branch lands.
package ratelimit

import (
	"net/http"
	"time"
)

type Window struct {
	Limit, Remaining int64
	Reset            time.Duration
}

func (w Window) Known() bool { return w.Limit > 0 }

type Snapshot struct {
	Requests, Tokens, InputTokens, OutputTokens Window
	RetryAfter                                  time.Duration
}

func Parse(h http.Header, now time.Time) (Snapshot, bool) { return Snapshot{}, false }
