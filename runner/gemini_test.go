package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 25's acceptance at the node level for `kind: gemini`: the node runs
// through the executor's recovery loop against the simulator's Interactions
// API over real sockets; the journal and the simulator's counters are
// inspected.
//
// Event layout of a sim interaction of T tokens without thoughts (the
// adapter's cursor is the event's ordinal): 0 interaction.created,
// 1 interaction.status_update, 2 step.start, 3..2+T step.delta,
// 3+T step.stop, 4+T interaction.completed.

// geminiGraph is a one-node graph on a `kind: gemini` provider at the
// simulator srv; extra is appended to the node.
func geminiGraph(t *testing.T, srv *sim.Server, prof, extra string) *Graph {
	t.Helper()
	return parseTestGraph(t, fmt.Sprintf(`name: t
profile: %s
providers:
  p:
    kind: gemini
    base_url: http://%s
    model: sim
nodes:
  - id: %s
    prompt: %s
%s`, prof, srv.Addr(), respNode, respPrompt, extra))
}

// checkOneInteraction: exactly one interaction was created and it generated
// exactly its own tokens: none regenerated.
func checkOneInteraction(t *testing.T, srv *sim.Server, tokens int) {
	t.Helper()
	st := srv.Stats()
	if st.InteractionsCreated != 1 || st.Requests[sim.EndpointInteractionsCreate] != 1 || st.TokensGenerated != int64(tokens) {
		t.Errorf("sim: %d interactions created (%d create requests), %d tokens generated; want 1, 1, %d (zero regenerated)",
			st.InteractionsCreated, st.Requests[sim.EndpointInteractionsCreate], st.TokensGenerated, tokens)
	}
}

// A gemini node whose stream drops three times, at three points and in
// three ways (the create stream cut early, the first re-attach reset
// mid-text, the second closed cleanly three quarters in),
// completes byte-identical to the simulator's text, one interaction created
// and no token regenerated; every re-attach resumes after the last event_id
// it saw, from the cursor journaled at the drop.
func TestGeminiNodeSurvivesThreeDrops(t *testing.T) {
	const T = 200
	// Paced so that the interaction is still generating at every drop
	// (0.8 s in all): each is recovered by a re-attach, never from the
	// status of an interaction that finished meanwhile (NR206). At 1,000
	// tokens a second (0.2 s) a loaded machine's reconnects lagged behind
	// it, and the third drop found it completed.
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, TokensPerSecond: 250, Faults: []sim.Fault{
		{Endpoint: sim.EndpointInteractionsCreate, Requests: []int{1}, Kind: sim.FaultCut, AfterEvents: 4},
		{Endpoint: sim.EndpointInteractionsStream, Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: T / 2},
		{Endpoint: sim.EndpointInteractionsStream, Requests: []int{2}, Kind: sim.FaultClose, AfterEvents: T / 4},
	}})
	j := openJournal(t)
	res := runGraph(t, geminiGraph(t, srv, "ci", ""), j)
	ds := diagRecs(t, j, res.RunID, respNode)
	checkOutput(t, j, res, wantText(T))
	checkOneInteraction(t, srv, T)
	st := srv.Stats()
	if acted := st.Faults[string(sim.FaultClose)] + st.Faults[string(sim.FaultReset)] + st.Faults[string(sim.FaultCut)]; acted != 3 {
		t.Fatalf("%d faults acted, want 3: %v", acted, st.Faults)
	}
	atts, err := j.Attempts(context.Background(), res.RunID, respNode)
	if err != nil || len(atts) != 1 || atts[0].Outcome != journal.OutcomeOK {
		t.Fatalf("attempts = %+v, %v; want one successful attempt (re-attaching is not a retry)", atts, err)
	}
	if a := atts[0]; !strings.HasPrefix(a.Ref, "v1_") || a.Cursor != 4+T {
		t.Errorf("attempt ref %q cursor %d; want an interaction id and cursor %d (interaction.completed)", a.Ref, a.Cursor, 4+T)
	}
	if count(ds, diagnostics.DisconnectDetected) != 3 || count(ds, diagnostics.Reattached) != 3 ||
		count(ds, diagnostics.RetryStarted)+count(ds, diagnostics.FellBackToRetry) != 0 || count(ds, diagnostics.Recovered) != 1 {
		t.Errorf("want 3 NR101, 3 NR201, one NR108 and no retry:\n%s", strings.Join(diagCodes(ds), "\n"))
	}
	cursor := int64(-2)
	for _, d := range ds {
		switch d.Code {
		case diagnostics.DisconnectDetected.ID:
			cursor, _ = attrInt(d, "cursor")
		case diagnostics.Reattached.ID:
			seq, _ := attrInt(d, "seq")
			if seq != cursor || !strings.Contains(d.Message, fmt.Sprintf("event %d (event_id ", seq)) {
				t.Errorf("re-attached at %d (%q); the drop journaled cursor %d and the adapter saw its event_id", seq, d.Message, cursor)
			}
		}
	}
	if got := st.Requests[sim.EndpointInteractionsStream]; got != 3 {
		t.Errorf("%d stream re-attaches, want 3", got)
	}
}

// Thoughts are journaled apart from the answer: the node's output is the
// answer alone, the thought summaries are the attempt's reasoning.
func TestGeminiNodeThoughtsApart(t *testing.T) {
	const T = 30
	// paced, so that the drop (mid-thought) is recovered by a re-attach
	// rather than from the status of a finished interaction
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, TokensPerSecond: 500, Faults: []sim.Fault{
		{Endpoint: sim.EndpointInteractionsCreate, Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 6}}})
	j := openJournal(t)
	res := runGraph(t, geminiGraph(t, srv, "ci", "    reasoning_effort: high\n"), j)
	checkOutput(t, j, res, wantText(T))
	checkOneInteraction(t, srv, T)
	thoughts := strings.Join(sim.ReasoningText("sim", respPrompt, respSeed, "high"), "")
	if strings.Contains(res.Nodes[0].Output, thoughts[:20]) {
		t.Fatal("thoughts in the output")
	}
	evs, err := j.Events(context.Background(), res.RunID, journal.EventFilter{Node: respNode, Kinds: []string{"reasoning"}, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, e := range evs {
		got.Write(e.Payload)
	}
	if got.String() != thoughts {
		t.Fatalf("journaled reasoning %q, want the thought summaries %q", got.String(), thoughts)
	}
	// Issue 43: usage mapped field by field. The interaction reports T
	// output tokens (total_output_tokens, the answer alone) and the
	// thoughts apart (total_thought_tokens): the node's output is T, its
	// reasoning the thoughts, counted as the simulator generated them.
	thoughtTokens := len(sim.ReasoningText("sim", respPrompt, respSeed, "high"))
	u, err := journal.UsageOf(usageEvents(t, j, res.RunID))
	if err != nil {
		t.Fatal(err)
	}
	var att journal.Usage
	for _, a := range u[respNode] {
		att = a
	}
	if att.Visible() != T || att.ReasoningTokens != thoughtTokens || att.OutputTokens != T+thoughtTokens {
		t.Errorf("usage %+v: want %d output tokens, %d of them reasoning (the answer's %d)", att, T+thoughtTokens, thoughtTokens, T)
	}
}

func usageEvents(t *testing.T, j *journal.Journal, run string) []journal.Event {
	t.Helper()
	evs, err := j.Events(context.Background(), run, journal.EventFilter{Kinds: []string{journal.KindUsage}, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// 401 is deterministic: no retry, no second create.
func TestGeminiNodeUnauthorizedFailsAtOnce(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: 10, Faults: []sim.Fault{
		{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultStatus, Status: 401}}})
	j := openJournal(t)
	res := runGraph(t, geminiGraph(t, srv, "ci", ""), j)
	if n := res.Nodes[0]; n.State != journal.NodeFailed {
		t.Fatalf("node %s", n.State)
	}
	if got := srv.Stats().Requests[sim.EndpointInteractionsCreate]; got != 1 {
		t.Fatalf("%d creates after a 401, want 1", got)
	}
}
