package server

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Serve serves s on ln until ctx ends, then stops: s's event streams end
// (their clients reconnect later) and the requests under way get a few
// seconds to finish. It closes s, and ln with the HTTP server. Its error is
// the HTTP server's when it stopped for another reason than ctx.
//
// The HTTP server's limits keep a slow or idle client from holding a
// connection open: ten seconds for a request's header, two minutes idle
// between requests, 64 KiB of header.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx) // past the grace period, the requests left are cut
	<-done
	return nil
}
