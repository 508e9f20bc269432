package simconfig

import (
	"fmt"
	"time"
)

// Limits, when set (Config.Limits), makes the simulator answer like a
// rate-limited account: each API key has a bucket of requests and a bucket
// of tokens, each starting full at its capacity and refilled continuously
// at capacity per Window, the token-bucket model OpenAI and Anthropic
// document for their limits. A generation request that a bucket cannot pay
// for is answered 429 with Retry-After; `go doc ./provider/sim` has the
// whole contract.
//
// Its YAML form is the `limits:` block: requests_per_minute,
// tokens_per_minute, window. The keys keep the providers' names (RPM, TPM)
// because with the default Window of a minute that is what they are; a
// test that scales Window down makes them per Window, hence the Go names.
type Limits struct {
	RequestsPerWindow int           // requests per Window (YAML requests_per_minute); 0 = unlimited
	TokensPerWindow   int           // input + output tokens per Window (YAML tokens_per_minute); 0 = unlimited
	Window            time.Duration // the period the limits are per; 0 = DefaultLimitWindow
}

// DefaultLimitWindow is the period of Limits that set none.
const DefaultLimitWindow = time.Minute

// maxLimit bounds a configured limit so that the server's bucket arithmetic
// stays exact in a float64.
const maxLimit = 1 << 40

// Validate reports whether the limits are well formed.
func (l Limits) Validate() error {
	switch {
	case l.RequestsPerWindow < 0 || l.TokensPerWindow < 0:
		return fmt.Errorf("limits: requests_per_minute and tokens_per_minute must not be negative")
	case l.RequestsPerWindow > maxLimit || l.TokensPerWindow > maxLimit:
		return fmt.Errorf("limits: requests_per_minute and tokens_per_minute must be at most %d", int64(maxLimit))
	case l.Window < 0:
		return fmt.Errorf("limits: window must not be negative")
	case l.Window > 24*time.Hour:
		return fmt.Errorf("limits: window must be at most 24h")
	case l.Window > 0 && l.Window < time.Millisecond:
		return fmt.Errorf("limits: window must be at least 1ms")
	}
	return nil
}
