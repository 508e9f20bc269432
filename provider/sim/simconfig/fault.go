package simconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FaultKind is what a fault does.
type FaultKind string

// Fault kinds. Close, reset, cut and silence act on a stream after
// AfterEvents SSE events were written (an event is one `data:` frame;
// keepalive comments do not count); on a non-streaming answer they act
// instead of the body.
const (
	// FaultClose ends the HTTP response cleanly (the chunked terminator is
	// sent, the connection stays usable) without a terminal event. go-openai
	// reports io.EOF; on a non-streaming answer the connection is closed
	// (FIN) before any response.
	FaultClose FaultKind = "close"
	// FaultReset resets the TCP connection (SO_LINGER 0, RST): the client
	// sees ECONNRESET.
	FaultReset FaultKind = "reset"
	// FaultCut writes the first half of the next `data:` line and closes the
	// connection without ending the chunked body: io.ErrUnexpectedEOF. On a
	// non-streaming answer it sends half of the JSON body.
	FaultCut FaultKind = "cut"
	// FaultSilence holds the connection for Duration writing nothing (or
	// keepalive comments, if the request has a keepalive), then goes on.
	FaultSilence FaultKind = "silence"
	// FaultStatus answers Status with an OpenAI-style JSON error body and
	// Retry-After when RetryAfter is set.
	FaultStatus FaultKind = "status"
	// FaultQueued leaves a created response queued for good: only
	// response.created and response.queued are emitted; polling says
	// "queued"; cancel works. Only for responses.create.
	FaultQueued FaultKind = "queued"
	// FaultRefuse accepts the next TCP connection(s) and resets them at
	// once, before any request is read. Requests then counts connections
	// (1-based, over the server's life); Endpoint and ResponseID must be
	// empty. A true outage (ECONNREFUSED) is FaultOutage or the server's
	// SetOutage.
	FaultRefuse FaultKind = "refuse"
	// FaultOutage takes the whole server down for Duration when the matched
	// request arrives: the request's connection and every other open one
	// are reset, and new connections are refused (ECONNREFUSED) until the
	// outage ends. Aimed with Node, it starts a real outage at a chosen
	// point of one node's life, whatever the scheduling of the others.
	FaultOutage FaultKind = "outage"
	// FaultErrorEvent sends an Anthropic `error` event after AfterEvents
	// events of a Messages stream, then ends it, as the API does when it
	// fails mid-stream: Status picks the error type (529 overloaded_error,
	// 500 api_error, 429 rate_limit_error, 400 invalid_request_error ...).
	// Only for the messages endpoint.
	FaultErrorEvent FaultKind = "error_event"
)

// Endpoint names, as used in Fault.Endpoint and the server's Stats.Requests.
const (
	EndpointChat            = "chat"
	EndpointResponsesCreate = "responses.create"
	EndpointResponsesGet    = "responses.get"
	EndpointResponsesStream = "responses.stream"
	EndpointResponsesCancel = "responses.cancel"
	EndpointModels          = "models"
	// EndpointMessages is the Anthropic Messages API (POST /v1/messages).
	EndpointMessages = "messages"
	// Gemini API endpoints.
	EndpointGeminiStream   = "gemini.stream"   // :streamGenerateContent
	EndpointGeminiGenerate = "gemini.generate" // :generateContent
	// Gemini Interactions API endpoints.
	EndpointInteractionsCreate = "interactions.create" // POST /v1beta/interactions
	EndpointInteractionsGet    = "interactions.get"    // GET /v1beta/interactions/{id}
	EndpointInteractionsStream = "interactions.stream" // GET /v1beta/interactions/{id}?stream=true
	EndpointInteractionsCancel = "interactions.cancel" // POST /v1beta/interactions/{id}/cancel
)

var endpoints = []string{EndpointChat, EndpointResponsesCreate, EndpointResponsesGet,
	EndpointResponsesStream, EndpointResponsesCancel, EndpointModels,
	EndpointMessages, EndpointGeminiStream, EndpointGeminiGenerate,
	EndpointInteractionsCreate, EndpointInteractionsGet, EndpointInteractionsStream, EndpointInteractionsCancel}

// Fault is one scripted failure. A request is matched against the faults in
// the order they were added; the first that matches and has uses left
// applies, and only that one. A use is spent when the fault is matched,
// even if the stream ends before AfterEvents is reached.
//
// The YAML and JSON forms use the tag names; Duration is a Go duration
// string ("2s"), RetryAfter a string (seconds or an HTTP date).
type Fault struct {
	// Endpoint is one of the Endpoint* names; "" matches any.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// Node restricts the fault to requests for this graph node (the
	// X-Noderun-Node header or the noderun_node metadata key: sim.NodeHeader,
	// sim.NodeMetadata), and makes Requests count that node's requests only:
	// for chat and responses.create, request k is the node's attempt k (or a
	// continuation of its answer, which stays in the attempt), so
	// the fault hits the same request whatever runs beside it.
	Node string `yaml:"node" json:"node,omitempty"`
	// Requests are 1-based request numbers, counted per endpoint (per node
	// and endpoint when Node is set; a fault without Endpoint matches
	// request n of whichever endpoint; for refuse they are connection
	// numbers); empty matches every request.
	Requests []int `yaml:"requests" json:"requests,omitempty"`
	// ResponseID restricts the fault to requests about this response.
	ResponseID string `yaml:"response_id" json:"response_id,omitempty"`
	// Times is how many times the fault applies at most; 0 = unlimited.
	Times int       `yaml:"times" json:"times,omitempty"`
	Kind  FaultKind `yaml:"kind" json:"kind"`
	// AfterEvents is when close, reset, cut, silence and error_event act on a stream.
	AfterEvents int `yaml:"after_events" json:"after_events,omitempty"`
	// Duration is the length of a silence or an outage.
	Duration time.Duration `yaml:"duration" json:"duration,omitempty"`
	// Status is the HTTP status of a status fault (400-599).
	Status int `yaml:"status" json:"status,omitempty"`
	// RetryAfter is the Retry-After header of a status fault.
	RetryAfter string `yaml:"retry_after" json:"retry_after,omitempty"`
}

// faultKinds are the kinds, in the order the docs list them.
var faultKinds = []FaultKind{FaultClose, FaultReset, FaultCut, FaultSilence, FaultStatus, FaultQueued, FaultRefuse, FaultOutage, FaultErrorEvent}

// FaultKinds lists every fault kind, for documentation and schemas made
// from the list the decoder checks against.
func FaultKinds() []FaultKind { return slices.Clone(faultKinds) }

// Endpoints lists every endpoint name (Fault.Endpoint), likewise.
func Endpoints() []string { return slices.Clone(endpoints) }

// kindList is FaultKinds in words.
var kindList = func() string {
	s := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}()

// Validate reports whether the fault is well formed: every problem, one a
// line (errors.Join).
func (f Fault) Validate() error {
	var errs []error
	for _, p := range f.problems() {
		errs = append(errs, fmt.Errorf("fault: %s", p.msg))
	}
	return errors.Join(errs...)
}

// faultProblem is one problem of a fault, with the field it is about (so
// that a file's decoder can point at that field's line).
type faultProblem struct{ field, msg string }

// problems lists every problem of f.
func (f Fault) problems() []faultProblem {
	var out []faultProblem
	bad := func(field, format string, args ...any) {
		out = append(out, faultProblem{field, fmt.Sprintf(format, args...)})
	}
	switch {
	case f.Kind == "":
		bad("kind", "kind is required (%s)", kindList)
		return out // what else is wrong depends on the kind
	case !slices.Contains(faultKinds, f.Kind):
		bad("kind", "kind: want one of %s, got %q", kindList, f.Kind)
		return out
	}
	if f.Endpoint != "" && !slices.Contains(endpoints, f.Endpoint) {
		bad("endpoint", "endpoint: want one of %s, got %q", strings.Join(endpoints, ", "), f.Endpoint)
	}
	for _, n := range f.Requests {
		if n < 1 {
			bad("requests", "requests: request numbers are 1-based, got %d", n)
			break
		}
	}
	if f.Times < 0 {
		bad("times", "times: want a whole number >= 0, got %d", f.Times)
	}
	if f.AfterEvents < 0 {
		bad("after_events", "after_events: want a whole number >= 0, got %d", f.AfterEvents)
	}
	if f.Duration < 0 {
		bad("duration", "duration: want a duration >= 0, got %s", words(f.Duration))
	}
	switch f.Kind {
	case FaultStatus, FaultErrorEvent:
		if f.Status < 400 || f.Status > 599 {
			bad("status", "status: want an HTTP status in 400-599 for kind %s, got %d", f.Kind, f.Status)
		}
	case FaultSilence, FaultOutage:
		if f.Duration == 0 {
			bad("kind", "%s needs a duration > 0", f.Kind)
		}
		if f.Kind == FaultOutage && f.Duration > time.Hour {
			bad("duration", "duration: an outage lasts at most 1h, got %s", words(f.Duration))
		}
	}
	switch {
	case f.Kind == FaultQueued && f.Endpoint != "" && f.Endpoint != EndpointResponsesCreate:
		bad("endpoint", "endpoint: queued applies to %s only, got %q", EndpointResponsesCreate, f.Endpoint)
	case f.Kind == FaultErrorEvent && f.Endpoint != "" && f.Endpoint != EndpointMessages:
		bad("endpoint", "endpoint: error_event applies to %s only, got %q", EndpointMessages, f.Endpoint)
	case f.Kind == FaultRefuse && (f.Endpoint != "" || f.ResponseID != "" || f.Node != ""):
		field := "endpoint"
		if f.Endpoint == "" {
			field = cmpOr(f.ResponseID != "", "response_id", "node")
		}
		bad(field, "refuse acts on connections: endpoint, node and response_id must be empty (aim an outage at a node instead)")
	}
	if f.Status != 0 && f.Kind != FaultStatus && f.Kind != FaultErrorEvent {
		bad("status", "status is for kinds status and error_event only, not %s", f.Kind)
	}
	if f.RetryAfter != "" && f.Kind != FaultStatus {
		bad("retry_after", "retry_after is for kind status only, not %s", f.Kind)
	}
	if f.Duration != 0 && f.Kind != FaultSilence && f.Kind != FaultOutage {
		bad("duration", "duration is for kinds silence and outage only, not %s", f.Kind)
	}
	return out
}

// words is d as people write it: "2h", not "2h0m0s".
func words(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// cmpOr is a if c, else b.
func cmpOr(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// faultJSON is Fault with Duration as a string, for POST /sim/faults.
type faultJSON struct {
	Endpoint    string    `json:"endpoint,omitempty"`
	Node        string    `json:"node,omitempty"`
	Requests    []int     `json:"requests,omitempty"`
	ResponseID  string    `json:"response_id,omitempty"`
	Times       int       `json:"times,omitempty"`
	Kind        FaultKind `json:"kind"`
	AfterEvents int       `json:"after_events,omitempty"`
	Duration    string    `json:"duration,omitempty"`
	Status      int       `json:"status,omitempty"`
	RetryAfter  string    `json:"retry_after,omitempty"`
}

// MarshalJSON writes Duration as a Go duration string.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{f.Endpoint, f.Node, f.Requests, f.ResponseID, f.Times, f.Kind, f.AfterEvents, "", f.Status, f.RetryAfter}
	if f.Duration != 0 {
		j.Duration = f.Duration.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads Duration as a Go duration string and rejects unknown fields.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	var d time.Duration
	if j.Duration != "" {
		var err error
		if d, err = time.ParseDuration(j.Duration); err != nil {
			return fmt.Errorf("fault: duration: %w", err)
		}
	}
	*f = Fault{j.Endpoint, j.Node, j.Requests, j.ResponseID, j.Times, j.Kind, j.AfterEvents, d, j.Status, j.RetryAfter}
	return nil
}
