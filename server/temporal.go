package server

import (
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/noderun/noderun/journal"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// Temporal is a Temporal frontend whose runs the server shows as well
// (serve --temporal): the runs list and a page per run, from the
// workflows' histories as `status --temporal` and `diagnose --temporal`
// read them. Their workers' journals are on their own machines: what a
// run streamed token by token is not served (docs/http.md).
type Temporal struct {
	Client client.Client
	// Address is the frontend's HOST:PORT, as the documents name it.
	Address string
}

func (s *Server) temporalRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /api/temporal/runs", s.temporalRuns)
	m.HandleFunc("GET /api/temporal/runs/{run}", s.temporalRun)
	m.HandleFunc("GET /api/temporal/runs/{run}/nodes/{node}/output", s.temporalOutput)
}

// temporal is the frontend, or a 404 saying the server has none.
func (s *Server) temporal(w http.ResponseWriter, r *http.Request) (*Temporal, bool) {
	if s.opts.Temporal == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("this server reads no Temporal frontend: start it with serve --temporal HOST:PORT"))
		return nil, false
	}
	return s.opts.Temporal, true
}

// temporalRuns is `status --temporal --json`.
func (s *Server) temporalRuns(w http.ResponseWriter, r *http.Request) {
	t, ok := s.temporal(w, r)
	if !ok {
		return
	}
	runs, err := ntemporal.ListRuns(r.Context(), t.Client, 50)
	if err != nil {
		s.temporalErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ntemporal.RunList{Temporal: t.Address, Runs: runs})
}

// temporalRun is `diagnose --temporal RUN --json`.
func (s *Server) temporalRun(w http.ResponseWriter, r *http.Request) {
	t, ok := s.temporal(w, r)
	if !ok {
		return
	}
	d, _, err := ntemporal.Diagnose(r.Context(), t.Client, r.PathValue("run"))
	if err != nil {
		s.temporalErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// temporalOutput is `show --temporal RUN NODE`: a completed node's output
// as its workflow holds it.
func (s *Server) temporalOutput(w http.ResponseWriter, r *http.Request) {
	t, ok := s.temporal(w, r)
	if !ok {
		return
	}
	runID, node := r.PathValue("run"), r.PathValue("node")
	st, err := ntemporal.State(r.Context(), t.Client, runID)
	if err != nil {
		s.temporalErr(w, r, err)
		return
	}
	for _, n := range st.Nodes {
		if n.Node != node {
			continue
		}
		if n.State != string(journal.NodeCompleted) {
			s.fail(w, r, http.StatusConflict, fmt.Errorf("node %s is %s; its partial output is in the journal of worker %s", node, n.State, n.Worker))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(n.Output))
		return
	}
	s.fail(w, r, http.StatusNotFound, fmt.Errorf("run %s has no node %q on Temporal (yet)", runID, node))
}

// temporalErr: a run the frontend does not know is a 404; a frontend that
// does not answer, a 502.
func (s *Server) temporalErr(w http.ResponseWriter, r *http.Request, err error) {
	var nf *serviceerror.NotFound
	switch {
	case errors.Is(err, journal.ErrNotFound), errors.As(err, &nf):
		s.fail(w, r, http.StatusNotFound, err)
	case r.Context().Err() != nil:
	default:
		s.fail(w, r, http.StatusBadGateway, err)
	}
}
