// Package simconfig is the configuration of noderun's provider simulator
// (package provider/sim): Config, its Faults and Limits, and the strict
// YAML decoder that reads them with their lines.
//
// It is a leaf apart from the simulator because a graph file's `sim:` block
// is part of the graph language: package runner/graph decodes it, and a
// program that only parses graphs must not link an HTTP server. So this
// package holds no network code (no net/http, no provider/sim; tests here
// and in runner/graph check the import graph). provider/sim declares its Config,
// Fault, FaultKind, Limits and ConfigError as aliases of these, and re-exports
// the constants and functions, so a server's callers need not import this
// package.
//
// # Config file
//
// `noderun sim serve --faults FILE` and the `sim:` block of a graph file use
// one schema ([LoadConfig], [DecodeConfig]); unknown fields are errors:
//
//	seed: 42                # part of the text's identity
//	tokens: 200             # natural output length (default 64)
//	tokens_per_second: 80   # 0 = as fast as possible
//	silence: 2s             # before the first token, and after each burst
//	burst_tokens: 50        # 0 = a single burst
//	keepalive: 500ms        # ": keepalive" after this long without writing
//	continuation: [prefix]  # forms of continuing a partial chat answer it accepts
//	                        # (prefix, continue_final_message, assistant_last; default all; [none])
//	continuation_echo: true # a continued answer repeats the prefix first
//	limits:                 # a rate-limited account (Limits)
//	  requests_per_minute: 120  # per window and API key; 0 = unlimited
//	  tokens_per_minute: 40000  # input + output tokens; 0 = unlimited
//	  window: 1m                # the period of the limits (default 1m)
//	faults:
//	  - endpoint: chat          # an Endpoint* name (chat, responses.create, responses.get,
//	                            # responses.stream, messages, ...); omit for any
//	    node: plan              # only this graph node's requests (sim.NodeHeader or sim.NodeMetadata)
//	    requests: [1, 2]        # 1-based, per endpoint (per node and endpoint with node); omit for every request
//	    response_id: resp_...   # only requests about this response
//	    times: 1                # at most this many times; omit for unlimited
//	    kind: close             # close | reset | cut | silence | status | queued | refuse | outage | error_event
//	    after_events: 5         # close, reset, cut, silence, error_event: after N SSE events
//	    duration: 2s            # silence, outage
//	    status: 429             # status, error_event: 400-599
//	    retry_after: "2"        # status: Retry-After header
//
// Examples live in testdata/faults/ at the repository root.
package simconfig
