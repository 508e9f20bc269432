package conns

import (
	"context"
	"errors"
	"net"
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
