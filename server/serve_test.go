package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/server"
)

// Serve answers on its listener until its context ends, then returns nil
// and the socket is closed; a listener that fails ends it with the error.
func TestServeUntilDone(t *testing.T) {
	db := filepath.Join(t.TempDir(), "j.db")
	j := testkit.OpenJournal(t, db)
	srv, err := server.New(server.Options{Journal: j, LoopbackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/api/runs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/runs: %s", resp.Status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return once its context ended")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/api/runs"); err == nil {
		t.Error("the socket still answers after Serve returned")
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	srv2, err := server.New(server.Options{Journal: j, LoopbackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv2.Serve(context.Background(), closed); err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve on a closed listener: %v", err)
	}
}
