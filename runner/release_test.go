package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 9: a node that fails leaves no response of its own running at the
// provider. Its stream is cut, and from then on every status check and
// re-attach answers 503, so nothing shows the response is alive: the node
// fails by its budget (retries: 0, the reconnects spent) or by the recovery
// deadline, while the response goes on generating at the provider. The
// executor cancels it (NR208) and the simulator stops generating.
func TestFailedNodeLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		profiles string // overrides of the ci profile
		code     diagnostics.Code
	}{
		{"budget", "ci: {reconnects: 3}\n", diagnostics.BudgetExhausted},
		{"deadline", "ci: {reconnects: 100000, deadline: 1s}\n", diagnostics.DeadlineExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: 3000, TokensPerSecond: 300, Faults: []sim.Fault{
				{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 20},
				{Endpoint: sim.EndpointResponsesGet, Kind: sim.FaultStatus, Status: 503},
				{Endpoint: sim.EndpointResponsesStream, Kind: sim.FaultStatus, Status: 503},
			}})
			profiles := filepath.Join(t.TempDir(), "profiles.yaml")
			if err := os.WriteFile(profiles, []byte(c.profiles), 0o600); err != nil {
				t.Fatal(err)
			}
			g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: ci\nprofiles: %s\nproviders:\n  p: {kind: responses, base_url: %s, model: sim}\nnodes:\n  - id: %s\n    prompt: %s\n    retries: 0\n",
				profiles, srv.BaseURL(), respNode, respPrompt))
			j := openJournal(t)
			res := runGraph(t, g, j)
			ds := diagRecs(t, j, res.RunID, respNode)
			t.Logf("journal:\n%s", dumpDiags(ds))
			if res.Nodes[0].State != journal.NodeFailed || count(ds, c.code) != 1 {
				t.Fatalf("node %s; want it failed with %s", res.Nodes[0].State, c.code)
			}
			cancels := withCode(ds, diagnostics.WorkCancelled)
			if len(cancels) != 1 || !strings.Contains(cancels[0].Message, "node failed") || firstIndex(ds, diagnostics.WorkCancelled) > firstIndex(ds, diagnostics.NodeFailed) {
				t.Fatalf("want one NR208 naming the failure before NR901, got %d", len(cancels))
			}
			if n := srv.Stats().Requests[sim.EndpointResponsesCancel]; n != 1 {
				t.Fatalf("%d cancel requests, want 1", n)
			}
			// Cancelled, the response generates no more.
			before := srv.Stats().TokensGenerated
			time.Sleep(300 * time.Millisecond)
			if after := srv.Stats().TokensGenerated; after != before || after >= 3000 {
				t.Errorf("the response is still generating after the node failed: %d then %d tokens", before, after)
			}
		})
	}
}

// Issue 9: progress means new ground. An upstream that always cuts a chat
// stream after the same few hundred bytes delivers data on every attempt, but
// no attempt gets further than the first: the retries back off as they
// would in an outage (full jitter over base*2^step, step 0, 1, 2 with the
// default profile) instead of starting over at the smallest delay each time.
func TestFlappingUpstreamBacksOff(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 200, Faults: []sim.Fault{
		{Endpoint: sim.EndpointChat, Kind: sim.FaultCut, AfterEvents: 60},
	}})
	g := parseTestGraph(t, fmt.Sprintf("name: t\nprofile: default\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n  - {id: a, prompt: write about a}\n", srv.BaseURL()))
	j := openJournal(t)
	res := runGraph(t, g, j)
	ds := diagRecs(t, j, res.RunID, "a")
	t.Logf("journal:\n%s", dumpDiags(ds))
	if res.Nodes[0].State != journal.NodeFailed || count(ds, diagnostics.BudgetExhausted) != 1 {
		t.Fatalf("node %s: want it failed with its budget spent", res.Nodes[0].State)
	}
	retries := withCode(ds, diagnostics.RetryStarted)
	if len(retries) != 3 {
		t.Fatalf("%d retries, want the default profile's 3", len(retries))
	}
	for i, d := range retries {
		step, _ := attrInt(d, "backoff_step")
		if step != int64(i) {
			t.Errorf("retry %d drew its delay at backoff step %d, want %d: partial data that got no further reset the backoff", i+1, step, i)
		}
	}
	if st := srv.Stats(); st.Requests[sim.EndpointChat] != 4 {
		t.Errorf("%d chat requests, want 4", st.Requests[sim.EndpointChat])
	}
}
