package temporal

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A worker's slots count nodes: a permit holds one until its pack says how
// many it runs, and a reservation waits while the worker runs as many
// nodes as it may, until one of them ends.
func TestNodeSlots(t *testing.T) {
	s := newNodeSlots(4)
	for i := range 4 {
		if s.TryReserveSlot(nil) == nil {
			t.Fatalf("reservation %d of 4 refused", i+1)
		}
	}
	if s.TryReserveSlot(nil) != nil {
		t.Fatal("a fifth reservation taken on 4 slots")
	}
	for range 3 {
		s.ReleaseSlot(nil)
	}
	s.add(3 - 1) // the permit left runs a pack of 3 nodes: 3 of 4 slots
	if s.TryReserveSlot(nil) == nil {
		t.Fatal("the fourth slot refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ReserveSlot(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a reservation on full slots with its context canceled: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := s.ReserveSlot(context.Background(), nil)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a reservation on full slots returned (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.add(-1) // a node of the pack ends
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a node ended and the waiting reservation did not get its slot")
	}
	if s.MaxSlots() != 4 {
		t.Fatalf("MaxSlots %d", s.MaxSlots())
	}
}
