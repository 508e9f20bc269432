package conns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimit dials a real listener on 127.0.0.1 from many goroutines at once
// through a dial func that holds each connect open a moment: no more than n
// are ever in flight to one address, and every dial gets through.
func TestLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	var inFlight, peak atomic.Int64
	var d net.Dialer
	slow := func(ctx context.Context, network, addr string) (net.Conn, error) {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		return d.DialContext(ctx, network, addr)
	}
	const n, dials = 3, 40
	dial := Limit(slow, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range dials {
		wg.Go(func() {
			c, err := dial(context.Background(), "tcp", ln.Addr().String())
			if err != nil {
				failed.Add(1)
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d dials failed", failed.Load())
	}
	if p := peak.Load(); p > n || p < 1 {
		t.Fatalf("peak concurrent dials %d, want 1..%d", p, n)
	}
}

// TestLimitWaitEndsWithContext: a dial waiting for a turn gives up when its
// context ends, with the context's cause.
func TestLimitWaitEndsWithContext(t *testing.T) {
	release := make(chan struct{})
	block := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "127.0.0.1:2" {
			return nil, nil
		}
		<-release
		return nil, errors.New("released")
	}
	dial := Limit(block, 1)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = dial(context.Background(), "tcp", "127.0.0.1:1") }()
	time.Sleep(10 * time.Millisecond) // the first dial holds the only slot
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := dial(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting dial: %v, want context.DeadlineExceeded", err)
	}
	// Another address has slots of its own.
	if _, err := dial(context.Background(), "tcp", "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
}

// TestTransportCountsRequestsInFlight sends streams through Transport to a
// real server on 127.0.0.1: a request counts from when it is sent to when
// its answer's body ends (read to its end) or is closed, once; a request
// that fails does not count. Its connections pace their reads only while
// PacedFrom requests or more are in flight.
func TestTransportCountsRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: first\n\n")
		if r.URL.Path == "/short" {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close: the handlers return
	tr := Transport(0, 5*time.Second, 0).(*counted)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var conns []*pacedConn
	var mu sync.Mutex
	open := func(path string) *http.Response {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			conns = append(conns, info.Conn.(*pacedConn))
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	want := func(n int64) {
		t.Helper()
		if got := tr.inFlight.Load(); got != n {
			t.Fatalf("%d requests in flight, want %d", got, n)
		}
		if got := conns[0].inFlight(); got != n {
			t.Fatalf("%d requests in flight, a connection counts %d", n, got)
		}
		if got, tick := conns[0].pace(); got != (n >= PacedFrom) || got && tick != FineTick {
			t.Fatalf("with %d in flight a connection's reads paced: %v on a tick of %s, want %v on %s", n, got, tick, n >= PacedFrom, FineTick)
		}
	}
	var streams []*http.Response
	for range PacedFrom {
		streams = append(streams, open("/stream"))
	}
	want(PacedFrom)
	if err := streams[0].Body.Close(); err != nil {
		t.Fatal(err)
	}
	want(PacedFrom - 1)
	if err := streams[0].Body.Close(); err != nil { // closed again: counted once
		t.Fatal(err)
	}
	want(PacedFrom - 1)
	// A request that fails is not in flight.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	dead.Close()
	if resp, err := client.Get("http://" + addr + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a request to a closed port answered %s", resp.Status)
	}
	want(PacedFrom - 1)
	// An answer read to its end has ended, closed or not.
	short := open("/short")
	want(PacedFrom)
	if b, err := io.ReadAll(short.Body); err != nil || string(b) != "data: first\n\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	want(PacedFrom - 1)
	short.Body.Close()
	want(PacedFrom - 1)
	// So has one whose read failed.
	streams[1].Body.(*countedBody).ReadCloser.Close() // gone under the reader
	if _, err := io.ReadAll(streams[1].Body); err == nil {
		t.Fatal("a body closed under its reader read to its end without an error")
	}
	want(PacedFrom - 2)
	streams[1].Body.Close()
	want(PacedFrom - 2)
	for _, s := range streams[2:] {
		s.Body.Close()
	}
	want(0)
}
