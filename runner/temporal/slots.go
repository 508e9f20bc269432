package temporal

import (
	"context"
	"sync"

	"go.temporal.io/sdk/worker"
)

// nodeSlots is a worker's activity slot supplier counting nodes, not
// activities, up to the worker's --parallel: a pack of 16 nodes holds 16
// (Activities.Nodes tells it), so a worker that runs as many nodes as it
// may asks Temporal for no more work, and the others take it.
//
// A slot is reserved before a poll, when the size of the task it brings is
// unknown: it counts one node until the task starts. A worker can then take
// up to its pollers × (MaxPack-1) nodes past --parallel at once; the run's
// own --parallel, which the workflow keeps, is exact.
type nodeSlots struct {
	max     int
	mu      sync.Mutex
	used    int           // permits held, and the nodes of running packs past their first
	changed chan struct{} // closed when used goes down
}

func newNodeSlots(n int) *nodeSlots {
	return &nodeSlots{max: n, changed: make(chan struct{})}
}

// add moves the count by n: a pack's nodes past the one its permit counts
// (n > 0 when it starts), and each of them that ends (n < 0).
func (s *nodeSlots) add(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used += n
	if n < 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// ReserveSlot waits for a node's slot.
func (s *nodeSlots) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	for {
		if p := s.TryReserveSlot(nil); p != nil {
			return p, nil
		}
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryReserveSlot takes a node's slot if one is free.
func (s *nodeSlots) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.max {
		return nil
	}
	s.used++
	return &worker.SlotPermit{}
}

func (s *nodeSlots) MarkSlotUsed(worker.SlotMarkUsedInfo) {}

func (s *nodeSlots) ReleaseSlot(worker.SlotReleaseInfo) { s.add(-1) }

func (s *nodeSlots) MaxSlots() int { return s.max }

// nodeTuner is the worker tuner of a worker whose activities hold slots by
// node: nodeSlots; the other kinds of task keep the sizes opts gives (the
// SDK's default, 1,000, where it gives none).
func nodeTuner(slots *nodeSlots, opts worker.Options) (worker.WorkerTuner, error) {
	var fixed [4]worker.SlotSupplier
	for i, n := range []int{opts.MaxConcurrentWorkflowTaskExecutionSize, opts.MaxConcurrentLocalActivityExecutionSize,
		opts.MaxConcurrentNexusTaskExecutionSize, 0} {
		if n <= 0 {
			n = 1000
		}
		s, err := worker.NewFixedSizeSlotSupplier(n)
		if err != nil {
			return nil, err
		}
		fixed[i] = s
	}
	return worker.NewCompositeTuner(worker.CompositeTunerOptions{ActivitySlotSupplier: slots,
		WorkflowSlotSupplier: fixed[0], LocalActivitySlotSupplier: fixed[1], NexusSlotSupplier: fixed[2], SessionActivitySlotSupplier: fixed[3]})
}
