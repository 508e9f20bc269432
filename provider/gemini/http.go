package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider/guard"
	"github.com/noderun/noderun/provider/idle"
)

// maxObjectBytes bounds one non-streamed interaction read by a status check.
const maxObjectBytes = 64 << 20

// apiError is an HTTP error answer: Google's {"error": {"code", "message",
// "status"}} body, or whatever the body was.
type apiError struct {
	StatusCode int
	Status     string // e.g. RESOURCE_EXHAUSTED, from the body
	Message    string
	// Quotas are the quotas a 429's QuotaFailure detail says were spent
	// (their quotaId, e.g. GenerateRequestsPerMinutePerProjectPerModel):
	// an operator tells a per-minute blip from a per-day wall by them.
	Quotas []string

	retryDelay time.Duration // RetryInfo.retryDelay from the body, 0 if none
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.StatusCode)
	if e.Status != "" {
		s += " " + e.Status
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if len(e.Quotas) > 0 {
		s += " (quota " + strings.Join(e.Quotas, ", ") + ")"
	}
	return s
}

// statusError classifies a non-200 answer by its HTTP status (401/403/400/
// 404 deterministic, 429 rate limited with Retry-After, 5xx transient), the
// way every adapter does through diagnostics.FromStatus.
func statusError(op string, resp *http.Response) error {
	guard.BoundErrorBody(resp)
	body, _ := io.ReadAll(resp.Body)
	ae := &apiError{StatusCode: resp.StatusCode}
	var eb struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && len(eb.Error) > 0 {
		var e struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
				Violations []struct {
					QuotaID string `json:"quotaId"`
				} `json:"violations"`
			} `json:"details"`
		}
		if json.Unmarshal(eb.Error, &e) == nil {
			ae.Message, ae.Status = e.Message, e.Status
			for _, d := range e.Details {
				switch d.Type {
				case retryInfoType:
					ae.retryDelay = retryDelay(d.RetryDelay)
				case quotaFailureType:
					for _, v := range d.Violations {
						if v.QuotaID != "" && len(ae.Quotas) < 4 {
							ae.Quotas = append(ae.Quotas, v.QuotaID)
						}
					}
				}
			}
		} else {
			ae.Message = strings.TrimSpace(string(eb.Error))
		}
	} else {
		ae.Message = strings.TrimSpace(string(body))
	}
	class := diagnostics.FromStatus(resp.StatusCode)
	if class == diagnostics.ClassNone {
		class = diagnostics.ClassDeterministic // e.g. 204 "stop reconnecting"
	}
	ra := diagnostics.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if ra == 0 {
		ra = ae.retryDelay // how Google says when to come back: in the body
	}
	return &diagnostics.Error{
		Class:      class,
		Status:     resp.StatusCode,
		RetryAfter: ra,
		Err:        fmt.Errorf("gemini %s: %w", op, ae),
	}
}

// retryInfoType is the error detail that says when to retry
// (google.rpc.RetryInfo, https://ai.google.dev/gemini-api/docs/rate-limits;
// https://cloud.google.com/apis/design/errors#retryinfo): a 429's
// "details": [{"@type": retryInfoType, "retryDelay": "3s"}].
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// quotaFailureType is the error detail that names the quotas a 429 spent
// (google.rpc.QuotaFailure, https://ai.google.dev/gemini-api/docs/rate-limits).
const quotaFailureType = "type.googleapis.com/google.rpc.QuotaFailure"

// retryDelay reads a RetryInfo's retryDelay, a protobuf Duration in JSON
// ("3s", "0.500s", "12.5s"); 0 when it is not one, and at most a day.
func retryDelay(v string) time.Duration {
	secs, ok := strings.CutSuffix(strings.TrimSpace(v), "s")
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil || f <= 0 || math.IsNaN(f) {
		return 0
	}
	return time.Duration(min(f, 86400) * float64(time.Second))
}

// checkEventStream fails a 200 answer that is not an event stream.
func checkEventStream(op string, resp *http.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		return nil
	}
	return guard.NotEventStream("gemini "+op, resp)
}

// conn is one open event stream.
type conn struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	dog    *idle.Watchdog
}

func (c *conn) close() {
	c.dog.Stop()
	_ = c.body.Close()
	c.cancel()
}

// Attach opens GET {version}/interactions/{id}?stream=true[&last_event_id=…].
func (s *session) Attach(ctx context.Context) (*conn, error) {
	p := s.p
	q := url.Values{"stream": {"true"}}
	from := "the start"
	// Resume after the latest event whose event_id is known at or before the
	// cursor: this session's, else this process's (an earlier session on the
	// same interaction), else the journal's (a mark another process left);
	// without one, from the start (ordinal -1). The journal's mark counts
	// whatever the cursor: it is journaled after the data before it, and
	// the cursor counts only data, so what lies between them is progress
	// (a thought signature, a step's end), nothing to re-read.
	s.ord = -1
	if s.lastID == "" || s.lastIDSeq > s.seq {
		s.lastID, s.lastIDSeq = "", -1
		if m, ok := p.markOf(s.ref); ok && m.id != "" && m.seq <= s.seq {
			s.lastID, s.lastIDSeq = m.id, m.seq
		} else if j := s.journaled; j != nil && j.Token != "" {
			s.lastID, s.lastIDSeq = j.Token, j.Seq // another process's, from the journal
			s.seq = max(s.seq, j.Seq)
		}
	}
	if s.lastID != "" {
		q.Set("last_event_id", s.lastID)
		s.ord = s.lastIDSeq
		from = fmt.Sprintf("event %d (event_id %s)", s.lastIDSeq, s.lastID)
	}
	cctx, cancel := context.WithCancel(ctx)
	dog := idle.NewWatchdog(s.req.Policy.PollAfter.D(), cancel)
	resp, err := p.do(cctx, http.MethodGet, "/interactions/"+url.PathEscape(s.ref)+"?"+q.Encode(), nil,
		http.Header{"Accept": {"text/event-stream"}, "Cache-Control": {"no-cache"}})
	if err != nil {
		dog.Stop()
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("gemini re-attach %s: %w", s.ref, ctx.Err())
		case dog.Idle():
			return nil, idle.ErrSilent
		}
		return nil, fmt.Errorf("gemini re-attach %s: %w", s.ref, err)
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
	if err := s.diag(diagnostics.Reattached, fmt.Sprintf("re-attached to interaction %s from %s", s.ref, from)); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}
