package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
)

// stampedProvider emits chunks "c0,", "c1,"... stamped every step from a
// fixed start (the adapters' arrival stamps), then waits for hold to close
// before it ends the stream.
type stampedProvider struct {
	n    int
	step time.Duration
	hold chan struct{}
	pad  int // bytes of "." after each chunk's "cN,"
}

func (stampedProvider) Capabilities() provider.Capabilities { return provider.Capabilities{} }

func (p stampedProvider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	start := time.Now()
	for i := range p.n {
		if err := emit(provider.Event{Kind: provider.KindDelta, Text: fmt.Sprintf("c%d,", i) + strings.Repeat(".", p.pad), Seq: -1,
			Time: start.Add(time.Duration(i) * p.step)}); err != nil {
			return err
		}
	}
	select {
	case <-p.hold:
	case <-ctx.Done():
		return ctx.Err()
	}
	return emit(provider.Event{Kind: provider.KindDone, Seq: -1})
}

// runStamped runs one node of p in the background and returns its journal,
// run id and a function that ends the stream and returns Run's error. The
// test's cleanup calls it too.
func runStamped(t *testing.T, p stampedProvider) (*journal.Journal, string, func() error) {
	t.Helper()
	g, opts := oneNode(t, p)
	opts.RunID = "stamped"
	j := opts.Journal
	done := make(chan error, 1)
	go func() {
		res, err := Run(context.Background(), g, opts)
		if err == nil && res.Status != journal.RunCompleted {
			err = fmt.Errorf("run %s", res.Status)
		}
		done <- err
	}()
	finish := sync.OnceValue(func() error {
		close(p.hold)
		return <-done
	})
	t.Cleanup(func() {
		if err := finish(); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return j, opts.RunID, finish
}

func deltaRows(t *testing.T, j *journal.Journal, run string) []journal.Event {
	t.Helper()
	evs, err := j.Events(context.Background(), run, journal.EventFilter{Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var out []journal.Event
	for _, e := range evs {
		if e.Kind == journal.KindDelta {
			out = append(out, e)
		}
	}
	return out
}

// Chunks are merged by their arrival stamps: a row holds only chunks that
// arrived within coalesceWindow of its first one, every chunk is journaled
// once and in order, and a fast stream takes far fewer rows than chunks.
func TestCoalescingFollowsArrival(t *testing.T) {
	const n, step = 200, coalesceWindow / 10 // a token every 25 ms: a trickle
	p := stampedProvider{n: n, step: step, hold: make(chan struct{})}
	j, run, finish := runStamped(t, p)
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	rows := deltaRows(t, j, run)
	next := 0
	for _, r := range rows {
		var idx []int
		for _, c := range strings.Split(strings.TrimSuffix(string(r.Payload), ","), ",") {
			i, err := strconv.Atoi(strings.TrimPrefix(c, "c"))
			if err != nil || i != next {
				t.Fatalf("row %q: chunk %q, want c%d: chunks lost, repeated or out of order", r.Payload, c, next)
			}
			idx = append(idx, i)
			next++
		}
		if span := time.Duration(idx[len(idx)-1]-idx[0]) * step; span >= coalesceWindow {
			t.Errorf("row %q spans %s of arrivals; the window is %s", r.Payload, span, coalesceWindow)
		}
	}
	if next != n {
		t.Fatalf("%d chunks journaled, want %d", next, n)
	}
	// 5 s of stamps in 250 ms windows: 20 rows. The run's flusher ticks in
	// real time and may cut a row short while the chunks are emitted.
	if len(rows) < n/10 || len(rows) > n/6 {
		t.Errorf("%d rows for %d chunks %s apart; want about %d (one per %s)", len(rows), n, step, n/10, coalesceWindow)
	}
}

// A stream that falls silent has its last chunks journaled while it is
// silent, not when it ends: a crash in a long silence loses nothing.
func TestSilentStreamIsJournaled(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	p := stampedProvider{n: 3, step: 0, hold: make(chan struct{})}
	j, run, _ := runStamped(t, p)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got string
		for _, r := range deltaRows(t, j, run) {
			got += string(r.Payload)
		}
		if got == "c0,c1,c2," {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s of silence the journal holds %q of the stream's %q", got, "c0,c1,c2,")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A fast stream's rows stop at coalesceChunks, or at coalesceBytes when its
// chunks are large (a crash finds at most a row of either unjournaled,
// besides the group commit), and every chunk is journaled once, in order.
func TestCoalescingStopsAtItsBounds(t *testing.T) {
	for _, c := range []struct {
		name     string
		n, pad   int
		wantRows func(chunks, bytes int) bool
	}{
		{"chunks", 3000, 0, func(chunks, bytes int) bool { return chunks <= coalesceChunks && bytes < coalesceBytes }},
		{"bytes", 300, 1000, func(chunks, bytes int) bool { return bytes < coalesceBytes+1010 && chunks <= coalesceChunks }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := stampedProvider{n: c.n, step: 0, hold: make(chan struct{}), pad: c.pad}
			j, run, finish := runStamped(t, p)
			if err := finish(); err != nil {
				t.Fatal(err)
			}
			var all strings.Builder
			rows := deltaRows(t, j, run)
			full := 0
			for i, r := range rows {
				chunks := strings.Count(string(r.Payload), ",")
				if !c.wantRows(chunks, len(r.Payload)) {
					t.Errorf("row %d holds %d chunks, %d bytes; the bounds are %d chunks, %d bytes (and the chunk that crossed it)", i, chunks, len(r.Payload), coalesceChunks, coalesceBytes)
				}
				if chunks == coalesceChunks || len(r.Payload) >= coalesceBytes {
					full++
				}
				all.Write(r.Payload)
			}
			var want strings.Builder
			for i := range c.n {
				fmt.Fprintf(&want, "c%d,%s", i, strings.Repeat(".", c.pad))
			}
			if all.String() != want.String() {
				t.Fatalf("the rows hold %d bytes, not the stream's %d in order", all.Len(), want.Len())
			}
			// The chunks come at once: all but the last row and those the
			// run's flusher cut (it ticks once a second) are full.
			if full < len(rows)-3 {
				t.Errorf("%d of %d rows full; want all but the last and a flusher's tick or two", full, len(rows))
			}
		})
	}
}
