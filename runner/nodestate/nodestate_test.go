package nodestate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/graph"
)

// Shorter names for the outcomes the steps below give.
const (
	completed = journal.NodeCompleted
	failed    = journal.NodeFailed
	canceled  = journal.NodeCanceled
	attention = journal.NodeAttention
	skipped   = journal.NodeSkipped
)

// step is one call on the machine: do makes it and says what it answered,
// which must be want.
type step struct {
	name string
	do   func(*Machine) string
	want string
}

// start calls Next until it says no: want lists the nodes it started, in order.
func start(want ...string) step {
	return step{"start", func(m *Machine) string {
		var ids []string
		for id, ok := m.Next(); ok; id, ok = m.Next() {
			ids = append(ids, id)
		}
		return strings.Join(ids, " ")
	}, strings.Join(want, " ")}
}

// settle settles id as st; skips are what it skipped, each "node<cause".
func settle(id string, st journal.NodeState, skips ...string) step {
	return step{"settle " + id + " " + string(st), func(m *Machine) string { return skipped2s(m.Settle(id, st)) },
		strings.Join(skips, " ")}
}

func replay(id string, ok bool) step {
	return step{"replay " + id, func(m *Machine) string { return fmt.Sprint(m.Replay(id)) }, fmt.Sprint(ok)}
}

func abandon(id string, skips ...string) step {
	return step{"abandon " + id, func(m *Machine) string { return skipped2s(m.Abandon(id)) }, strings.Join(skips, " ")}
}

// unblocks checks which of ids Unblocks: "a:true b:false …".
func unblocks(want string, ids ...string) step {
	return step{"unblocks", func(m *Machine) string {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprintf("%s:%t", id, m.Unblocks(id)))
		}
		return strings.Join(s, " ")
	}, want}
}

// counts checks how many nodes run and are held.
func counts(running, held int) step {
	return step{"counts", func(m *Machine) string { return fmt.Sprintf("running %d, held %d", m.Running(), m.Held()) },
		fmt.Sprintf("running %d, held %d", running, held)}
}

// states checks every node's state, in graph order: "a:completed b:skipped …".
func states(want string) step {
	return step{"states", func(m *Machine) string {
		var s []string
		for _, id := range m.ids {
			s = append(s, id+":"+string(m.State(id)))
		}
		return strings.Join(s, " ")
	}, want}
}

func skipped2s(skips []Skip) string {
	var s []string
	for _, k := range skips {
		s = append(s, k.ID+"<"+k.Cause)
	}
	return strings.Join(s, " ")
}

// parse makes a graph of nodes given as "id", "id<need,need", with a "!"
// after the id for continue_on_failure ("a!<b"), in this order.
func parse(t *testing.T, nodes ...string) *graph.Graph {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: t\nproviders:\n  p: {kind: openai, base_url: http://127.0.0.1:1/v1, model: m}\nnodes:\n")
	for _, n := range nodes {
		id, needs, _ := strings.Cut(n, "<")
		id, cof := strings.CutSuffix(id, "!")
		fmt.Fprintf(&b, "  - {id: %s, prompt: x, continue_on_failure: %t", id, cof)
		if needs != "" {
			fmt.Fprintf(&b, ", needs: [%s]", needs)
		}
		b.WriteString("}\n")
	}
	g, err := graph.Parse("t.yaml", []byte(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return g
}

var (
	chain   = []string{"a", "b<a", "c<b"}
	diamond = []string{"a", "b<a", "c<a", "d<b,c"}
)

func TestMachine(t *testing.T) {
	cases := []struct {
		name     string
		nodes    []string
		parallel int
		steps    []step
	}{
		{"chain runs in dependency order", chain, 4, []step{
			start("a"), start(),
			settle("a", completed), start("b"),
			settle("b", completed), start("c"),
			settle("c", completed), start(),
			counts(0, 0), states("a:completed b:completed c:completed"),
		}},
		{"diamond: the join waits for both sides", diamond, 4, []step{
			start("a"),
			settle("a", completed), start("b", "c"),
			settle("c", completed), start(),
			settle("b", completed), start("d"),
			settle("d", completed), counts(0, 0),
		}},
		// Unblocks: a node whose outcome alone makes a pending dependent
		// ready (a pack on Temporal sends it early), not one whose
		// dependents wait for others too, nor one that has settled.
		{"unblocks: the last need a dependent waits for", diamond, 4, []step{
			unblocks("a:true b:false c:false d:false x:false", "a", "b", "c", "d", "x"),
			start("a"), settle("a", completed), start("b", "c"),
			unblocks("b:false c:false", "b", "c"), // d waits for both
			settle("c", completed),
			unblocks("b:true c:false", "b", "c"),
			settle("b", failed, "d<b"),
			unblocks("b:false d:false", "b", "d"), // settled; d skipped
		}},
		{"unblocks: one dependent of several is enough", []string{"a", "b", "fast<a", "join<a,b"}, 4, []step{
			start("a", "b"),
			unblocks("a:true b:false", "a", "b"),
		}},
		{"parallel bound", []string{"a", "b", "c", "d", "e"}, 2, []step{
			start("a", "b"), counts(2, 0), start(),
			settle("b", completed), start("c"),
			settle("a", failed), start("d"),
			settle("c", completed), settle("d", completed), start("e"),
			settle("e", completed), states("a:failed b:completed c:completed d:completed e:completed"),
		}},
		{"a parallel bound below 1 counts as 1", []string{"a", "b"}, 0, []step{
			start("a"), settle("a", completed), start("b"),
		}},
		{"graph order among ready nodes, not the order they became ready", []string{"late<gate", "x", "gate", "late2<gate", "y"}, 1, []step{
			start("x"), settle("x", completed),
			start("gate"), settle("gate", completed),
			start("late"), settle("late", completed),
			start("late2"), settle("late2", completed),
			start("y"), settle("y", completed),
		}},
		{"a failure skips everything downstream, depth first; independent nodes go on", []string{"a", "b<a", "c<b", "d<a", "e"}, 4, []step{
			start("a", "e"),
			settle("a", failed, "b<a", "c<b", "d<a"), start(),
			settle("e", completed), counts(0, 0),
			states("a:failed b:skipped c:skipped d:skipped e:completed"),
		}},
		{"diamond: a join is skipped once, for the first need that failed", diamond, 4, []step{
			start("a"), settle("a", completed), start("b", "c"),
			settle("b", failed, "d<b"),
			settle("c", failed), start(),
			states("a:completed b:failed c:failed d:skipped"),
		}},
		{"a failure skips the dependents another failure left pending", []string{"y", "x", "b<y,x", "c<x"}, 4, []step{
			start("y", "x"),
			settle("y", failed, "b<y"),
			settle("x", failed, "c<x"),
			states("y:failed x:failed b:skipped c:skipped"),
		}},
		{"diamond: the other side completing does not start a skipped join", diamond, 4, []step{
			start("a"), settle("a", completed), start("b", "c"),
			settle("b", failed, "d<b"),
			settle("c", completed), start(), counts(0, 0),
		}},
		{"continue_on_failure: dependents run after the node failed", []string{"a!", "b<a", "c<b"}, 4, []step{
			start("a"), settle("a", failed), start("b"),
			settle("b", completed), start("c"),
			settle("c", completed), states("a:failed b:completed c:completed"),
		}},
		{"continue_on_failure: the join waits for the other need too", []string{"a!", "b", "c<a,b"}, 4, []step{
			start("a", "b"), settle("a", failed), start(),
			settle("b", completed), start("c"),
		}},
		{"continue_on_failure covers failing, not being skipped", []string{"x", "a!<x", "b<a"}, 4, []step{
			start("x"), settle("x", failed, "a<x", "b<a"), start(),
		}},
		{"continue_on_failure covers failing, not being interrupted", []string{"a!", "b<a"}, 4, []step{
			start("a"), settle("a", canceled), start(), states("a:canceled b:pending"),
		}},
		{"an interrupted node leaves its dependents pending for resume", []string{"a", "b<a", "c<b", "d"}, 4, []step{
			start("a", "d"),
			settle("a", canceled), start(),
			settle("d", completed), counts(0, 0),
			states("a:canceled b:pending c:pending d:completed"),
		}},
		{"diamond: an interrupted side, then a failed one, skips the join", diamond, 4, []step{
			start("a"), settle("a", completed), start("b", "c"),
			settle("b", canceled),
			settle("c", failed, "d<c"),
			states("a:completed b:canceled c:failed d:skipped"),
		}},
		{"diamond: an interrupted side and a completed one leave the join pending", diamond, 4, []step{
			start("a"), settle("a", completed), start("b", "c"),
			settle("b", canceled), settle("c", completed), start(),
			states("a:completed b:canceled c:completed d:pending"),
		}},
		{"a held node holds its dependents until replayed", []string{"a", "b<a", "c<b", "d"}, 4, []step{
			start("a", "d"),
			settle("a", attention), start(), counts(1, 1),
			settle("d", completed), counts(0, 1),
			states("a:attention b:pending c:pending d:completed"),
			replay("a", true), counts(1, 0), start(),
			settle("a", completed), start("b"),
			settle("b", completed), start("c"),
			settle("c", completed), counts(0, 0),
		}},
		{"a replay that fails skips the dependents", chain, 4, []step{
			start("a"), settle("a", attention),
			replay("a", true), settle("a", failed, "b<a", "c<b"),
			counts(0, 0), states("a:failed b:skipped c:skipped"),
		}},
		{"a replay may be held again", chain, 4, []step{
			start("a"), settle("a", attention),
			replay("a", true), settle("a", attention), counts(0, 1),
			replay("a", true), settle("a", completed), start("b"),
		}},
		{"only held nodes are replayed", []string{"a", "b<a", "c"}, 1, []step{
			replay("a", false), replay("nope", false),
			start("a"), replay("a", false),
			settle("a", completed), replay("a", false),
			start("b"), settle("b", attention),
			replay("b", true), replay("b", false), counts(1, 0),
		}},
		{"a replay does not wait for the parallel bound", []string{"a", "b", "c"}, 1, []step{
			start("a"), settle("a", attention),
			start("b"), replay("a", true), counts(2, 0), start(),
			settle("b", completed), start(),
			settle("a", completed), start("c"),
		}},
		{"abandoning a held node skips its dependents", []string{"a", "b<a", "c<b", "d<b"}, 4, []step{
			start("a"), settle("a", attention),
			abandon("a", "b<a", "c<b", "d<b"), counts(0, 0),
			replay("a", false), abandon("a"),
			states("a:attention b:skipped c:skipped d:skipped"),
		}},
		{"only held nodes are abandoned", chain, 4, []step{
			abandon("a"), start("a"), abandon("a"), settle("a", failed, "b<a", "c<b"), abandon("a"),
		}},
		{"a resumed run starts after its completed nodes", []string{"a", "b<a", "c<b", "d", "e<d"}, 4, []step{
			settle("a", completed), settle("b", completed), settle("d", completed),
			start("c", "e"), counts(2, 0),
		}},
		{"a resumed run holds the dependents of a node needing attention", []string{"a", "b<a", "c<b", "d"}, 4, []step{
			settle("a", attention), start("d"), counts(1, 1),
			states("a:attention b:pending c:pending d:running"),
		}},
		{"a resumed local run gives up on a node needing attention", []string{"a", "b<a", "c<b", "d"}, 4, []step{
			settle("a", attention), abandon("a", "b<a", "c<b"), start("d"),
			settle("d", completed), counts(0, 0),
		}},
		{"a resumed run with settled failures", []string{"a!", "b", "c<a", "d<b", "e<c,d"}, 4, []step{
			settle("a", failed), settle("b", failed, "d<b", "e<d"),
			start("c"), settle("c", completed), start(),
			states("a:failed b:failed c:completed d:skipped e:skipped"),
		}},
		{"settling a settled or unknown node changes nothing", chain, 4, []step{
			start("a"), settle("a", completed), settle("a", failed), settle("nope", failed),
			counts(0, 0), start("b"),
		}},
		{"a state that is not an outcome counts as failed", chain, 4, []step{
			start("a"), settle("a", journal.NodeRunning, "b<a", "c<b"), counts(0, 0),
			states("a:failed b:skipped c:skipped"),
		}},
		{"a skipped outcome skips the dependents", chain, 4, []step{
			settle("a", skipped, "b<a", "c<b"), start(),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(parse(t, tc.nodes...), tc.parallel)
			for i, s := range tc.steps {
				if got := s.do(m); got != s.want {
					t.Fatalf("step %d (%s): %q, want %q", i+1, s.name, got, s.want)
				}
			}
		})
	}
}

func TestSkipReason(t *testing.T) {
	if got, want := (Skip{ID: "b", Cause: "a"}).Reason(), `needs "a", which did not complete`; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// The ready nodes of a wide graph come out in graph order, whatever the
// order of the settles that made them ready.
func TestWideGraphOrder(t *testing.T) {
	const n = 200
	var nodes, want []string
	for i := range n {
		id := fmt.Sprintf("n%03d", i)
		nodes = append(nodes, fmt.Sprintf("g%03d", i), id+"<g"+fmt.Sprintf("%03d", i))
		want = append(want, id)
	}
	m := New(parse(t, nodes...), 2*n)
	for range n {
		if _, ok := m.Next(); !ok {
			t.Fatal("fewer gates ready than the graph has")
		}
	}
	for i := n - 1; i >= 0; i-- { // release them in reverse
		m.Settle(fmt.Sprintf("g%03d", i), completed)
	}
	var got []string
	for id, ok := m.Next(); ok; id, ok = m.Next() {
		got = append(got, id)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("started %v, want %v", got, want)
	}
}
