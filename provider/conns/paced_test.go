package conns

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"
)

// A paced connection over a real loopback socket waits out the gap after a
// short read, and only then: not after a full read (a fast stream), not in
// the first eagerReads after a write (an answer is awaited, its first
// events name what recovery needs), not once the gap has passed.
func TestPacedWaitsOnlyAfterAShortRead(t *testing.T) {
	raw, srv := loopback(t)

	const gap = time.Hour // no read may be let through by the clock alone
	var slept []time.Duration
	clock := time.Now()
	tick := 20 * time.Millisecond // between reads: a trickle's pace
	c := Paced(raw, gap).(*pacedConn)
	c.sleep = func(d time.Duration) { slept = append(slept, d) }
	c.now = func() time.Time { return clock }
	read := func(want string, buf int) {
		t.Helper()
		clock = clock.Add(tick) // the data was there when the read began: the wait stays the gap
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
		if waited && (slept[before] <= 0 || slept[before] > gap+WaitTick) {
			t.Errorf("%s: waited %s, want the rest of %s (and at most a WaitTick to the next tick)", s.what, slept[before], gap)
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

// loopback returns both ends of a real TCP connection on 127.0.0.1.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
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
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// clockedConn moves a test's clock by *during while each read is in the
// socket: how long the read blocked before an event came.
type clockedConn struct {
	net.Conn
	clock  *time.Time
	during *time.Duration
}

func (c clockedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	*c.clock = c.clock.Add(*c.during)
	return n, err
}

// The wait after a short read follows the stream's pace: when nothing had
// come during it (the read then blocked), the next is twice as long, up to
// MaxReadWait; when something had, a quarter shorter, down to ReadGap; a
// read that is not a trickle's sets it back to ReadGap at once.
func TestPacedWaitFollowsTheStreamsPace(t *testing.T) {
	raw, srv := loopback(t)
	clock := time.Now()
	var during time.Duration
	c := Paced(clockedConn{raw, &clock, &during}, ReadGap).(*pacedConn)
	c.tick = 0 // the waits as they adapt, unaligned (TestPacedWaitsEndOnATick)
	var slept []time.Duration
	c.sleep = func(d time.Duration) { slept = append(slept, d); clock = clock.Add(d) }
	c.now = func() time.Time { return clock }
	// events reads n events, each every after the one before, and returns
	// what each read waited first.
	events := func(n int, every time.Duration) []time.Duration {
		t.Helper()
		slept = slept[:0]
		for range n {
			during = 0
			if c.waiting.Load() && every > c.wait {
				during = every - c.wait // the read blocks until the event comes
			}
			if _, err := srv.Write([]byte("data: x\n\n")); err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 4096)
			if n, err := c.Read(p); err != nil || string(p[:n]) != "data: x\n\n" {
				t.Fatalf("read %q, %v", p[:n], err)
			}
		}
		return slices.Clone(slept)
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, step := range []struct {
		what  string
		n     int
		every time.Duration
		want  []time.Duration
	}{
		// The first read does not wait; then a token every 140 ms: the
		// wait doubles while the reads after it block, shrinks once one
		// finds the token there.
		{"a slow stream", 6, 140 * time.Millisecond, []time.Duration{ms(50), ms(100), ms(200), ms(150), ms(112.5)}},
		{"a faster one", 6, 20 * time.Millisecond, []time.Duration{ms(200), ms(150), ms(112.5), ms(84.375), ms(63.28125), ms(50)}},
		{"at the gap", 2, 20 * time.Millisecond, []time.Duration{ms(50), ms(50)}},
	} {
		if got := events(step.n, step.every); !slices.Equal(got, step.want) {
			t.Errorf("%s: waited %v, want %v", step.what, got, step.want)
		}
	}
	if MaxReadWait != 4*ReadGap+WaitTick || c.wait > 4*ReadGap {
		t.Errorf("wait %s, MaxReadWait %s: want at most 4 gaps (and a tick to align)", c.wait, MaxReadWait)
	}
	// A full read (a stream faster than the reads) waits no more.
	events(3, 140*time.Millisecond) // the wait grows again
	if _, err := srv.Write([]byte("abcd")); err != nil {
		t.Fatal(err)
	}
	during = 0
	p := make([]byte, 4)
	if n, err := c.Read(p); err != nil || n != 4 {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	if c.waiting.Load() || c.wait != ReadGap {
		t.Errorf("after a full read: waiting %v, wait %s; want no wait, and the gap next time", c.waiting.Load(), c.wait)
	}
}

// A wait ends on the next multiple of WaitTick, whenever the read before it
// came: the waits of many streams that end within one tick end together
// (one timer expiry wakes them all), and none waits more than a tick
// longer than its own wait.
func TestPacedWaitsEndOnATick(t *testing.T) {
	raw, srv := loopback(t)
	base := time.Unix(1_800_000_000, 0) // a multiple of WaitTick
	ends := map[time.Time]int{}
	for i := range 50 {
		// Reads that came at 50 instants spread over one tick, each a
		// trickle's short read: the next read of each waits.
		phase := time.Duration(i) * WaitTick / 50
		clock := base.Add(time.Hour + phase)
		c := Paced(raw, ReadGap).(*pacedConn)
		c.now = func() time.Time { return clock }
		var slept time.Duration
		c.sleep = func(d time.Duration) { slept = d }
		c.last, c.wait = clock.Add(-trickleAfter), ReadGap
		c.waiting.Store(true)
		if _, err := srv.Write([]byte("data: x\n\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		own := ReadGap - trickleAfter // the rest of the gap
		end := clock.Add(slept)
		if slept < own || slept >= own+WaitTick || end.UnixNano()%int64(WaitTick) != 0 {
			t.Fatalf("read at +%s: waited %s, want %s and up to the next multiple of %s", phase, slept, own, WaitTick)
		}
		ends[end]++
	}
	// Waits of one length that began within one tick end at no more than
	// two instants (the tick they fall in, or the next).
	if len(ends) > 2 {
		t.Errorf("50 waits ended at %d instants: %v", len(ends), ends)
	}
	if untilTick(base, WaitTick) != 0 || untilTick(base.Add(time.Nanosecond), WaitTick) != WaitTick-time.Nanosecond || untilTick(base.Add(7), 0) != 0 {
		t.Error("untilTick: a multiple is 0 away, one nanosecond past it a tick less a nanosecond, and no tick aligns nothing")
	}
}

// A paced connection of a transport with few requests in flight (fewer
// than PacedFrom) reads a trickle as it comes; once busy, it waits after a
// short read again.
func TestPacedWaitsOnlyWhileBusy(t *testing.T) {
	raw, srv := loopback(t)
	var slept []time.Duration
	clock := time.Now()
	c := Paced(raw, ReadGap).(*pacedConn)
	c.sleep = func(d time.Duration) { slept = append(slept, d) }
	c.now = func() time.Time { return clock }
	c.tick = 0
	inFlight := int64(PacedFrom - 1)
	c.inFlight = func() int64 { return inFlight }
	c.eager.Store(0)
	p := make([]byte, 4096)
	for i := range 6 {
		if i == 3 {
			inFlight = PacedFrom
		}
		clock = clock.Add(20 * time.Millisecond) // a trickle's pace
		if _, err := fmt.Fprintf(srv, "data: %d\n\n", i); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(p); err != nil || string(p[:n]) != fmt.Sprintf("data: %d\n\n", i) {
			t.Fatalf("read %d: %q, %v", i, p[:n], err)
		}
		// Reads 0-2 wait for nothing; from 3 on (busy) each waits the
		// rest of the gap after the short read before it.
		if want := max(i-2, 0); len(slept) != want {
			t.Fatalf("after read %d: %d waits (%v), want %d", i, len(slept), slept, want)
		}
	}
	if want := ReadGap - 20*time.Millisecond; slices.ContainsFunc(slept, func(d time.Duration) bool { return d != want }) {
		t.Errorf("waits %v, want %v each", slept, want)
	}
}

// Whether a short read waits, and on which tick, follows the transport's
// requests in flight: not below PacedFrom, on FineTick below CoarseFrom, on
// WaitTick from there; a connection of no transport always waits, on
// WaitTick.
func TestPaceFollowsRequestsInFlight(t *testing.T) {
	c := &pacedConn{tick: WaitTick}
	if paced, tick := c.pace(); !paced || tick != WaitTick {
		t.Errorf("a connection of no transport: paced %v on %s, want true on %s", paced, tick, WaitTick)
	}
	for _, tc := range []struct {
		inFlight int64
		paced    bool
		tick     time.Duration
	}{
		{0, false, 0},
		{PacedFrom - 1, false, 0},
		{PacedFrom, true, FineTick},
		{1000, true, FineTick},
		{CoarseFrom - 1, true, FineTick},
		{CoarseFrom, true, WaitTick},
		{10000, true, WaitTick},
	} {
		c.inFlight = func() int64 { return tc.inFlight }
		if paced, tick := c.pace(); paced != tc.paced || tick != tc.tick {
			t.Errorf("%d in flight: paced %v on %s, want %v on %s", tc.inFlight, paced, tick, tc.paced, tc.tick)
		}
	}
	c.tick = 0 // a test's unaligned waits stay unaligned
	if paced, tick := c.pace(); !paced || tick != 0 {
		t.Errorf("unaligned waits: paced %v on %s, want true on none", paced, tick)
	}
}
