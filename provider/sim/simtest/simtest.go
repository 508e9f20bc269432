// Package simtest starts a provider simulator for a Go test: on 127.0.0.1,
// on a free port, closed (every connection, handler and generator ended)
// when the test ends. Users' own Go tests of their graphs can use it too.
package simtest

import (
	"testing"

	"github.com/noderun/noderun/provider/sim"
)

// Start starts a simulator with cfg and closes it in t.Cleanup.
func Start(t testing.TB, cfg sim.Config) *sim.Server {
	t.Helper()
	srv := sim.New(cfg)
	if err := srv.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}
