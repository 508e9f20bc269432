package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/guard"
)

// go-openai hides response headers and the [DONE] line, both of which
// recovery needs; watchingDoer records them on an observation carried in the
// request's context.
type watchingDoer struct{ c *http.Client }

type observationKey struct{}

type observation struct {
	retryAfter atomic.Int64 // nanoseconds
	done       atomic.Bool  // a `data: [DONE]` line was read
	status     atomic.Int32 // the response's HTTP status
	// patch, when set, edits the JSON request body before it is sent: the
	// fields of a continuation form that go-openai does not know (continue.go).
	patch func(body map[string]json.RawMessage) error
	// body is the response body, watched, that stream reads: go-openai
	// sends the request and reads the headers, but not the body.
	body io.Reader
}

func (o *observation) sawDone() bool { return o.done.Load() }

// classify attaches what was observed on the wire to a go-openai error.
func (o *observation) classify(err error) error {
	ce := diagnostics.Classify(err)
	out := &diagnostics.Error{Class: ce.Class, Status: ce.Status, RetryAfter: ce.RetryAfter, Err: err}
	if ra := time.Duration(o.retryAfter.Load()); ra > 0 {
		out.RetryAfter = ra
	}
	return out
}

func (d *watchingDoer) Do(req *http.Request) (*http.Response, error) {
	obs, _ := req.Context().Value(observationKey{}).(*observation)
	if obs != nil && obs.patch != nil && req.Body != nil {
		if err := patchBody(req, obs.patch); err != nil {
			return nil, err
		}
	}
	resp, err := provider.Send(d.c, req)
	if err != nil || obs == nil {
		return resp, err
	}
	obs.status.Store(int32(resp.StatusCode))
	if resp.StatusCode >= 400 {
		obs.retryAfter.Store(int64(diagnostics.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())))
		guard.BoundErrorBody(resp) // go-openai reads all of it, and quotes it in its error
		return resp, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		// A portal's HTML page or a JSON answer is no stream: go-openai would
		// find no data line in it and report a clean end, a "disconnect".
		err := guard.NotEventStream("chat stream", resp)
		_ = resp.Body.Close()
		return nil, err
	}
	w := &doneWatcher{r: resp.Body, obs: obs}
	resp.Body, obs.body = w, w
	return resp, nil
}

// patchBody rewrites req's JSON body with patch.
func patchBody(req *http.Request, patch func(map[string]json.RawMessage) error) error {
	raw, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("chat request body: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("chat request body: %w", err)
	}
	if err := patch(body); err != nil {
		return fmt.Errorf("chat request body: %w", err)
	}
	if raw, err = json.Marshal(body); err != nil {
		return fmt.Errorf("chat request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	req.ContentLength = int64(len(raw))
	return nil
}

var (
	doneLine = []byte("data: [DONE]")
	// doneMark is what scan searches for: not "[DONE]", whose '[' starts
	// the choices array of every chunk (each a false start of the search).
	doneMark = []byte("DONE]")
)

// doneWatcher passes the body through and notes a line that is exactly
// `data: [DONE]` (with or without the space). It does not walk the body line
// by line: that was ~1% of a fast stream's decoding. It looks at the line a
// read completes, then searches the whole lines a read holds for the marker
// (a chat chunk's JSON almost never contains it), and keeps only the first
// bytes of the line a read leaves open.
//
// It also bounds a line to max bytes (guard.MaxEventBytes): go-openai reads
// a line whole into memory, however long, so a server that never sends a
// newline would otherwise take all of it.
type doneWatcher struct {
	r       io.ReadCloser
	obs     *observation
	max     int    // longest line allowed; 0: guard.MaxEventBytes
	line    []byte // start of the current line, at most len(doneLine)+2 bytes
	lineLen int    // bytes of the current line so far
}

func (w *doneWatcher) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n == 0 {
		return n, err
	}
	limit := w.max
	if limit <= 0 {
		limit = guard.MaxEventBytes
	}
	b := p[:n]
	i := bytes.IndexByte(b, '\n')
	if i < 0 { // the open line goes on
		w.keep(b)
		if w.lineLen += len(b); w.lineLen > limit {
			return n, guard.LineLimit("chat stream")
		}
		return n, err
	}
	// The open line ends here.
	w.keep(b[:i])
	if w.lineLen+i > limit {
		return n, guard.LineLimit("chat stream")
	}
	if isDone(w.line) {
		w.obs.done.Store(true)
	}
	b = b[i+1:]
	// Whole lines, then the line this read leaves open.
	last := bytes.LastIndexByte(b, '\n')
	if last >= 0 {
		if last > limit && longLine(b[:last], limit) {
			return n, guard.LineLimit("chat stream")
		}
		w.scan(b[:last])
		b = b[last+1:]
	}
	w.line, w.lineLen = w.line[:0], len(b)
	w.keep(b)
	if w.lineLen > limit {
		return n, guard.LineLimit("chat stream")
	}
	return n, err
}

// scan notes a [DONE] line among whole lines (newline-separated, the last
// without its newline).
func (w *doneWatcher) scan(lines []byte) {
	for {
		k := bytes.Index(lines, doneMark)
		if k < 0 {
			return
		}
		start := bytes.LastIndexByte(lines[:k], '\n') + 1
		end := len(lines)
		if e := bytes.IndexByte(lines[k:], '\n'); e >= 0 {
			end = k + e
		}
		if isDone(lines[start:end]) {
			w.obs.done.Store(true)
			return
		}
		if end == len(lines) {
			return
		}
		lines = lines[end+1:] // past this line: a second marker in it is no [DONE] line either
	}
}

// longLine reports whether a line of lines is longer than limit.
func longLine(lines []byte, limit int) bool {
	for len(lines) > limit {
		i := bytes.IndexByte(lines, '\n')
		if i < 0 || i > limit {
			return true
		}
		lines = lines[i+1:]
	}
	return false
}

func (w *doneWatcher) keep(seg []byte) {
	if room := len(doneLine) + 2 - len(w.line); room > 0 {
		w.line = append(w.line, seg[:min(room, len(seg))]...)
	}
}

// isDone reports whether line (without its newline) is a [DONE] line.
func isDone(line []byte) bool {
	line = bytes.TrimSuffix(line, []byte("\r"))
	return bytes.Equal(line, doneLine) || bytes.Equal(line, []byte("data:[DONE]"))
}

func (w *doneWatcher) Close() error { return w.r.Close() }
