package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/chat/completions", s.handleChat)
	m.HandleFunc("POST /v1/responses", s.handleCreateResponse)
	m.HandleFunc("GET /v1/responses/{id}", s.handleGetResponse)
	m.HandleFunc("POST /v1/responses/{id}/cancel", s.handleCancel)
	m.HandleFunc("GET /v1/models", s.handleModels)
	m.HandleFunc("POST /v1/messages", s.handleMessages)
	// Google's API under both versions: the references address v1beta, the
	// @google/genai SDK (3.3.0) v1 by default.
	for _, v := range []string{"/v1beta", "/v1"} {
		m.HandleFunc("POST "+v+"/models/{call}", s.handleGemini)
		m.HandleFunc("POST "+v+"/interactions", s.handleCreateInteraction)
		m.HandleFunc("GET "+v+"/interactions/{id}", s.handleGetInteraction)
		m.HandleFunc("POST "+v+"/interactions/{id}/cancel", s.handleCancelInteraction)
	}
	m.HandleFunc("GET /sim/stats", s.handleStats)
	m.HandleFunc("POST /sim/faults", s.handleAddFault)
	m.HandleFunc("POST /sim/outage", s.handleOutage)
	m.HandleFunc("POST /sim/reset", s.handleReset)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "sim: no route for "+r.Method+" "+r.URL.Path, "")
	})
	return m
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	s.stats.request(EndpointModels)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
		map[string]any{"id": "sim", "object": "model", "created": 0, "owned_by": "noderun"},
	}})
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

// handleAddFault serves POST /sim/faults with one Fault, or a list of
// them, as JSON (the YAML field names, duration as "2s"; unknown fields are
// a 400). A list is armed whole or not at all.
func (s *Server) handleAddFault(w http.ResponseWriter, r *http.Request) {
	faults, list, err := readFaults(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	for _, f := range faults {
		s.faults.add(f)
	}
	if list {
		writeJSON(w, http.StatusCreated, faults)
		return
	}
	writeJSON(w, http.StatusCreated, faults[0])
}

// handleReset serves POST /sim/reset: faults dropped, counters zeroed, an
// outage ended. An optional body {"faults": [...]} arms those faults in the
// same step, so that no request sees the server in between.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var in struct {
		Faults []Fault `json:"faults"`
	}
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(&in)
	}
	if err == nil {
		err = s.Reset(in.Faults...)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reset": true, "faults": len(in.Faults)})
}

// readFaults reads one fault or a list of faults, each validated.
func readFaults(w http.ResponseWriter, r *http.Request) (faults []Fault, list bool, err error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return nil, false, err
	}
	body = bytes.TrimSpace(body)
	if list = len(body) > 0 && body[0] == '['; list {
		err = json.Unmarshal(body, &faults)
	} else {
		var f Fault
		err = json.Unmarshal(body, &f)
		faults = []Fault{f}
	}
	if err != nil {
		return nil, list, err
	}
	for i, f := range faults {
		if err := f.Validate(); err != nil {
			return nil, list, fmt.Errorf("fault %d: %w", i+1, err)
		}
	}
	return faults, list, nil
}

// handleOutage serves POST /sim/outage?for=2s: connections are refused for
// that long, then the server listens again. The listener is closed before
// the answer goes out, so a client that got the answer is refused; the
// asking connection itself is spared the reset and closed after the answer.
func (s *Server) handleOutage(w http.ResponseWriter, r *http.Request) {
	d, err := time.ParseDuration(r.URL.Query().Get("for"))
	if err != nil || d <= 0 || d > time.Hour {
		writeError(w, http.StatusBadRequest, "sim: want ?for=DURATION (e.g. 2s, at most 1h)", "for")
		return
	}
	if err := s.outageFor(d, connOf(r)); err != nil {
		writeError(w, http.StatusConflict, err.Error(), "")
		return
	}
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusAccepted, map[string]any{"outage": d.String()})
}
