package sim

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// errFaulted ends a handler after a fault closed, reset or cut its connection.
var errFaulted = errors.New("sim: connection ended by a fault")

var keepaliveFrame = []byte(": keepalive\n\n")

// pingFrame is Anthropic's keepalive: a ping event, which the Messages API
// sends after the first content_block_start and while a stream is quiet
// (https://platform.claude.com/docs/en/build-with-claude/streaming, "Ping
// events"). It is not counted among a stream's events (Fault.AfterEvents
// counts what carries the answer).
var pingFrame = []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")

// sseWriter writes one SSE response and applies the request's connection
// fault (close, reset, cut, silence) when AfterEvents events were written.
// It also writes a keepalive comment whenever the keepalive interval passes
// without a write. It is used by one goroutine.
//
// Events are flushed to the socket before every wait (a pace, a silence, a
// tail waiting for the generator), before a fault acts and at the end, not
// one by one: a paced stream still sends each token as it comes, and an
// unpaced one fills TCP segments instead of paying a write per token.
type sseWriter struct {
	s         *Server
	ctx       context.Context
	w         http.ResponseWriter
	rc        *http.ResponseController
	conn      net.Conn // nil when served by another server
	endpoint  string
	node      string // the request's node, "" when it named none
	request   string // the answer's X-Request-Id
	fault     *Fault // pending, nil once applied
	keepalive time.Duration
	events    int
	counted   *atomic.Int64 // the node's event counter, nil when unnamed
	last      time.Time     // last write
	dirty     bool          // written, not flushed
	cutNext   bool
	// ending, if set, runs before a fault ends the connection, so that the
	// server's state (a response marked interrupted) is settled before the
	// client can observe the end and ask about it.
	ending func()
}

// startSSE sends the stream's headers at once, as a real server does, so
// the client's create call returns before the first token. ending may be nil.
func (s *Server) startSSE(w http.ResponseWriter, r *http.Request, endpoint string, f *Fault, keepalive time.Duration, ending func()) (*sseWriter, error) {
	if f != nil && !connFault(f.Kind) {
		f = nil
	}
	sw := &sseWriter{
		s: s, ctx: r.Context(), w: w, rc: http.NewResponseController(w), conn: connOf(r),
		endpoint: endpoint, fault: f, keepalive: keepalive, last: time.Now(), ending: ending,
		counted: s.stats.eventsFor(nodeOf(r, nil)), node: nodeOf(r, nil), request: newID("req_"),
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Request-Id", sw.request)
	w.WriteHeader(http.StatusOK)
	if err := sw.rc.Flush(); err != nil {
		return nil, err
	}
	return sw, sw.check()
}

// connFault reports whether k acts on a connection's bytes.
func connFault(k FaultKind) bool {
	switch k {
	case FaultClose, FaultReset, FaultCut, FaultSilence:
		return true
	}
	return false
}

// send writes one event frame ("event: ...\ndata: ...\n\n" or "data: ...\n\n").
func (sw *sseWriter) send(frame []byte) error {
	if sw.cutNext {
		return sw.cut(frame)
	}
	if err := sw.write(frame); err != nil {
		return err
	}
	sw.events++
	if sw.counted != nil {
		sw.counted.Add(1)
	}
	return sw.check()
}

func (sw *sseWriter) write(b []byte) error {
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	sw.last = time.Now()
	sw.dirty = true
	return nil
}

// flush sends what was written.
func (sw *sseWriter) flush() error {
	if !sw.dirty {
		return nil
	}
	sw.dirty = false
	return sw.rc.Flush()
}

// check applies the pending fault once its event count is reached.
func (sw *sseWriter) check() error {
	f := sw.fault
	if f == nil || sw.events != f.AfterEvents {
		return nil
	}
	sw.fault = nil
	switch f.Kind {
	case FaultCut:
		sw.cutNext = true // counted when it happens
		return nil
	case FaultSilence:
		sw.s.faultActed(f, sw.site())
		return sw.idle(nil, f.Duration)
	case FaultReset:
		sw.s.faultActed(f, sw.site())
		_ = sw.flush()
		sw.end()
		sw.abort(true)
		return errFaulted
	}
	sw.s.faultActed(f, sw.site()) // close: the handler returns, ending the body cleanly
	sw.end()
	return errFaulted
}

// site is where a fault acts on this stream: after the events sent so far.
func (sw *sseWriter) site() faultSite {
	return faultSite{endpoint: sw.endpoint, node: sw.node, request: sw.request, events: sw.events}
}

func (sw *sseWriter) end() {
	if sw.ending != nil {
		sw.ending()
	}
}

// cut writes the first half of frame's data line, then drops the
// connection without the chunked terminator.
func (sw *sseWriter) cut(frame []byte) error {
	sw.s.faultActed(&Fault{Kind: FaultCut}, sw.site())
	i := bytes.Index(frame, []byte("data:"))
	if i < 0 {
		i = 0
	}
	end := bytes.IndexByte(frame[i:], '\n')
	if end < 0 {
		end = len(frame) - i
	}
	half := i + max(1, end/2)
	_ = sw.write(frame[:half])
	_ = sw.flush()
	sw.end()
	sw.abort(false)
	return errFaulted
}

// abort drops the connection: RST when reset, else FIN. Without the
// connection (another server serves the handler) it aborts the response.
func (sw *sseWriter) abort(reset bool) {
	if sw.conn == nil {
		panic(http.ErrAbortHandler)
	}
	if reset {
		resetConn(sw.conn)
	} else {
		_ = sw.conn.Close()
	}
}

// idle waits until wake is closed, d passes (d < 0: no limit) or the request
// ends, writing keepalives as due.
func (sw *sseWriter) idle(wake <-chan struct{}, d time.Duration) error {
	if err := sw.flush(); err != nil {
		return err
	}
	var until <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		until = t.C
	}
	for {
		var kt *time.Timer
		var ka <-chan time.Time
		if sw.keepalive > 0 {
			kt = time.NewTimer(time.Until(sw.last.Add(sw.keepalive)))
			ka = kt.C
		}
		var err error
		again := false
		select {
		case <-sw.ctx.Done():
			err = sw.ctx.Err()
		case <-wake:
		case <-until:
		case <-ka:
			again = true
			frame := keepaliveFrame
			if sw.endpoint == EndpointMessages {
				frame = pingFrame
			}
			if err = sw.write(frame); err == nil {
				err = sw.flush()
			}
		}
		if kt != nil {
			kt.Stop()
		}
		if !again || err != nil {
			return err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
