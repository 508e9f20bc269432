package sim

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Stats are the simulator's counters, for tests and benchmarks (also served
// as JSON at GET /sim/stats).
type Stats struct {
	// Requests counts requests per endpoint name, faulted ones included.
	Requests map[string]int64 `json:"requests"`
	// Connections counts accepted TCP connections, refused ones included.
	Connections int64 `json:"connections"`
	// ResponsesCreated counts Responses API responses that were created
	// (a status fault creates none).
	ResponsesCreated int64 `json:"responses_created"`
	// TokensGenerated counts output tokens as the generators produce them:
	// a chat retry produces its tokens again, a background resume replays
	// without producing any. Reasoning summary tokens are not included.
	TokensGenerated int64 `json:"tokens_generated"`
	// ReasoningTokens counts reasoning summary tokens produced.
	ReasoningTokens int64 `json:"reasoning_tokens"`
	// ContinuedRequests counts chat requests that continued a partial
	// answer (any form); their tokens_generated is only what followed it.
	ContinuedRequests int64 `json:"continued_requests"`
	// Faults counts faults that acted, per kind.
	Faults map[string]int64 `json:"faults"`
}

// counters are the live Stats.
type counters struct {
	mu          sync.Mutex
	requests    map[string]int64
	faults      map[string]int64
	connections atomic.Int64
	responses   atomic.Int64
	tokens      atomic.Int64
	reasoning   atomic.Int64
	continued   atomic.Int64
}

// request counts a request to endpoint and returns its 1-based number.
func (c *counters) request(endpoint string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.requests == nil {
		c.requests = map[string]int64{}
	}
	c.requests[endpoint]++
	return c.requests[endpoint]
}

func (c *counters) fault(k FaultKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faults == nil {
		c.faults = map[string]int64{}
	}
	c.faults[string(k)]++
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		Requests:          maps.Clone(c.requests),
		Connections:       c.connections.Load(),
		ResponsesCreated:  c.responses.Load(),
		TokensGenerated:   c.tokens.Load(),
		ReasoningTokens:   c.reasoning.Load(),
		ContinuedRequests: c.continued.Load(),
		Faults:            maps.Clone(c.faults),
	}
	if st.Requests == nil {
		st.Requests = map[string]int64{}
	}
	if st.Faults == nil {
		st.Faults = map[string]int64{}
	}
	return st
}
