// Package server serves one run journal over HTTP: the documents of the read
// commands as JSON (the schemas of docs/json.md), a run's events as
// server-sent events that a watcher resumes with Last-Event-ID, a node's
// stream status, the HTML report, a web page that follows runs live, and,
// when given Actions, starting, resuming and cancelling runs (docs/http.md).
//
// It reads through the same read side as the CLI (package runner/view and
// runner/ledger, over a journal opened read-only), so a body and the
// matching `--json` output cannot differ, and reading never takes a write
// lock from a runner or slows it. One poller per watched run reads the
// journal and fans its events out to that run's watchers through bounded
// buffers: a watcher too far behind leaves the live feed and reads what it
// missed from the journal at its own pace, so a slow watcher never slows the
// run or another watcher, nor holds more than its buffer.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/view"
)

// Defaults of Options.
const (
	DefaultPoll      = 20 * time.Millisecond
	DefaultKeepAlive = 15 * time.Second
	DefaultRetry     = 2 * time.Second
	DefaultBuffer    = 4096
	// MaxBody bounds a request body (a graph's YAML with its inputs).
	MaxBody = 8 << 20
)

// Options configure a Server.
type Options struct {
	// Journal is the journal served, opened read-only
	// (journal.OpenReadOnly): required.
	Journal *journal.Journal
	// Token, when set, is needed by every request: `Authorization: Bearer
	// TOKEN`, or the cookie the login page sets. Empty: reads are open (the
	// CLI allows that on a loopback address only) and writes need the
	// server's own random token, which the page carries (WriteToken).
	Token string
	// Actions start, resume and cancel runs; nil: the write endpoints
	// answer 501.
	Actions Actions
	// Prices price diagnose's figures (nil: none).
	Prices ledger.Prices
	// Logger gets the server's own log lines (default: discard).
	Logger *slog.Logger
	// Poll is how often a watched run's journal is read for new events
	// (DefaultPoll).
	Poll time.Duration
	// KeepAlive is the silence after which an event stream sends a comment
	// line, so that no gateway cuts an idle watcher (DefaultKeepAlive).
	KeepAlive time.Duration
	// Retry is the reconnection delay an event stream asks of its clients
	// (DefaultRetry).
	Retry time.Duration
	// Buffer is how many events a watcher may be behind the live feed
	// before it leaves it and reads the journal instead (DefaultBuffer).
	Buffer int
	// Temporal, when set, is a Temporal frontend whose runs are served too
	// (/api/temporal/...).
	Temporal *Temporal
	// LoopbackOnly makes the server refuse a request whose Host is not a
	// loopback name (DNS rebinding): set it when it listens on loopback
	// without a token.
	LoopbackOnly bool
}

// Server is an http.Handler serving one journal. Close it to end its
// event streams.
type Server struct {
	opts       Options
	j          *journal.Journal
	log        *slog.Logger
	mux        *http.ServeMux
	writeToken string

	ctx    context.Context // ends the event streams and pollers
	cancel context.CancelFunc

	mu         sync.Mutex
	hubs       map[string]*hub // by run id
	behind     atomic.Int64    // watchers that fell behind the live feed (Stats)
	fromMemory atomic.Int64    // watchers that joined from a hub's recent events (Stats)
}

// New makes a Server.
func New(opts Options) (*Server, error) {
	if opts.Journal == nil {
		return nil, errors.New("server: Options.Journal is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	s := &Server{opts: opts, j: opts.Journal, log: opts.Logger, hubs: map[string]*hub{}, writeToken: opts.Token}
	if s.writeToken == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		s.writeToken = hex.EncodeToString(b)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	return s, nil
}

// WriteToken is the token the write endpoints need (Options.Token, or the
// server's own).
func (s *Server) WriteToken() string { return s.writeToken }

// Close ends every event stream (its clients reconnect elsewhere or later)
// and the journal pollers. It does not close the journal.
func (s *Server) Close() error {
	s.cancel()
	return nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/runs", s.listRuns)
	m.HandleFunc("GET /api/runs/{run}", s.status)
	m.HandleFunc("GET /api/runs/{run}/events", s.events)
	m.HandleFunc("GET /api/runs/{run}/diagnose", s.diagnose)
	m.HandleFunc("GET /api/runs/{run}/report", s.report)
	m.HandleFunc("GET /api/runs/{run}/nodes/{node}/output", s.output)
	m.HandleFunc("GET /api/runs/{run}/nodes/{node}/attempts", s.attempts)
	m.HandleFunc("GET /api/runs/{run}/nodes/{node}/stream/status", s.streamStatus)
	m.HandleFunc("POST /api/runs", s.write(s.start))
	m.HandleFunc("POST /api/runs/{run}/resume", s.write(s.resume))
	m.HandleFunc("POST /api/runs/{run}/cancel", s.write(s.cancelRun))
	s.temporalRoutes(m)
	m.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no such endpoint: %s (docs/http.md lists them)", r.URL.Path))
	})
	s.pageRoutes(m)
	s.mux = m
}

// ServeHTTP checks the request's host and credentials, then serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if s.opts.LoopbackOnly && !loopbackHost(r.Host) {
		// A name that resolves to 127.0.0.1 in someone else's page (DNS
		// rebinding) must not reach an unauthenticated server.
		http.Error(w, "this server answers only to a loopback host name (127.0.0.1, localhost, [::1])", http.StatusMisdirectedRequest)
		return
	}
	if s.opts.Token != "" && !s.authorized(r) {
		if r.URL.Path == "/login" {
			s.login(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") || r.Method != http.MethodGet {
			w.Header().Set("WWW-Authenticate", `Bearer realm="noderun"`)
			s.fail(w, r, http.StatusUnauthorized, errors.New("this server needs its token: Authorization: Bearer TOKEN (docs/http.md)"))
			return
		}
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// cookieName holds the token a login set.
const cookieName = "noderun_token"

// authorized: the request carries the server's token.
func (s *Server) authorized(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && sameToken(tok, s.opts.Token) {
			return true
		}
	}
	if c, err := r.Cookie(cookieName); err == nil && sameToken(c.Value, s.opts.Token) {
		return true
	}
	return false
}

func sameToken(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errorBody is every error's body: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// fail answers an error, as JSON for the API and plain text elsewhere.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		s.log.Warn("serve: "+err.Error(), slog.String("path", r.URL.Path), slog.Int("status", code))
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		http.Error(w, err.Error(), code)
		return
	}
	writeJSON(w, code, errorBody{Error: err.Error()})
}

// writeJSON writes a document as the CLI prints it (two-space indent).
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// readErr maps a read's error to a status: what the request named is not
// there (404), is ambiguous (400), or the journal failed (500).
func (s *Server) readErr(w http.ResponseWriter, r *http.Request, err error) {
	var nf *view.RunNotFoundError
	var nn *view.NodeNotFoundError
	var amb *view.AmbiguousRunError
	switch {
	case errors.Is(err, view.ErrNoRuns), errors.As(err, &nf), errors.As(err, &nn), errors.Is(err, journal.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, err)
	case errors.As(err, &amb):
		s.fail(w, r, http.StatusBadRequest, err)
	case errors.Is(err, context.Canceled):
		// the client went away
	default:
		s.fail(w, r, http.StatusInternalServerError, err)
	}
}

// reply answers a document, or the error of reading it.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.readErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// run finds the run the path names: a full id, a unique prefix, or last.
func (s *Server) run(w http.ResponseWriter, r *http.Request) (journal.Run, bool) {
	run, err := view.FindRun(r.Context(), s.j, r.PathValue("run"))
	if err != nil {
		s.readErr(w, r, err)
		return journal.Run{}, false
	}
	return run, true
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	out, err := view.ListRuns(r.Context(), s.j, 50)
	s.reply(w, r, out, err)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	run, ok := s.run(w, r)
	if !ok {
		return
	}
	out, err := view.StatusOf(r.Context(), s.j, run)
	s.reply(w, r, out, err)
}

// node finds the run and node the path names.
func (s *Server) node(w http.ResponseWriter, r *http.Request) (journal.Run, journal.Node, bool) {
	run, ok := s.run(w, r)
	if !ok {
		return journal.Run{}, journal.Node{}, false
	}
	n, err := view.FindNode(r.Context(), s.j, run.ID, r.PathValue("node"))
	if err != nil {
		s.readErr(w, r, err)
		return journal.Run{}, journal.Node{}, false
	}
	return run, n, true
}

func (s *Server) output(w http.ResponseWriter, r *http.Request) {
	run, n, ok := s.node(w, r)
	if !ok {
		return
	}
	atts, err := s.j.Attempts(r.Context(), run.ID, n.ID)
	if err != nil {
		s.readErr(w, r, err)
		return
	}
	out, err := view.OutputOf(r.Context(), s.j, run.ID, n, atts)
	if err != nil {
		s.readErr(w, r, err)
		return
	}
	if r.URL.Query().Get("format") == "text" {
		// What `noderun show` prints, byte for byte.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = io.WriteString(w, out.Output)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) attempts(w http.ResponseWriter, r *http.Request) {
	run, n, ok := s.node(w, r)
	if !ok {
		return
	}
	out, err := view.AttemptsOf(r.Context(), s.j, run.ID, n.ID)
	s.reply(w, r, out, err)
}

func (s *Server) diagnose(w http.ResponseWriter, r *http.Request) {
	run, ok := s.run(w, r)
	if !ok {
		return
	}
	node := r.URL.Query().Get("node")
	if node != "" {
		if _, err := view.FindNode(r.Context(), s.j, run.ID, node); err != nil {
			s.readErr(w, r, err)
			return
		}
	}
	d, err := view.Diagnose(r.Context(), s.j, run.ID, node, s.opts.Prices)
	s.reply(w, r, d, err)
}

func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	run, ok := s.run(w, r)
	if !ok {
		return
	}
	lr, err := ledger.Load(r.Context(), s.j, run.ID, ledger.LoadOptions{Thinking: true})
	if err != nil {
		s.readErr(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The report is a page of its own, whole in itself: it loads nothing.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:")
	if err := ledger.WriteReport(w, lr, ledger.AccountOf(lr, ledger.PricesFor(lr, s.opts.Prices)), ledger.ReportOptions{}); err != nil {
		s.log.Warn("serve: report: "+err.Error(), slog.String("run", run.ID))
	}
}

// StreamStatus is what GET /api/runs/{run}/nodes/{node}/stream/status
// answers: whether a live runner is streaming the node (active), whether the
// journal holds its events (replay_available, with the last one's id), its
// state, and whether the run's runner is alive.
type StreamStatus struct {
	RunID           string `json:"run_id"`
	Node            string `json:"node"`
	Active          bool   `json:"active"`
	ReplayAvailable bool   `json:"replay_available"`
	LastEventID     int64  `json:"last_event_id"`
	State           string `json:"state"`
	RunnerAlive     bool   `json:"runner_alive"`
}

func (s *Server) streamStatus(w http.ResponseWriter, r *http.Request) {
	run, n, ok := s.node(w, r)
	if !ok {
		return
	}
	last, err := s.j.LastSeq(r.Context(), run.ID, n.ID)
	if err != nil {
		s.readErr(w, r, err)
		return
	}
	alive := run.Status == journal.RunRunning && !s.j.Abandoned(run)
	// A node its dead runner left running is interrupted (canceled), as
	// status shows it.
	state := journal.NodeStanding(n.State, s.j.Abandoned(run))
	writeJSON(w, http.StatusOK, StreamStatus{RunID: run.ID, Node: n.ID, Active: alive && state == journal.NodeRunning,
		ReplayAvailable: last > 0, LastEventID: last, State: string(state), RunnerAlive: alive})
}
