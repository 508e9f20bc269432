// Package sim is noderun's provider simulator: an OpenAI-compatible HTTP
// server on 127.0.0.1 that streams deterministic text and breaks connections
// on purpose.
//
// It exists because every promise noderun makes (a node survives a
// mid-stream disconnect, its output is byte-identical to an undisturbed run,
// an outage still fails fast) has to be shown over real sockets, in our tests
// and in users' CI, with no API key and no network. It is part of the product
// (`noderun sim serve`, `kind: sim` graphs), not a test helper.
//
// # Endpoints
//
//	POST /v1/chat/completions           chat, streaming or not          endpoint "chat"
//	POST /v1/responses                  Responses API create            endpoint "responses.create"
//	GET  /v1/responses/{id}             poll                            endpoint "responses.get"
//	GET  /v1/responses/{id}?stream=true resume (starting_after=N)       endpoint "responses.stream"
//	POST /v1/responses/{id}/cancel      cancel a background response    endpoint "responses.cancel"
//	GET  /v1/models                     lists the model "sim"           endpoint "models"
//	GET  /sim/stats                     Stats as JSON
//	POST /sim/faults                    add a Fault (JSON, same schema as YAML)
//	POST /sim/outage?for=2s             refuse connections for a while
//
// # Content
//
// The output text is a pure function of (model, input, seed): see [Text],
// [ChatInput] and [ResponsesInput]. Length, pace and silences come from
// [Config] and can be overridden per request through `metadata`:
//
//	sim_tokens             int       natural length of the output, in tokens
//	sim_tokens_per_second  float     pace; 0 = as fast as possible
//	sim_silence            duration  silence before the first token (and after each burst)
//	sim_burst_tokens       int       tokens per burst between silences; 0 = one burst
//	sim_keepalive          duration  ": keepalive" comment after this long without writing
//
// Values may be JSON strings ("2s", "40") or numbers. An invalid value is a
// 400 so that a typo does not silently change a test.
//
// Length: the natural length is sim_tokens, else the request's max tokens
// (max_tokens, max_completion_tokens, max_output_tokens), else Config.Tokens.
// When the request's max is smaller than the natural length the output is cut
// at the max and reported as such (finish_reason "length", or a
// response.incomplete with reason "max_output_tokens").
//
// # Faults
//
// See [Fault]. Faults act on one HTTP connection: on a background response
// they never touch the generator, which keeps producing into the response's
// event log, so a resume finds everything.
package sim
