package runner

import (
	"errors"
	"sync"
	"time"
)

// ErrBreakerOpen is the error of an attempt refused by an open circuit
// breaker: the request was never sent.
var ErrBreakerOpen = errors.New("circuit breaker open: the provider is refusing connections")

// breaker is a circuit breaker for one provider endpoint, shared by every
// node of a run. After threshold consecutive connection failures (across
// nodes) it opens: attempts fail fast without dialing for cooldown; then one
// probe is let through, and its outcome closes or re-opens the breaker.
//
// So during an outage the connection attempts of a whole run are bounded by
// threshold + (nodes already dialing when it opened, at most --parallel) +
// one probe per cooldown, however many nodes and retries there are.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	failures int       // consecutive connection failures
	openTill time.Time // zero when closed
	probing  bool      // a probe is in flight (half-open)
	cause    error     // the last connection failure: why it opened
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: time.Now}
}

// allow reports whether an attempt may dial. When the breaker is open it
// says how long until the next probe.
func (b *breaker) allow() (ok bool, wait time.Duration) {
	if b == nil || b.threshold <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openTill.IsZero() {
		return true, 0
	}
	if now := b.now(); now.Before(b.openTill) {
		return false, b.openTill.Sub(now)
	}
	if b.probing {
		return false, b.cooldown
	}
	b.probing = true // half-open: this attempt is the probe
	return true, 0
}

// failed notes why the last connection failed: an attempt the open breaker
// refuses says it (a "connection refused" is what the operator must fix).
func (b *breaker) failed(err error) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.cause = err
	b.mu.Unlock()
}

// lastCause is the last connection failure noted by failed, or nil.
func (b *breaker) lastCause() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cause
}

// record notes the outcome of an allowed attempt: connectFailed when no
// connection could be made, else the provider answered.
func (b *breaker) record(connectFailed bool) {
	if b == nil || b.threshold <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	wasProbe := b.probing
	b.probing = false
	if !connectFailed {
		b.failures, b.openTill = 0, time.Time{}
		return
	}
	b.failures++
	if wasProbe || b.failures >= b.threshold {
		b.openTill = b.now().Add(b.cooldown)
	}
}
