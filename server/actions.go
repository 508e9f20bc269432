package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/noderun/noderun/runner"
)

// Actions start, resume and cancel runs for the write endpoints. They run
// in the server's process, not the request's: a run goes on when the
// browser that started it goes away. Local is the implementation on a
// journal; errors are typed so the server answers with the right status
// (see BadRequest and Conflict).
type Actions interface {
	// Start runs a graph; it returns once the run is journaled (or could
	// not start), with its id.
	Start(ctx context.Context, req StartRequest) (runID string, err error)
	// Resume continues an unfinished run, replaying the nodes in retry
	// whatever their side effects.
	Resume(ctx context.Context, runID string, retry []string) error
	// Cancel stops at the provider what an interrupted run left running (of
	// nodes, or of every unfinished node).
	Cancel(ctx context.Context, runID string, nodes []string) ([]runner.Cancelled, error)
}

// StartRequest is the body of POST /api/runs: a graph file under the
// served directory, or a graph's YAML, with its inputs.
type StartRequest struct {
	// Graph is a graph file's path, relative to the served directory.
	Graph string `json:"graph,omitempty"`
	// YAML is a graph's text, when Graph is empty.
	YAML string `json:"yaml,omitempty"`
	// Inputs are the graph's inputs, as `run --input KEY=VALUE` gives them.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Profile overrides the graph's recovery profile.
	Profile string `json:"profile,omitempty"`
}

// ResumeRequest is the body of POST /api/runs/{run}/resume.
type ResumeRequest struct {
	// Retry names nodes to send again, side effects or not (`--retry`).
	Retry []string `json:"retry,omitempty"`
}

// CancelRequest is the body of POST /api/runs/{run}/cancel.
type CancelRequest struct {
	// Nodes to cancel; empty: every unfinished one.
	Nodes []string `json:"nodes,omitempty"`
}

// BadRequest is an error in what a write asked for (400): a graph that does
// not parse, an input missing, a node the run lacks.
type BadRequest struct{ Err error }

func (e *BadRequest) Error() string { return e.Err.Error() }
func (e *BadRequest) Unwrap() error { return e.Err }

// Conflict is a write the run's state refuses (409): the run is held by
// another live runner (the message names it), or has nothing to resume.
type Conflict struct{ Err error }

func (e *Conflict) Error() string { return e.Err.Error() }
func (e *Conflict) Unwrap() error { return e.Err }

// write wraps a write endpoint: the token (always needed, even where reads
// are open), a POST from the same origin with a bounded JSON body.
func (s *Server) write(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Actions == nil {
			s.fail(w, r, http.StatusNotImplemented, errors.New("this server does not start, resume or cancel runs"))
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !sameToken(tok, s.writeToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="noderun"`)
			s.fail(w, r, http.StatusUnauthorized, errors.New("a write needs the server's token: Authorization: Bearer TOKEN (docs/http.md)"))
			return
		}
		if err := sameOrigin(r); err != nil {
			s.fail(w, r, http.StatusForbidden, err)
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			s.fail(w, r, http.StatusUnsupportedMediaType, errors.New("a write's body is JSON: Content-Type: application/json"))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				s.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is over %d bytes", tooBig.Limit))
				return
			}
			s.fail(w, r, http.StatusBadRequest, err)
			return
		}
		h(w, r, body)
	}
}

// sameOrigin refuses a request another site's page sent: its Origin (when
// the browser gives one) must be this server's.
func sameOrigin(r *http.Request) error {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errors.New("a write from another site's page is refused")
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return nil // not a browser's cross-origin request (curl, a script)
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("a write from origin %q is refused: not this server's (%s)", o, r.Host)
	}
	return nil
}

// decode reads a write's JSON body into v; unknown fields are an error, so
// that a misspelt one is not silently ignored.
func decode(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body: %w", err)
	}
	return nil
}

// decodeOr400 decodes a write's body, or answers 400 saying what is wrong.
func decodeOr400[T any](s *Server, w http.ResponseWriter, r *http.Request, body []byte) (T, bool) {
	var req T
	if err := decode(body, &req); err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return req, false
	}
	return req, true
}

// actionErr answers an action's error with its status.
func (s *Server) actionErr(w http.ResponseWriter, r *http.Request, err error) {
	var bad *BadRequest
	var conflict *Conflict
	switch {
	case errors.As(err, &bad):
		s.fail(w, r, http.StatusBadRequest, err)
	case errors.As(err, &conflict):
		s.fail(w, r, http.StatusConflict, err)
	default:
		s.readErr(w, r, err)
	}
}

// Started is the answer of a write that started a run: its id and page.
type Started struct {
	RunID string `json:"run_id"`
	URL   string `json:"url"`
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, body []byte) {
	req, ok := decodeOr400[StartRequest](s, w, r, body)
	if !ok {
		return
	}
	id, err := s.opts.Actions.Start(r.Context(), req)
	if err != nil {
		s.actionErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, Started{RunID: id, URL: "/runs/" + id})
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request, body []byte) {
	req, ok := decodeOr400[ResumeRequest](s, w, r, body)
	if !ok {
		return
	}
	run, ok := s.run(w, r)
	if !ok {
		return
	}
	if err := s.opts.Actions.Resume(r.Context(), run.ID, req.Retry); err != nil {
		s.actionErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, Started{RunID: run.ID, URL: "/runs/" + run.ID})
}

// CancelResult is the answer of POST /api/runs/{run}/cancel: a line per
// response cancel tried, as `noderun cancel` prints them.
type CancelResult struct {
	RunID     string          `json:"run_id"`
	Cancelled []CancelledNode `json:"cancelled"`
}

// CancelledNode is what cancel did for one node.
type CancelledNode struct {
	Node  string `json:"node"`
	Ref   string `json:"ref,omitempty"`
	Note  string `json:"note"`
	Error string `json:"error,omitempty"`
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, body []byte) {
	req, ok := decodeOr400[CancelRequest](s, w, r, body)
	if !ok {
		return
	}
	run, ok := s.run(w, r)
	if !ok {
		return
	}
	done, err := s.opts.Actions.Cancel(r.Context(), run.ID, req.Nodes)
	if err != nil {
		s.actionErr(w, r, err)
		return
	}
	out := CancelResult{RunID: run.ID, Cancelled: []CancelledNode{}}
	for _, d := range done {
		c := CancelledNode{Node: d.Node, Ref: d.Ref, Note: d.Note}
		if d.Err != nil {
			c.Error = d.Err.Error()
		}
		out.Cancelled = append(out.Cancelled, c)
	}
	writeJSON(w, http.StatusOK, out)
}
