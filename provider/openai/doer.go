package openai

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/noderun/noderun/diagnostics"
)

// go-openai hides response headers and the [DONE] line, both of which
// recovery needs; watchingDoer records them on an observation carried in the
// request's context.
type watchingDoer struct{ c *http.Client }

type observationKey struct{}

type observation struct {
	retryAfter atomic.Int64 // nanoseconds
	done       atomic.Bool  // a `data: [DONE]` line was read
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
	resp, err := d.c.Do(req)
	obs, _ := req.Context().Value(observationKey{}).(*observation)
	if err != nil || obs == nil {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		obs.retryAfter.Store(int64(diagnostics.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())))
		return resp, nil
	}
	resp.Body = &doneWatcher{r: resp.Body, obs: obs}
	return resp, nil
}

var doneLine = []byte("data: [DONE]")

// doneWatcher passes the body through and notes a line that is exactly
// `data: [DONE]` (with or without the space). It keeps only the current
// line's prefix, so it costs nothing on long streams.
type doneWatcher struct {
	r    io.ReadCloser
	obs  *observation
	line []byte // start of the current line, at most len(doneLine)+1 bytes
}

func (w *doneWatcher) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' || b == '\r' {
			if isDone(w.line) {
				w.obs.done.Store(true)
			}
			w.line = w.line[:0]
			continue
		}
		if len(w.line) <= len(doneLine) {
			w.line = append(w.line, b)
		}
	}
	return n, err
}

func isDone(line []byte) bool {
	return bytes.Equal(line, doneLine) || bytes.Equal(line, []byte("data:[DONE]"))
}

func (w *doneWatcher) Close() error { return w.r.Close() }
