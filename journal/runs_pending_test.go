package journal

import (
	"context"
	"fmt"
	"reflect"
	"testing"
)

// SetNodesPending registers nodes many to a statement (pendingRows); each
// node must come out as SetNodeState(…, NodePending, "") leaves it, new or
// already there (started, failed, skipped with a reason), in Nodes' order.
func TestSetNodesPendingIsSetNodeStateForEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, t.TempDir()+"/j.db")
	var ids []string
	for i := range 2*pendingRows + 22 { // two full statements and a short one
		ids = append(ids, fmt.Sprintf("n%03d", (i*37)%(2*pendingRows+22))) // not in id order
	}
	for _, run := range []string{"many", "each"} {
		createRun(t, j, run)
		// Some nodes are there already: one started, one failed, one skipped.
		check(t, j.StartNode(ctx, run, ids[5], "key"))
		check(t, j.FailNode(ctx, run, ids[70], "deterministic", "boom"))
		check(t, j.SetNodeState(ctx, run, ids[140], NodeSkipped, "a need failed"))
	}
	check(t, j.SetNodesPending(ctx, "many", ids))
	for _, id := range ids {
		check(t, j.SetNodeState(ctx, "each", id, NodePending, ""))
	}
	many, err := j.Nodes(ctx, "many")
	check(t, err)
	each, err := j.Nodes(ctx, "each")
	check(t, err)
	if len(many) != len(ids) || len(each) != len(ids) {
		t.Fatalf("%d and %d nodes, want %d", len(many), len(each), len(ids))
	}
	for i := range many {
		a, b := many[i], each[i]
		a.RunID, b.RunID = "", ""
		// The same instant for both runs' untouched times: they were
		// stamped by separate calls.
		if a.Started.IsZero() != b.Started.IsZero() || a.Finished.IsZero() != b.Finished.IsZero() {
			t.Errorf("node %d: started/finished %v/%v against %v/%v", i, a.Started, a.Finished, b.Started, b.Finished)
		}
		a.Started, a.Finished = b.Started, b.Finished
		if !reflect.DeepEqual(a, b) {
			t.Errorf("node %d: SetNodesPending left %+v, SetNodeState %+v", i, a, b)
		}
	}
}
