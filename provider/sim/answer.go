// Non-streaming answers: JSON bodies, OpenAI-style errors and the faults
// that act on them.

package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a request body.
const maxBody = 32 << 20

// readJSON decodes the request body into v, answering 400 on failure.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "")
		return false
	}
	return true
}

// errorType is the error type and code OpenAI sends with a status.
func errorType(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "invalid_request_error", "unsupported_country_region_territory"
	case http.StatusNotFound:
		return "invalid_request_error", ""
	case http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded"
	case http.StatusServiceUnavailable:
		return "server_error", "service_unavailable"
	}
	if status >= 500 {
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

// writeError answers an OpenAI-style error: {"error": {message, type, param, code}}.
func writeError(w http.ResponseWriter, status int, msg, param string) {
	typ, code := errorType(status)
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if param != "" {
		e["param"] = param
	}
	if code != "" {
		e["code"] = code
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"sim: cannot encode","type":"server_error","param":null,"code":null}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// earlyFault applies a fault that acts instead of any answer (status,
// outage), reporting whether it did.
func (s *Server) earlyFault(w http.ResponseWriter, r *http.Request, f *Fault, endpoint string) bool {
	if f == nil {
		return false
	}
	switch f.Kind {
	case FaultStatus:
		s.faultActed(f, siteOf(r, endpoint))
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		msg := "sim: injected HTTP " + strconv.Itoa(f.Status) + " (" + http.StatusText(f.Status) + ")"
		if slices.Contains(interactionEndpoints, endpoint) { // Google's shape, as the Interactions API answers
			writeGeminiError(w, f.Status, msg)
		} else {
			writeError(w, f.Status, msg, "")
		}
		return true
	case FaultOutage:
		s.faultActed(f, siteOf(r, endpoint))
		// every open connection is reset, this request's included
		if err := s.outageFor(f.Duration, nil); err != nil || connOf(r) == nil {
			panic(http.ErrAbortHandler)
		}
		return true
	}
	return false
}

// count counts a request to ep and says who it is, for matching faults.
// md is the request's metadata (nil when it has none).
func (s *Server) count(ep string, r *http.Request, md map[string]any) call {
	node := nodeOf(r, md)
	n, nodeN := s.stats.nodeRequest(ep, node)
	attempt, _ := strconv.Atoi(r.Header.Get(AttemptHeader))
	return call{endpoint: ep, n: n, node: node, nodeN: nodeN, attempt: attempt}
}

// nodeOf is the graph node a request is for: its NodeHeader, else its
// metadata's NodeMetadata, else "".
func nodeOf(r *http.Request, md map[string]any) string {
	if n := r.Header.Get(NodeHeader); n != "" {
		return n
	}
	if n, ok := md[NodeMetadata].(string); ok {
		return n
	}
	return ""
}

// faultSite is where a fault acted: its endpoint, the request's node (""
// when it named none) and id (when its answer carries one), and on a
// stream how many events went before it (-1: not on a stream).
type faultSite struct {
	endpoint, node, request string
	events                  int
}

// siteOf is the site of a fault that acts instead of an answer.
func siteOf(r *http.Request, endpoint string) faultSite {
	return faultSite{endpoint: endpoint, node: nodeOf(r, nil), events: -1}
}

// faultActed counts and logs a fault that acted, saying what it did where:
// the events actually sent before it, the request and its node (never the
// fault's own settings, which a log built from another fault would repeat).
func (s *Server) faultActed(f *Fault, at faultSite) {
	s.stats.fault(f.Kind)
	what := string(f.Kind)
	if f.Kind == FaultStatus || f.Kind == FaultErrorEvent {
		what = fmt.Sprintf("%s %d", f.Kind, f.Status)
	}
	msg := fmt.Sprintf("simulated fault: %s on %s", what, at.endpoint)
	attrs := []any{"kind", f.Kind, "endpoint", at.endpoint}
	if at.events >= 0 {
		msg += fmt.Sprintf(" after %d events", at.events)
		attrs = append(attrs, "after_events", at.events)
	}
	var who []string
	if at.node != "" {
		who = append(who, "node "+at.node)
		attrs = append(attrs, "node", at.node)
	}
	if at.request != "" {
		who = append(who, "request "+at.request)
		attrs = append(attrs, "request", at.request)
	}
	if len(who) > 0 {
		msg += " (" + strings.Join(who, ", ") + ")"
	}
	s.log.Info(msg, attrs...)
}

// answer writes a non-streaming JSON answer, applying a connection fault
// instead of (or, for silence, before) the body: close drops the connection
// with a FIN before any response, reset with an RST, cut sends the headers
// and half the body then drops the connection.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, endpoint string, f *Fault, v any) {
	if f == nil || !connFault(f.Kind) {
		writeJSON(w, http.StatusOK, v)
		return
	}
	s.faultActed(f, siteOf(r, endpoint))
	conn := connOf(r)
	switch f.Kind {
	case FaultSilence:
		if sleep(r.Context(), f.Duration) == nil {
			writeJSON(w, http.StatusOK, v)
		}
		return
	case FaultCut:
		b, _ := json.Marshal(v)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:len(b)/2])
		_ = http.NewResponseController(w).Flush()
	}
	switch {
	case conn == nil:
		panic(http.ErrAbortHandler)
	case f.Kind == FaultReset:
		resetConn(conn)
	default:
		_ = conn.Close()
	}
}

// newID returns prefix followed by 48 random hex digits, like OpenAI's ids.
func newID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// unixNow is the "created" timestamp of objects.
func unixNow() int64 { return time.Now().Unix() }
