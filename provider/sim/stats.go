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
	// OpenConnections is how many connections are open now, idle keep-alive
	// ones included.
	OpenConnections int `json:"open_connections"`
	// ResponsesCreated counts Responses API responses that were created
	// (a status fault creates none).
	ResponsesCreated int64 `json:"responses_created"`
	// InteractionsCreated counts Gemini interactions that were created (a
	// status fault creates none).
	InteractionsCreated int64 `json:"interactions_created"`
	// TokensGenerated counts output tokens as the generators produce them:
	// a chat retry produces its tokens again, a background resume replays
	// without producing any. Reasoning summary tokens are not included.
	TokensGenerated int64 `json:"tokens_generated"`
	// ReasoningTokens counts reasoning summary tokens produced.
	ReasoningTokens int64 `json:"reasoning_tokens"`
	// ContinuedRequests counts chat requests that continued a partial
	// answer (any form); their tokens_generated is only what followed it.
	ContinuedRequests int64 `json:"continued_requests"`
	// RateLimited counts the 429s answered because a request exceeded
	// Config.Limits (a status fault's 429s are in Faults, not here).
	RateLimited int64 `json:"rate_limited"`
	// Faults counts faults that acted, per kind.
	Faults map[string]int64 `json:"faults"`
	// Nodes counts, per graph node that named itself (NodeHeader or
	// NodeMetadata), its requests per endpoint and the output tokens
	// generated for it.
	Nodes map[string]NodeStats `json:"nodes"`
}

// NodeStats are one node's counters.
type NodeStats struct {
	Requests        map[string]int64 `json:"requests"`
	TokensGenerated int64            `json:"tokens_generated"`
	// Events counts the SSE events written on its streams (resumes
	// included; keepalives not), for requests naming it by NodeHeader.
	Events int64 `json:"events"`
	// RateLimited counts its requests answered 429 by Config.Limits.
	RateLimited int64 `json:"rate_limited"`
	// Generations are the answers generated for it (a chat completion, a
	// Responses response or an Interactions interaction created, an
	// Anthropic or Gemini message), in the order they began, each with its
	// output tokens and the client's attempt it was for.
	Generations []Generation `json:"generations"`
}

// Generation is one answer generated for a node.
type Generation struct {
	// Attempt is the node's attempt, as the request's AttemptHeader said
	// (0: it did not say).
	Attempt int   `json:"attempt"`
	Tokens  int64 `json:"tokens"`
}

// counters are the live Stats.
type counters struct {
	mu           sync.Mutex
	requests     map[string]int64
	faults       map[string]int64
	connections  atomic.Int64
	responses    atomic.Int64
	interactions atomic.Int64
	tokens       atomic.Int64
	reasoning    atomic.Int64
	continued    atomic.Int64
	limited      atomic.Int64
	nodes        map[string]*nodeCounters
}

type nodeCounters struct {
	requests    map[string]int64 // under counters.mu
	generations []generation     // under counters.mu; each counted as it streams
	tokens      atomic.Int64
	events      atomic.Int64
	limited     atomic.Int64
}

// eventsFor is node's SSE event counter, nil for "".
func (c *counters) eventsFor(node string) *atomic.Int64 {
	if node == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return &c.nodeLocked(node).events
}

// request counts a request to endpoint and returns its 1-based number.
func (c *counters) request(endpoint string) int64 {
	n, _ := c.nodeRequest(endpoint, "")
	return n
}

// nodeRequest counts a request to endpoint for node ("" = unnamed) and
// returns its 1-based number on the endpoint and, for a named node, its
// number among that node's requests to the endpoint (else 0).
func (c *counters) nodeRequest(endpoint, node string) (n, nodeN int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.requests == nil {
		c.requests = map[string]int64{}
	}
	c.requests[endpoint]++
	if node != "" {
		nc := c.nodeLocked(node)
		nc.requests[endpoint]++
		nodeN = nc.requests[endpoint]
	}
	return c.requests[endpoint], nodeN
}

func (c *counters) nodeLocked(node string) *nodeCounters {
	if c.nodes == nil {
		c.nodes = map[string]*nodeCounters{}
	}
	nc := c.nodes[node]
	if nc == nil {
		nc = &nodeCounters{requests: map[string]int64{}}
		c.nodes[node] = nc
	}
	return nc
}

// tokenCounter counts output tokens in total and for one node; it is
// fetched once per response, so the per-token path takes no lock.
type generation struct {
	attempt int
	tokens  *atomic.Int64
}

type tokenCounter struct {
	all, node, gen *atomic.Int64
}

// tokensFor counts the tokens of a new answer for node's attempt (one of
// its Generations).
func (c *counters) tokensFor(node string, attempt int) tokenCounter {
	tc := tokenCounter{all: &c.tokens}
	if node != "" {
		c.mu.Lock()
		nc := c.nodeLocked(node)
		tc.node, tc.gen = &nc.tokens, new(atomic.Int64)
		nc.generations = append(nc.generations, generation{attempt, tc.gen})
		c.mu.Unlock()
	}
	return tc
}

func (t tokenCounter) add() {
	if t.all != nil {
		t.all.Add(1)
	}
	if t.node != nil {
		t.node.Add(1)
		t.gen.Add(1)
	}
}

// reset zeroes every counter. Responses still generating keep counting into
// the node counters they hold, which are no longer reported.
func (c *counters) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests, c.faults, c.nodes = nil, nil, nil
	c.connections.Store(0)
	c.responses.Store(0)
	c.interactions.Store(0)
	c.tokens.Store(0)
	c.reasoning.Store(0)
	c.continued.Store(0)
	c.limited.Store(0)
}

// rateLimited counts a 429 of Config.Limits for node ("" = unnamed).
func (c *counters) rateLimited(node string) {
	c.limited.Add(1)
	if node != "" {
		c.mu.Lock()
		c.nodeLocked(node).limited.Add(1)
		c.mu.Unlock()
	}
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
		Requests:            maps.Clone(c.requests),
		Connections:         c.connections.Load(),
		ResponsesCreated:    c.responses.Load(),
		InteractionsCreated: c.interactions.Load(),
		TokensGenerated:     c.tokens.Load(),
		ReasoningTokens:     c.reasoning.Load(),
		ContinuedRequests:   c.continued.Load(),
		RateLimited:         c.limited.Load(),
		Faults:              maps.Clone(c.faults),
		Nodes:               make(map[string]NodeStats, len(c.nodes)),
	}
	for name, nc := range c.nodes {
		gens := make([]Generation, len(nc.generations))
		for i, g := range nc.generations {
			gens[i] = Generation{Attempt: g.attempt, Tokens: g.tokens.Load()}
		}
		st.Nodes[name] = NodeStats{Requests: maps.Clone(nc.requests), TokensGenerated: nc.tokens.Load(), Events: nc.events.Load(),
			RateLimited: nc.limited.Load(), Generations: gens}
	}
	if st.Requests == nil {
		st.Requests = map[string]int64{}
	}
	if st.Faults == nil {
		st.Faults = map[string]int64{}
	}
	return st
}
