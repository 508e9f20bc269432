package conns

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// A paced connection over a real loopback socket waits out the gap after a
// short read, and only then: not after a full read (a fast stream), not in
// the first eagerReads after a write (an answer is awaited, its first
// events name what recovery needs), not once the gap has passed.
func TestPacedWaitsOnlyAfterAShortRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer srv.Close()

	const gap = time.Hour // no read may be let through by the clock alone
	var slept []time.Duration
	clock := time.Now()
	tick := 20 * time.Millisecond // between reads: a trickle's pace
	c := Paced(raw, gap).(*pacedConn)
	c.sleep = func(d time.Duration) { slept = append(slept, d) }
	c.now = func() time.Time { clock = clock.Add(tick); return clock }
	read := func(want string, buf int) {
		t.Helper()
		p := make([]byte, buf)
		n, err := c.Read(p)
		if err != nil || string(p[:n]) != want {
			t.Fatalf("read %q, %v; want %q", p[:n], err, want)
		}
	}
	send := func(s string) {
		t.Helper()
		if _, err := srv.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		what string
		do   func()
		// waits: the read this step ends with first waited the gap
		waits bool
	}{
		{"the first read", func() { send("data: a\n\n"); read("data: a\n\n", 4096) }, false},
		{"a read after a short one", func() { send("data: b\n\n"); read("data: b\n\n", 4096) }, true},
		{"a full read", func() { send("abcd"); read("abcd", 4) }, true},
		{"a read after a full one", func() { send("efgh"); read("efgh", 4096) }, false},
		{"a read after a short one, again", func() { send("data: d\n\n"); read("data: d\n\n", 4096) }, true},
		{"a read after a short one from a fast stream", func() {
			tick = time.Millisecond
			send("data: e\n\n")
			read("data: e\n\n", 4096) // waits (the one before came slowly); this one came fast
			send("data: f\n\n")
			read("data: f\n\n", 4096)
			tick = 20 * time.Millisecond
		}, true},
		{"a read after a fast one", func() { send("data: g\n\n"); read("data: g\n\n", 4096) }, false},
		{"a read after a slow one", func() { send("data: h\n\n"); read("data: h\n\n", 4096) }, true},
		{"a read after a write", func() {
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			send("HTTP/1.1 200 OK\r\n\r\n")
			read("HTTP/1.1 200 OK\r\n\r\n", 4096)
		}, false},
	}
	for _, s := range steps {
		before := len(slept)
		s.do()
		waited := len(slept) > before
		if waited != s.waits {
			t.Errorf("%s: waited %v, want %v", s.what, waited, s.waits)
		}
		if waited && (slept[before] <= 0 || slept[before] > gap) {
			t.Errorf("%s: waited %s, want the rest of %s", s.what, slept[before], gap)
		}
	}
	// After the answer's headers, its first events are read eagerly too;
	// then a short read waits again.
	for i := 1; i <= eagerReads; i++ {
		before := len(slept)
		ev := fmt.Sprintf("data: %d\n\n", i)
		send(ev)
		read(ev, 4096)
		if waited, want := len(slept) > before, i == eagerReads; waited != want {
			t.Errorf("read %d after the write: waited %v, want %v", i+1, waited, want)
		}
	}
	// The gap passed: no wait.
	c.last = clock.Add(-2 * gap)
	c.waiting.Store(true)
	send("data: c\n\n")
	before := len(slept)
	read("data: c\n\n", 4096)
	if len(slept) != before {
		t.Errorf("waited %s although the gap had passed", slept[before])
	}
	if Paced(raw, 0) != raw {
		t.Error("a zero gap wraps the connection")
	}
}
