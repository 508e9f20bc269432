package sim

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Server is one simulator: an HTTP server on 127.0.0.1 and the responses it
// holds. Create it with New, then Start it; Close ends every goroutine it
// started (listeners, connections, handlers, background generators).
type Server struct {
	cfg    Config
	log    *slog.Logger
	faults faultSet
	stats  counters
	limits *limiter // nil without Config.Limits: the no-limits path is one nil check
	store  store
	mux    *http.ServeMux
	// prompts are the system prompts written to the prompt cache (Messages API)
	prompts sync.Map

	ctx    context.Context // canceled by Close; the base of every request and generator
	cancel context.CancelFunc
	cfgErr error // the first invalid configured fault; Start reports it

	mu      sync.Mutex
	closed  bool
	addr    string       // fixed by Start, reused after an outage
	ln      net.Listener // nil before Start and during an outage
	srv     *http.Server
	conns   map[net.Conn]struct{}
	outages int // bumps on every SetOutage, so a timed outage ends only its own

	// wg counts the serve loops, the connections (so their handlers) and
	// the goroutines they start. Every Add happens either under mu before
	// closed is set, or from a goroutine wg already counts, so Close's Wait
	// cannot race an Add from zero.
	wg sync.WaitGroup
}

// New returns a Server for cfg; it serves nothing until Start.
func New(cfg Config) *Server {
	if cfg.Tokens <= 0 {
		cfg.Tokens = DefaultTokens
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: lg, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	s.store.retention = Retention
	if cfg.Limits != nil {
		if err := cfg.Limits.Validate(); err != nil {
			// not enforced: Start fails, and a mounted Handler runs without it
			s.cfgErr = fmt.Errorf("sim: %w", err)
			lg.Error("sim: invalid limits ignored", "err", err)
		} else {
			s.limits = newLimiter(*cfg.Limits)
		}
	}
	for i, f := range cfg.Faults {
		if err := f.Validate(); err != nil {
			// not armed: Start fails, and a mounted Handler runs without it
			if s.cfgErr == nil {
				s.cfgErr = fmt.Errorf("sim: fault %d: %w", i+1, err)
			}
			lg.Error("sim: invalid fault ignored", "fault", i+1, "err", err)
			continue
		}
		s.faults.add(f)
	}
	s.mux = s.routes()
	return s
}

// Handler returns the simulator's HTTP handler, for mounting elsewhere.
// Served by another server, reset and cut faults degrade to aborting the
// response (http.ErrAbortHandler), refuse faults and SetOutage do nothing,
// and invalid configured faults (which make Start fail) are left out.
func (s *Server) Handler() http.Handler { return s.mux }

// Start listens on addr ("" = 127.0.0.1 on a random port) and serves in the
// background. It fails if a configured fault is invalid.
func (s *Server) Start(addr string) error {
	if s.cfgErr != nil {
		return s.cfgErr
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sim: server closed")
	}
	if s.srv != nil {
		return errors.New("sim: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.addr = ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: s.connState,
		ErrorLog:  log.New(discardWriter{}, "", 0),
	}
	s.serveLocked(ln)
	s.log.Info("simulator serving at http://"+s.addr+"/v1", "base_url", "http://"+s.addr+"/v1")
	return nil
}

// serveLocked serves ln in a counted goroutine; s.mu is held.
func (s *Server) serveLocked(ln net.Listener) {
	s.ln = ln
	srv := s.srv
	s.wg.Go(func() {
		// Serve returns when the listener closes (outage or Close).
		_ = srv.Serve(refusingListener{ln, s})
	})
}

// BaseURL is the OpenAI base URL, "http://127.0.0.1:PORT/v1".
func (s *Server) BaseURL() string { return "http://" + s.Addr() + "/v1" }

// Addr is "127.0.0.1:PORT", "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops the server: it stops listening, closes every connection,
// stops the background generators and waits for all their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	s.cancel()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	s.wg.Wait()
	return err
}

// AddFault adds a fault at runtime; it applies to requests that arrive after
// it. It panics on a fault that does not Validate (a programming error;
// POST /sim/faults validates and answers 400 instead).
func (s *Server) AddFault(f Fault) {
	if err := f.Validate(); err != nil {
		panic("sim: AddFault: " + err.Error())
	}
	s.faults.add(f)
}

// Reset makes the server as good as new for the next test case: it drops
// every fault, zeroes every counter, refills every rate-limit bucket, ends
// an outage, and then arms faults.
// Stored responses are kept (their ids are unique); responses still
// generating go on.
func (s *Server) Reset(faults ...Fault) error {
	for i, f := range faults {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("sim: fault %d: %w", i+1, err)
		}
	}
	s.mu.Lock()
	s.outages++
	var err error
	if s.srv != nil && s.ln == nil && !s.closed {
		err = s.setOutageLocked(false, nil)
	}
	s.mu.Unlock()
	s.faults.reset()
	s.stats.reset()
	if s.limits != nil {
		s.limits.reset()
	}
	for _, f := range faults {
		s.faults.add(f)
	}
	s.log.Info(fmt.Sprintf("simulator reset: %d faults", len(faults)), "faults", len(faults))
	return err
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	st := s.stats.snapshot()
	s.mu.Lock()
	st.OpenConnections = len(s.conns)
	s.mu.Unlock()
	return st
}

// SetOutage(true) stops listening, so new connections are refused
// (ECONNREFUSED), and resets every open connection, idle ones included, so
// that no client keeps talking over a pooled connection. Background
// responses keep generating, as the provider's work outlives its network.
// SetOutage(false) listens again on the same address.
func (s *Server) SetOutage(on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outages++
	return s.setOutageLocked(on, nil)
}

// setOutageLocked starts or ends an outage; except is a connection not to
// reset (the one that asked for the outage over HTTP). s.mu is held.
func (s *Server) setOutageLocked(on bool, except net.Conn) error {
	switch {
	case s.closed:
		return errors.New("sim: server closed")
	case s.srv == nil:
		return errors.New("sim: not started")
	case on && s.ln == nil, !on && s.ln != nil:
		return nil
	case on:
		err := s.ln.Close()
		s.ln = nil
		for c := range s.conns {
			if c != except {
				resetConn(c)
			}
		}
		s.log.Info("simulated outage started")
		return err
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("sim: listen again: %w", err)
	}
	s.serveLocked(ln)
	s.log.Info("simulated outage ended")
	return nil
}

// outageFor starts an outage that ends by itself after d, unless another
// SetOutage happened meanwhile.
func (s *Server) outageFor(d time.Duration, except net.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outages++
	gen := s.outages
	if err := s.setOutageLocked(true, except); err != nil {
		return err
	}
	s.wg.Go(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		// With nothing listening on it, the port may have been taken
		// meanwhile: the kernel can give it to any client's connection as
		// its own end. The outage then lasts until that end is closed, not
		// for good (the error was dropped before, and the server never
		// listened again).
		for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			s.mu.Lock()
			if s.closed || s.outages != gen { // closed, or another outage's to end
				s.mu.Unlock()
				return
			}
			err := s.setOutageLocked(false, nil)
			s.mu.Unlock()
			if err == nil {
				return
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				s.log.Error("simulated outage: cannot listen again", "addr", s.addr, "err", err)
				return
			}
			s.log.Warn("simulated outage: its address is taken; listening again in "+wait.String(), "addr", s.addr, "err", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	})
	return nil
}

// connState tracks open connections, for outages and for Close to wait on.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		s.mu.Lock()
		if _, ok := s.conns[c]; ok {
			delete(s.conns, c)
			s.wg.Done()
		}
		s.mu.Unlock()
	}
}

type connKey struct{}

// connOf is the TCP connection a request arrived on, nil when the handler
// is served by someone else's server.
func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// resetConn closes c with an RST instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// refusingListener applies refuse faults: it accepts a connection and
// resets it at once, before the HTTP server sees it.
type refusingListener struct {
	net.Listener
	s *Server
}

func (l refusingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		n := l.s.stats.connections.Add(1)
		if !l.s.faults.refuse(n) {
			return c, nil
		}
		l.s.stats.fault(FaultRefuse)
		l.s.log.Info(fmt.Sprintf("simulated fault: %s connection %d", FaultRefuse, n), "kind", FaultRefuse, "connection", n)
		resetConn(c)
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
