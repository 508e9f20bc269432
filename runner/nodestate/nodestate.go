// Package nodestate is the scheduler of a run, as a pure state machine over
// the states of a graph's nodes: which nodes are ready (in graph-file order,
// within a parallel bound), which are skipped because a need did not
// complete, and which wait for an operator. A local run (package runner) and
// the Temporal workflow (package runner/temporal) both drive it and keep
// their side effects (goroutines or activities, the journal, progress) to
// themselves, so the two cannot schedule differently.
//
// It starts no goroutines, does no I/O, reads no clock and never ranges over
// a map: its answers depend only on the graph and the calls made, in order,
// which is what keeps the Temporal workflow replay-safe.
package nodestate

import (
	"fmt"
	"slices"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/graph"
)

// Machine holds a graph's structure and the state of each of its nodes.
// A new Machine has every node pending. The transitions:
//
//   - Next starts a ready node: pending, every need completed (or failed
//     under continue_on_failure); the first in the graph file among them, as
//     long as fewer than the parallel bound are running.
//   - Settle records a node's outcome: a completed node (or a failed one
//     marked continue_on_failure) lets its dependents become ready; a node
//     that failed or was skipped skips everything downstream that is still
//     pending; a canceled (interrupted) node leaves its dependents pending,
//     for `noderun resume`; a node needing attention is held, and its
//     dependents wait with it.
//   - Replay starts a held node again (an operator's decision); Abandon
//     gives up waiting for one, skipping its dependents.
//
// A resumed run settles the nodes it finds settled before it calls Next.
type Machine struct {
	ids        []string       // in graph-file order; a node is its index here
	at         map[string]int // id to index, for lookups only
	dependents [][]int        // in graph-file order, as graph.Dependents
	pass       []bool         // continue_on_failure
	state      []journal.NodeState
	waiting    []int  // needs not yet completed (or passed by continue_on_failure)
	held       []bool // needs attention and waits for Replay or Abandon
	ready      []int  // pending with nothing waiting, ascending
	parallel   int
	running    int
	nheld      int
}

// Skip is a node skipped because a node it needs (Cause) did not complete.
type Skip struct {
	ID, Cause string
}

// Reason is why the node was skipped, as journaled and shown.
func (s Skip) Reason() string { return fmt.Sprintf("needs %q, which did not complete", s.Cause) }

// New returns the machine of g with every node pending; at most parallel
// nodes (at least 1) are started at once.
func New(g *graph.Graph, parallel int) *Machine {
	n := len(g.Nodes)
	m := &Machine{ids: make([]string, n), at: make(map[string]int, n), dependents: make([][]int, n),
		pass: make([]bool, n), state: make([]journal.NodeState, n), waiting: make([]int, n),
		held: make([]bool, n), parallel: max(parallel, 1)}
	for i, node := range g.Nodes {
		m.ids[i], m.at[node.ID] = node.ID, i
		m.pass[i] = node.ContinueOnFailure
		m.state[i] = journal.NodePending
	}
	for i, node := range g.Nodes {
		for _, need := range node.Needs {
			m.dependents[m.at[need]] = append(m.dependents[m.at[need]], i)
			m.waiting[i]++
		}
		if m.waiting[i] == 0 {
			m.ready = append(m.ready, i)
		}
	}
	return m
}

// Next starts the next ready node, marking it running, and returns its id;
// false when none is ready or the parallel bound is reached.
func (m *Machine) Next() (string, bool) {
	if m.running >= m.parallel || len(m.ready) == 0 {
		return "", false
	}
	i := m.ready[0]
	m.ready = m.ready[1:]
	m.state[i] = journal.NodeRunning
	m.running++
	return m.ids[i], true
}

// Settle records the outcome st of node id, which is running or (in a
// resumed run, before the first Next) pending, and returns the nodes it
// skipped, in the order they were reached (depth first, dependents in graph
// order). The nodes it made ready come out of Next. A state that is not an
// outcome (pending, running) counts as failed; Settle of a node that is
// neither running nor pending, or not in the graph, changes nothing.
func (m *Machine) Settle(id string, st journal.NodeState) []Skip {
	i, ok := m.at[id]
	if !ok || (m.state[i] != journal.NodePending && m.state[i] != journal.NodeRunning) {
		return nil
	}
	if m.state[i] == journal.NodeRunning {
		m.running--
	}
	m.leave(i)
	switch st {
	case journal.NodeCompleted, journal.NodeFailed, journal.NodeSkipped, journal.NodeCanceled, journal.NodeAttention:
	default:
		st = journal.NodeFailed
	}
	m.state[i] = st
	switch {
	case st == journal.NodeCompleted, st == journal.NodeFailed && m.pass[i]:
		m.release(i)
	case st == journal.NodeAttention:
		m.held[i] = true
		m.nheld++
	case st == journal.NodeCanceled:
		// An interrupted node is not a failed one: its dependents stay
		// pending, for `noderun resume` to run.
	default:
		return m.skip(i, nil)
	}
	return nil
}

// Replay starts held node id again (an operator said to), marking it
// running, and reports whether it was held. A replay does not wait for the
// parallel bound: the operator asked for this node now.
func (m *Machine) Replay(id string) bool {
	i, ok := m.at[id]
	if !ok || !m.held[i] {
		return false
	}
	m.held[i] = false
	m.nheld--
	m.state[i] = journal.NodeRunning
	m.running++
	return true
}

// Abandon stops waiting for held node id (no operator will replay it in this
// run): it keeps needing attention, and its dependents are skipped.
func (m *Machine) Abandon(id string) []Skip {
	i, ok := m.at[id]
	if !ok || !m.held[i] {
		return nil
	}
	m.held[i] = false
	m.nheld--
	return m.skip(i, nil)
}

// State is node id's state ("" for a node not in the graph).
func (m *Machine) State(id string) journal.NodeState {
	if i, ok := m.at[id]; ok {
		return m.state[i]
	}
	return ""
}

// Unblocks reports whether node id is the one need left that a pending
// dependent waits for: that dependent is ready once id completes. (A pack
// of nodes on Temporal sends such a node's outcome as it ends, not with
// the pack's.)
func (m *Machine) Unblocks(id string) bool {
	i, ok := m.at[id]
	if !ok || m.state[i] != journal.NodePending && m.state[i] != journal.NodeRunning {
		return false
	}
	for _, d := range m.dependents[i] {
		if m.waiting[d] == 1 && m.state[d] == journal.NodePending {
			return true
		}
	}
	return false
}

// Running is how many nodes are running (replays included).
func (m *Machine) Running() int { return m.running }

// Held is how many nodes wait for an operator's Replay (or Abandon).
func (m *Machine) Held() int { return m.nheld }

// release counts settled node i as passed for its dependents; those left
// with nothing to wait for become ready.
func (m *Machine) release(i int) {
	for _, d := range m.dependents[i] {
		m.waiting[d]--
		if m.waiting[d] == 0 && m.state[d] == journal.NodePending {
			at, _ := slices.BinarySearch(m.ready, d)
			m.ready = slices.Insert(m.ready, at, d)
		}
	}
}

// skip skips the pending dependents of i, and theirs, appending them to out.
func (m *Machine) skip(i int, out []Skip) []Skip {
	for _, d := range m.dependents[i] {
		if m.state[d] != journal.NodePending {
			continue // already skipped by another need, or settled
		}
		m.leave(d)
		m.state[d] = journal.NodeSkipped
		out = append(out, Skip{ID: m.ids[d], Cause: m.ids[i]})
		out = m.skip(d, out)
	}
	return out
}

// leave takes i out of the ready nodes, as it stops being pending.
func (m *Machine) leave(i int) {
	if at, ok := slices.BinarySearch(m.ready, i); ok {
		m.ready = slices.Delete(m.ready, at, at+1)
	}
}
