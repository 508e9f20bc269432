package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/idle"
)

// capture records the HTTP response of one go-openai call: go-openai hides
// the headers of failed requests (Retry-After) and the body of a stream it
// would otherwise parse itself.
type capture struct {
	resp *http.Response
}

type captureKey struct{}

func withCapture(ctx context.Context, c *capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// doer is the go-openai HTTPDoer: the plain http.Client, recording the
// response in the request's capture. It never retries.
type doer struct{ hc *http.Client }

func (d doer) Do(req *http.Request) (*http.Response, error) {
	resp, err := provider.Send(d.hc, req)
	if resp != nil && resp.StatusCode >= 400 {
		guard.BoundErrorBody(resp) // go-openai reads all of it, and quotes it in its error
	}
	if c, ok := req.Context().Value(captureKey{}).(*capture); ok && resp != nil {
		c.resp = resp
	}
	return resp, err
}

// apiError turns an error of a go-openai call into a classified error with
// the HTTP status and Retry-After when there was an HTTP answer.
func (p *Provider) apiError(ctx context.Context, op string, cp *capture, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("responses %s: %w", op, cerr)
	}
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	if status == 0 {
		// Transport error (refused, reset, EOF): diagnostics.Classify knows these.
		return fmt.Errorf("responses %s: %w", op, err)
	}
	var header http.Header
	if cp != nil && cp.resp != nil {
		header = cp.resp.Header
	}
	return classified(op, status, header, err)
}

func classified(op string, status int, header http.Header, err error) error {
	class := diagnostics.Classify(err).Class // FromStatus, plus the context-length override
	if class == diagnostics.ClassNone {
		class = diagnostics.ClassDeterministic // e.g. 204 "stop reconnecting"
	}
	return &diagnostics.Error{
		Class:      class,
		Status:     status,
		RetryAfter: diagnostics.ParseRetryAfter(header.Get("Retry-After"), time.Now()),
		Err:        fmt.Errorf("responses %s: %w", op, err),
	}
}

// statusError reads a non-200 answer to one of our own requests.
func statusError(op string, resp *http.Response) error {
	guard.BoundErrorBody(resp)
	body, _ := io.ReadAll(resp.Body)
	var inner error
	var er openai.ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error != nil {
		er.Error.HTTPStatus = resp.Status
		er.Error.HTTPStatusCode = resp.StatusCode
		inner = er.Error
	} else {
		inner = &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode,
			Err: errors.New(strings.TrimSpace(string(body))), Body: body}
	}
	return classified(op, resp.StatusCode, resp.Header, inner)
}

// checkEventStream fails a 200 answer that is not an event stream (the
// WHATWG rule: a wrong Content-Type fails the connection).
func checkEventStream(op string, resp *http.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		return nil
	}
	return guard.NotEventStream("responses "+op, resp)
}

// conn is one open event stream.
type conn struct {
	body   io.ReadCloser
	cancel context.CancelFunc // ends the request
	closer func() error
	dog    *idle.Watchdog
}

func (c *conn) close() {
	c.dog.Stop()
	if c.closer != nil {
		_ = c.closer()
	} else {
		_ = c.body.Close()
	}
	c.cancel()
}

// Attach opens GET /responses/{id}?stream=true&starting_after=<seq>: go-openai
// has no streaming resume (its RetrieveResponse only decodes JSON), so this is
// our own request, read with provider/sse like the create stream.
func (s *session) Attach(ctx context.Context) (*conn, error) {
	p := s.p
	q := url.Values{"stream": {"true"}}
	if s.seq >= 0 {
		q.Set("starting_after", strconv.FormatInt(s.seq, 10))
	}
	u := p.base + "/responses/" + url.PathEscape(s.ref) + "?" + q.Encode()
	cctx, cancel := context.WithCancel(ctx)
	hreq, err := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("responses re-attach: %w", err)}
	}
	dog := idle.NewWatchdog(s.req.Policy.PollAfter.D(), cancel)
	if p.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.key)
	}
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Cache-Control", "no-cache")
	resp, err := provider.Send(p.hc, hreq)
	if err != nil {
		dog.Stop()
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("responses re-attach %s: %w", s.ref, ctx.Err())
		case dog.Idle():
			s.log.Debug("re-attach got no answer within the idle window", diagnostics.KeyRef.Attr(s.ref), diagnostics.KeySeq.Attr(s.seq))
			return nil, idle.ErrSilent
		}
		return nil, fmt.Errorf("responses re-attach %s: %w", s.ref, err)
	}
	c := &conn{body: resp.Body, cancel: cancel, dog: dog}
	if resp.StatusCode != http.StatusOK {
		err := statusError("re-attach "+s.ref, resp)
		c.close()
		return nil, err
	}
	if err := checkEventStream("re-attach "+s.ref, resp); err != nil {
		c.close()
		return nil, err
	}
	s.lastEventAt = time.Now()
	if err := s.diag(diagnostics.Reattached, fmt.Sprintf("re-attached to %s from sequence %d", s.ref, s.seq)); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}
