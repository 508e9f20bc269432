// Package diagnostics classifies errors into recovery classes and names every
// recovery step with a stable code, so an operator can tell a blip from an outage.
package diagnostics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Class is what kind of failure an error is, which decides how to recover from it.
type Class string

const (
	// ClassNone is the class of a nil error.
	ClassNone Class = ""
	// ClassDisconnect: the stream ended without terminal evidence (clean close,
	// unexpected EOF, reset, idle timeout, HTTP/2 stream error, 502/503/504).
	ClassDisconnect Class = "transport_disconnect"
	// ClassConnect: no connection could be made; the request provably never left.
	ClassConnect Class = "connect_failed"
	// ClassRateLimited: HTTP 429, possibly with Retry-After.
	ClassRateLimited Class = "rate_limited"
	// ClassServer: HTTP 500 and other 5xx that are not gateway errors.
	ClassServer Class = "server_error"
	// ClassDeterministic: the same request will fail the same way (400, 401,
	// 403, 404, 422, context length, a failed or incomplete response).
	ClassDeterministic Class = "deterministic"
	// ClassCanceled: the caller gave up (Ctrl-C, node cancel).
	ClassCanceled Class = "canceled"
	// ClassStuck: the work cannot go on where it is — a response left queued
	// with no progress, a thread the harness dropped; it cannot be resumed,
	// only cancelled and retried.
	ClassStuck Class = "stuck"
	// ClassNotFound: the provider no longer knows the work when its status
	// is checked (404: expired, or another server); nothing to resume, a
	// retry from scratch may still be safe.
	ClassNotFound Class = "not_found"
	// ClassProviderCanceled: the provider reports the work cancelled (by
	// `noderun cancel`, or by someone else); it cannot go on, a retry can.
	ClassProviderCanceled Class = "provider_canceled"
	// ClassProtocol: the server's answer is not the protocol: a 200 that is
	// not an event stream, an event that is not JSON, a redirect elsewhere.
	// Sending the request again would get the same answer.
	ClassProtocol Class = "protocol"
	// ClassLimit: an input or an answer exceeded one of noderun's documented
	// bounds (a graph file, a rendered prompt, one stream event), which keep
	// memory bounded whatever a file or a server holds.
	ClassLimit Class = "limit_exceeded"
	// ClassJournal: the journal cannot record (disk full, read-only, I/O
	// error). The node stops at once: no provider work the journal cannot
	// record. Resumable work is left resumable.
	ClassJournal Class = "journal_unavailable"
	// ClassTimeout: the node's own timeout (its wall time, recovery
	// included) passed; it is not retried.
	ClassTimeout Class = "node_timeout"
)

// Transient reports whether an error of this class may go away on its own.
func (c Class) Transient() bool {
	switch c {
	case ClassDisconnect, ClassConnect, ClassRateLimited, ClassServer, ClassStuck, ClassNotFound, ClassProviderCanceled:
		return true
	}
	return false
}

// Restarts reports whether work that ended with this class cannot go on
// where it is (no status check, re-attach or continue would find it going),
// only be retried from scratch: stuck, not found, cancelled at the provider.
func (c Class) Restarts() bool {
	switch c {
	case ClassStuck, ClassNotFound, ClassProviderCanceled:
		return true
	}
	return false
}

// Sentinel errors that adapters wrap so Classify can recognise them.
var (
	// ErrDisconnected is the error of a stream that ended without terminal evidence.
	ErrDisconnected = errors.New("stream disconnected before completion")
	// ErrIdleTimeout is the cause given when a stream stays silent past its idle window.
	ErrIdleTimeout = errors.New("stream idle timeout")
	// ErrStuck is the error of work the provider holds without progress.
	ErrStuck = errors.New("response made no progress")
	// ErrProtocol is the error of an answer that is not the protocol.
	ErrProtocol = errors.New("protocol violation")
	// ErrLimit is the error of an input or answer past a documented bound.
	ErrLimit = errors.New("limit exceeded")
	// ErrJournal is the error of a journal that cannot record.
	ErrJournal = errors.New("journal unavailable")
)

// Error is a classified error. Adapters return it when they know better than
// Classify's heuristics (an HTTP status, a failed response, a Retry-After).
type Error struct {
	Class      Class
	Status     int           // HTTP status, 0 if none
	RetryAfter time.Duration // from a 429 or 503, 0 if none
	Err        error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %v", e.Class, e.Status, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap returns err classified as c.
func Wrap(c Class, err error) error { return &Error{Class: c, Err: err} }

// FromStatus classifies an HTTP status code.
func FromStatus(status int) Class {
	switch {
	case status == http.StatusTooManyRequests:
		return ClassRateLimited
	case status == http.StatusBadGateway, status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return ClassDisconnect
	case status >= 500:
		return ClassServer
	case status == http.StatusRequestTimeout:
		return ClassDisconnect
	case status >= 400:
		return ClassDeterministic
	}
	return ClassNone
}

// Classify finds the class of err and, when known, its HTTP status and Retry-After.
func Classify(err error) *Error {
	if err == nil {
		return &Error{Class: ClassNone}
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	out := &Error{Err: err}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
		out.Class = ClassCanceled
	case errors.Is(err, ErrStuck):
		out.Class = ClassStuck
	case errors.Is(err, ErrJournal):
		out.Class = ClassJournal
	case errors.Is(err, ErrLimit):
		out.Class = ClassLimit
	case errors.Is(err, ErrProtocol):
		out.Class = ClassProtocol
	case errors.Is(err, ErrIdleTimeout), errors.Is(err, context.DeadlineExceeded):
		out.Class = ClassDisconnect
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		out.Status = apiErr.HTTPStatusCode
		out.Class = FromStatus(apiErr.HTTPStatusCode)
		if isContextLength(apiErr.Message) {
			out.Class = ClassDeterministic
		}
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		out.Status = reqErr.HTTPStatusCode
		out.Class = FromStatus(reqErr.HTTPStatusCode)
	case isJSON(err): // after the status cases: an error answer's body need not be JSON
		out.Class = ClassProtocol
	case errors.Is(err, syscall.ECONNREFUSED), isDial(err, &opErr):
		out.Class = ClassConnect
	case errors.Is(err, ErrDisconnected), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		isTimeout(err), isHTTP2StreamError(err):
		out.Class = ClassDisconnect
	case isContextLength(err.Error()):
		out.Class = ClassDeterministic
	default:
		// Unknown errors from the transport are most often a dropped connection;
		// anything an adapter can recognise as deterministic it wraps in *Error.
		out.Class = ClassDisconnect
	}
	return out
}

// isJSON: an answer that does not decode is a protocol violation, not a
// dropped connection to retry.
func isJSON(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}

func isDial(err error, op **net.OpError) bool {
	return errors.As(err, op) && (*op).Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// http2's StreamError is unexported behind net/http's bundle; its text is stable.
func isHTTP2StreamError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "stream error") || strings.Contains(s, "INTERNAL_ERROR")
}

func isContextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context_length_exceeded") || strings.Contains(m, "maximum context length")
}

// ParseRetryAfter reads a Retry-After header in either form (delay-seconds or
// HTTP-date), relative to now. It returns 0 when the header is absent or bad.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
