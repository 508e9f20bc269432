package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 4's acceptance at the node level: a `kind: responses` node runs
// through the executor's recovery loop against the simulator over real
// sockets, and the journal and the simulator's counters are inspected.
//
// Event layout of a sim background response of T tokens without reasoning
// (sequence_number = index): 0 created, 1 queued, 2 in_progress,
// 3 output_item.added, 4 content_part.added, 5..4+T output_text.delta,
// 5+T output_text.done, 6+T content_part.done, 7+T output_item.done,
// 8+T completed. A fault "after k events" acts once events 0..k-1 were
// written on that connection (a cut writes half of event k first).

const (
	respSeed   = 1
	respPrompt = "write about essay"
	respNode   = "essay"
)

// ciProfile is the profile every graph here runs with.
func ciProfile() profile.Profile { return profile.Builtins()["ci"] }

// responsesGraph is a one-node graph on a `kind: responses` provider at
// baseURL; extra is appended to the node (YAML lines indented by four).
func responsesGraph(t *testing.T, baseURL, extra string) *Graph {
	t.Helper()
	return responsesGraphProfile(t, "ci", baseURL, extra)
}

// responsesGraphProfile is responsesGraph with another built-in profile.
func responsesGraphProfile(t *testing.T, prof, baseURL, extra string) *Graph {
	t.Helper()
	return parseTestGraph(t, fmt.Sprintf(`name: t
profile: %s
providers:
  p:
    kind: responses
    base_url: %s
    model: sim
nodes:
  - id: %s
    prompt: %s
%s`, prof, baseURL, respNode, respPrompt, extra))
}

// wantText is the simulator's text for the node: a pure function of model,
// prompt, seed and length.
func wantText(tokens int) string {
	return strings.Join(sim.Text("sim", respPrompt, respSeed, tokens), "")
}

// undisturbedResponses runs the node on a fault-free simulator and returns
// its output, after checking it is the simulator's text.
func undisturbedResponses(t *testing.T, tokens int, extra string) string {
	t.Helper()
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: tokens})
	j := openJournal(t)
	res := runGraph(t, responsesGraph(t, srv.BaseURL(), extra), j)
	if res.Status != journal.RunCompleted {
		t.Fatalf("undisturbed run %s: %+v", res.Status, res.Nodes)
	}
	out := res.Nodes[0].Output
	if out != wantText(tokens) || len(out) < 4*tokens {
		t.Fatalf("undisturbed output (%d bytes) is not the simulator's text (%d bytes)", len(out), len(wantText(tokens)))
	}
	// NR207 (response created) is a record, not a recovery step.
	if got := codes(t, j, res.RunID, respNode); slices.ContainsFunc(got, func(c string) bool {
		return c < "NR400" && c != diagnostics.ResponseCreated.ID
	}) {
		t.Fatalf("undisturbed run journaled recovery codes %v", got)
	}
	return out
}

// runWith is runGraph with options (a logger, a profile set).
func runWith(t *testing.T, g *Graph, opts Options) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func diagCodes(ds []diagRec) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Code + " " + d.Message
	}
	return out
}

func count(ds []diagRec, code diagnostics.Code) int {
	n := 0
	for _, d := range ds {
		if d.Code == code.ID {
			n++
		}
	}
	return n
}

// inOrder reports whether the codes appear in ds in this order (not
// necessarily adjacent).
func inOrder(ds []diagRec, want ...diagnostics.Code) bool {
	i := 0
	for _, d := range ds {
		if i < len(want) && d.Code == want[i].ID {
			i++
		}
	}
	return i == len(want)
}

func attrInt(d diagRec, key string) (int64, bool) {
	f, ok := d.Attrs[key].(float64)
	return int64(f), ok
}

// checkOneResponse: exactly one response was created and it generated
// exactly its own tokens, none twice.
func checkOneResponse(t *testing.T, srv *sim.Server, tokens int) {
	t.Helper()
	st := srv.Stats()
	if st.ResponsesCreated != 1 || st.Requests[sim.EndpointResponsesCreate] != 1 || st.TokensGenerated != int64(tokens) {
		t.Errorf("sim: %d responses created (%d create requests), %d tokens generated; want 1, 1, %d (zero regenerated)",
			st.ResponsesCreated, st.Requests[sim.EndpointResponsesCreate], st.TokensGenerated, tokens)
	}
}

// checkOutput: the node's output, and the output rebuilt from its last
// attempt's journaled deltas, are want byte for byte.
func checkOutput(t *testing.T, j *journal.Journal, res *Result, want string) {
	t.Helper()
	n := res.Nodes[0]
	if n.State != journal.NodeCompleted || res.Status != journal.RunCompleted {
		t.Fatalf("node %s, run %s: %v", n.State, res.Status, n.Err)
	}
	if n.Output != want {
		t.Fatalf("output differs from the undisturbed run:\n got %d bytes %q\nwant %d bytes %q", len(n.Output), head(n.Output), len(want), head(want))
	}
	atts, err := j.Attempts(context.Background(), res.RunID, respNode)
	if err != nil || len(atts) == 0 {
		t.Fatalf("attempts: %v, %v", atts, err)
	}
	rebuilt, err := j.RebuildOutput(context.Background(), res.RunID, respNode, atts[len(atts)-1].N)
	if err != nil || rebuilt != want {
		t.Fatalf("output rebuilt from the journal (%d bytes) differs from the undisturbed run (%v)", len(rebuilt), err)
	}
}

// checkAttempt: the attempt's journaled response id is the one every
// diagnostic of the attempt names, and its cursor is the highest sequence
// number journaled for it or above (progress events move the cursor without
// being journaled).
func checkAttempt(t *testing.T, j *journal.Journal, runID string, a journal.Attempt, ds []diagRec) {
	t.Helper()
	if !strings.HasPrefix(a.Ref, "resp_") {
		t.Fatalf("attempt %d: ref %q is not a response id", a.N, a.Ref)
	}
	maxSeq, err := j.MaxProviderSeq(context.Background(), runID, respNode, a.N)
	if err != nil {
		t.Fatal(err)
	}
	if a.Cursor < maxSeq || a.Cursor < 1 {
		t.Errorf("attempt %d: cursor %d, below the highest journaled sequence number %d", a.N, a.Cursor, maxSeq)
	}
	for _, d := range ds {
		if ref, ok := d.Attrs["ref"].(string); ok && d.Attempt == a.N && ref != a.Ref {
			t.Errorf("attempt %d: %s names ref %q, the attempt's is %q", a.N, d.Code, ref, a.Ref)
		}
	}
}

// checkReattachCursors: every re-attach after a disconnect started from the
// cursor journaled at the disconnect (not from 0, not from elsewhere).
func checkReattachCursors(t *testing.T, ds []diagRec) {
	t.Helper()
	cursor := int64(-2)
	for _, d := range ds {
		switch d.Code {
		case diagnostics.DisconnectDetected.ID:
			c, ok := attrInt(d, "cursor")
			if !ok {
				t.Errorf("NR101 without a cursor: %+v", d)
			}
			cursor = c
		case diagnostics.Reattached.ID:
			seq, ok := attrInt(d, "seq")
			if !ok || seq != cursor {
				t.Errorf("re-attached from sequence %d (%v), the disconnect journaled cursor %d", seq, ok, cursor)
			}
			if !strings.Contains(d.Message, fmt.Sprintf("from sequence %d", seq)) {
				t.Errorf("NR201 message %q does not name the sequence", d.Message)
			}
		}
	}
}

func TestResponsesNodeSurvivesDisconnects(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	// The response is still generating when an early drop is recovered: the
	// re-attach must come within T/2 tokens. 500 a second leaves it 200 ms
	// on a machine that runs other tests meanwhile (this one runs beside
	// them, one drop at a time).
	const T, tps = 200, 500
	want := undisturbedResponses(t, T, "")
	type drop struct {
		name   string
		faults []sim.Fault
		// reattach: the response is still generating when the drops happen,
		// so each must be recovered by a re-attach (NR201), not from the
		// status.
		reattach bool
	}
	var drops []drop
	// Every kind of drop at the points the issue names; one kind, in turn,
	// at the points in between.
	all := []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut}
	points := []struct {
		name  string
		after int
		kinds []sim.FaultKind
	}{
		{"after_created", 1, all},
		{"after_queued", 2, all[2:]},
		{"after_in_progress", 3, all[1:2]},
		{"before_first_delta", 5, all[:1]},
		{"after_first_delta", 6, all[2:]},
		{"mid_text", 5 + T/2, all},
		{"before_last_delta", 4 + T, all[1:2]},
		{"before_text_done", 5 + T, all[:1]},
		{"after_text_done", 6 + T, all},
		{"after_part_done", 7 + T, all[2:]},
		{"before_completed", 8 + T, all},
	}
	for _, p := range points {
		for _, kind := range p.kinds {
			drops = append(drops, drop{name: fmt.Sprintf("%s_%s_%d", kind, p.name, p.after),
				faults: []sim.Fault{{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: kind, AfterEvents: p.after}},
				// at least T/2 tokens (200 ms at tps) still to generate at the drop
				reattach: p.after <= 5+T/2})
		}
	}
	// Several drops in one response, the later ones on re-attach streams
	// (their events are counted per connection, from starting_after on).
	drops = append(drops,
		drop{name: "five_drops", reattach: true, faults: []sim.Fault{
			{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: sim.FaultCut, AfterEvents: 1},
			{Endpoint: sim.EndpointResponsesStream, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 0},
			{Endpoint: sim.EndpointResponsesStream, Requests: []int{2}, Kind: sim.FaultReset, AfterEvents: 20},
			{Endpoint: sim.EndpointResponsesStream, Requests: []int{3}, Kind: sim.FaultCut, AfterEvents: 7},
			{Endpoint: sim.EndpointResponsesStream, Requests: []int{4}, Kind: sim.FaultClose, AfterEvents: 30},
		}},
		drop{name: "every_stream_drops_after_3", reattach: true, faults: []sim.Fault{
			{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 3},
			{Endpoint: sim.EndpointResponsesStream, Requests: []int{1, 2, 3, 4, 5, 6}, Kind: sim.FaultClose, AfterEvents: 3},
		}},
	)
	for _, d := range drops {
		t.Run(d.name, func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, TokensPerSecond: tps, Faults: d.faults})
			j := openJournal(t)
			res := runGraph(t, responsesGraph(t, srv.BaseURL(), ""), j)
			checkOutput(t, j, res, want)
			checkOneResponse(t, srv, T)
			st := srv.Stats()
			acted := int(st.Faults[string(sim.FaultClose)] + st.Faults[string(sim.FaultReset)] + st.Faults[string(sim.FaultCut)])
			if acted < 1 {
				t.Fatalf("no fault acted: %v", st.Faults)
			}

			ds := diagRecs(t, j, res.RunID, respNode)
			atts, err := j.Attempts(context.Background(), res.RunID, respNode)
			if err != nil || len(atts) != 1 || atts[0].Outcome != journal.OutcomeOK {
				t.Fatalf("attempts = %+v, %v; want one successful attempt (re-attaching is not a retry)", atts, err)
			}
			checkAttempt(t, j, res.RunID, atts[0], ds)
			checkReattachCursors(t, ds)
			// Each drop is a disconnect, followed by a status check; each is
			// recovered by a re-attach or, once the response completed, by
			// the status; never by a retry.
			if n := count(ds, diagnostics.DisconnectDetected); n != acted {
				t.Errorf("%d NR101 for %d drops:\n%s", n, acted, strings.Join(diagCodes(ds), "\n"))
			}
			if count(ds, diagnostics.StatusChecked) < acted || count(ds, diagnostics.Recovered) != 1 ||
				count(ds, diagnostics.RetryStarted)+count(ds, diagnostics.FellBackToRetry) != 0 {
				t.Errorf("codes:\n%s", strings.Join(diagCodes(ds), "\n"))
			}
			reattached, fromStatus := count(ds, diagnostics.Reattached), count(ds, diagnostics.OutputFromStatus)
			if reattached+fromStatus != acted || fromStatus > 1 || count(ds, diagnostics.ReconnectScheduled) != reattached {
				t.Errorf("%d re-attaches (%d scheduled) + %d outputs from status for %d drops:\n%s", reattached,
					count(ds, diagnostics.ReconnectScheduled), fromStatus, acted, strings.Join(diagCodes(ds), "\n"))
			}
			if d.reattach {
				if fromStatus != 0 || !inOrder(ds, diagnostics.DisconnectDetected, diagnostics.StatusChecked,
					diagnostics.ReconnectScheduled, diagnostics.Reattached, diagnostics.Recovered) {
					t.Errorf("want NR101, NR203, NR102, NR201, NR108 in order:\n%s", strings.Join(diagCodes(ds), "\n"))
				}
				if want := 8 + T; atts[0].Cursor != int64(want) {
					t.Errorf("cursor %d, want %d (response.completed)", atts[0].Cursor, want)
				}
			}
			if fromStatus == 1 && srv.Stats().Requests[sim.EndpointResponsesStream] != int64(reattached) {
				t.Errorf("output taken from the status, but %d stream requests for %d re-attaches",
					srv.Stats().Requests[sim.EndpointResponsesStream], reattached)
			}
		})
	}
}

// gateLogger is a slog handler that calls onDisconnect (once) when the
// executor reports NR101, before it decides what to do next: a test can make
// the world reach a known state at that point.
type gateLogger struct {
	once         *sync.Once
	onDisconnect func(ref string)
}

func (g gateLogger) Enabled(context.Context, slog.Level) bool { return true }
func (g gateLogger) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g gateLogger) WithGroup(string) slog.Handler            { return g }
func (g gateLogger) Handle(_ context.Context, r slog.Record) error {
	var code, ref string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "code":
			code = a.Value.String()
		case "ref":
			ref = a.Value.String()
		}
		return true
	})
	if code == diagnostics.DisconnectDetected.ID {
		g.once.Do(func() { g.onDisconnect(ref) })
	}
	return nil
}

// waitCompleted polls the simulator (directly, not through the adapter)
// until response ref is completed.
func waitCompleted(t *testing.T, baseURL, ref string) {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		resp, err := hc.Get(baseURL + "/responses/" + ref)
		if err != nil {
			continue
		}
		var r struct {
			Status string `json:"status"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		_ = resp.Body.Close()
		if err == nil && r.Status == "completed" {
			return
		}
	}
	t.Errorf("response %q did not complete", ref)
}

// The status check path: a drop near the end of a response that has already
// completed is recovered from the status (NR206), with no stream request.
// The generator is unpaced, and the test holds the executor at its NR101
// until the simulator says completed, so the path is deterministic.
func TestResponsesNodeOutputFromStatus(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	const T = 200
	want := undisturbedResponses(t, T, "")
	tokens := sim.Text("sim", respPrompt, respSeed, T)
	for _, c := range []struct {
		kind  sim.FaultKind
		after int
	}{
		{sim.FaultClose, 5 + T/2}, {sim.FaultReset, 4 + T}, {sim.FaultCut, 5 + T},
		{sim.FaultClose, 6 + T}, {sim.FaultReset, 7 + T}, {sim.FaultCut, 8 + T},
	} {
		t.Run(fmt.Sprintf("%s_after_%d", c.kind, c.after), func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, Faults: []sim.Fault{
				{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: c.kind, AfterEvents: c.after}}})
			gate := gateLogger{once: new(sync.Once), onDisconnect: func(ref string) { waitCompleted(t, srv.BaseURL(), ref) }}
			j := openJournal(t)
			res := runWith(t, responsesGraph(t, srv.BaseURL(), ""), Options{Journal: j, Logger: slog.New(gate)})
			checkOutput(t, j, res, want)
			checkOneResponse(t, srv, T)
			if n := srv.Stats().Requests[sim.EndpointResponsesStream]; n != 0 {
				t.Errorf("%d responses.stream requests after the status said completed, want 0", n)
			}
			ds := diagRecs(t, j, res.RunID, respNode)
			var fromStatus *diagRec
			if !inOrder(ds, diagnostics.DisconnectDetected, diagnostics.StatusChecked, diagnostics.OutputFromStatus, diagnostics.Recovered) ||
				count(ds, diagnostics.DisconnectDetected) != 1 || count(ds, diagnostics.ReconnectScheduled)+count(ds, diagnostics.Reattached) != 0 {
				t.Fatalf("want NR101, NR203, NR206, NR108 and no re-attach:\n%s", strings.Join(diagCodes(ds), "\n"))
			}
			for _, d := range ds {
				if d.Code == diagnostics.StatusChecked.ID && d.Attrs["state"] != "completed" {
					t.Errorf("status checked: %+v, want state completed", d)
				}
				if d.Code == diagnostics.OutputFromStatus.ID {
					fromStatus = &d
				}
			}
			atts, err := j.Attempts(context.Background(), res.RunID, respNode)
			if err != nil || len(atts) != 1 {
				t.Fatalf("attempts = %+v, %v", atts, err)
			}
			checkAttempt(t, j, res.RunID, atts[0], ds)
			// A close or a cut delivers every event before the drop; a reset
			// may lose what was in flight (the RST discards the client's
			// receive buffer), so the cursor is only bounded.
			cur := atts[0].Cursor
			if cur != int64(c.after-1) && (c.kind != sim.FaultReset || cur > int64(c.after-1)) {
				t.Errorf("cursor %d, want %d: the last event before the drop", cur, c.after-1)
			}
			// The deltas that arrived before the drop stay; the status supplies the rest.
			streamed := min(max(int(cur)-4, 0), T)
			rest := int64(len(want) - len(strings.Join(tokens[:streamed], "")))
			if n, ok := attrInt(*fromStatus, "bytes_from_status"); !ok || n != rest {
				t.Errorf("bytes_from_status = %d, want %d (%d of %d deltas streamed)", n, rest, streamed, T)
			}
		})
	}
}

// A response stuck in queued is cancelled after the profile's stuck bound,
// retried from scratch (which consumes the retry budget), and the node
// completes within the profile's deadline.
func TestResponsesNodeStuckQueuedIsCancelledAndRetried(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	const T = 100
	want := undisturbedResponses(t, T, "")
	prof := ciProfile()
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: sim.FaultQueued}}})
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, responsesGraph(t, srv.BaseURL(), ""), j)
	took := time.Since(start)
	checkOutput(t, j, res, want)
	if took < prof.StuckAfter.D() || took > prof.Deadline.D() {
		t.Errorf("took %s; want between the stuck bound %s and the deadline %s", took, prof.StuckAfter, prof.Deadline)
	}
	st := srv.Stats()
	if st.ResponsesCreated != 2 || st.TokensGenerated != T || st.Requests[sim.EndpointResponsesCancel] != 1 || st.Faults[string(sim.FaultQueued)] != 1 {
		t.Errorf("sim: %d responses, %d tokens, %d cancels, faults %v; want 2, %d, 1, one queued",
			st.ResponsesCreated, st.TokensGenerated, st.Requests[sim.EndpointResponsesCancel], st.Faults, T)
	}
	ds := diagRecs(t, j, res.RunID, respNode)
	if !inOrder(ds, diagnostics.PollingStarted, diagnostics.StatusChecked, diagnostics.FellBackToRetry, diagnostics.Recovered) ||
		!inOrder(ds, diagnostics.StatusChecked, diagnostics.StuckCancelled, diagnostics.Recovered) ||
		count(ds, diagnostics.StuckCancelled) != 1 || count(ds, diagnostics.FellBackToRetry) != 1 {
		t.Errorf("want NR202, NR203, then NR205 and NR204, then NR108:\n%s", strings.Join(diagCodes(ds), "\n"))
	}
	// A response left queued did not disconnect: NR203 already said what was
	// found, and the NR101 "disconnect detected" would send an operator
	// looking for a network problem that is not there.
	if n := count(ds, diagnostics.DisconnectDetected); n != 0 {
		t.Errorf("a stuck response is journaled as %d NR101 disconnect_detected:\n%s", n, strings.Join(diagCodes(ds), "\n"))
	}
	atts, err := j.Attempts(context.Background(), res.RunID, respNode)
	if err != nil || len(atts) != 2 {
		t.Fatalf("attempts = %+v, %v; want the stuck one and the retry", atts, err)
	}
	if atts[0].Outcome != journal.OutcomeError || atts[0].ErrClass != diagnostics.ClassStuck || atts[1].Outcome != journal.OutcomeOK || atts[1].Mode != journal.ModeRetry {
		t.Errorf("attempts = %+v", atts)
	}
	if atts[0].Ref == atts[1].Ref {
		t.Errorf("the retry reused response %s", atts[0].Ref)
	}
	for _, d := range ds {
		if d.Code == diagnostics.StuckCancelled.ID && (d.Attempt != 1 || d.Attrs["ref"] != atts[0].Ref || d.Attrs["error"] != nil) {
			t.Errorf("NR204 %+v: want attempt 1's response %s cancelled without error", d, atts[0].Ref)
		}
		if d.Code == diagnostics.FellBackToRetry.ID && (d.Attempt != 1 || d.Attrs["retries_left"] != float64(prof.Retries-1)) {
			t.Errorf("NR205 %+v: want it on attempt 1, taking one retry of %d", d, prof.Retries)
		}
	}
	checkAttempt(t, j, res.RunID, atts[1], ds)
}

// An outage fails the node within the profile's deadline as connect_failed.
func TestResponsesNodeOutageFailsWithinDeadline(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: respSeed})
	res, j := runOutage(t, srv, responsesGraph(t, srv.BaseURL(), ""))
	ds := diagRecs(t, j, res.RunID, respNode)
	if count(ds, diagnostics.ConnectFailed) < 1 || count(ds, diagnostics.NodeFailed) != 1 || count(ds, diagnostics.DisconnectDetected) != 0 {
		t.Errorf("want connect_failed and node_failed:\n%s", strings.Join(diagCodes(ds), "\n"))
	}
	if st := srv.Stats(); st.ResponsesCreated != 0 {
		t.Errorf("%d responses created during an outage", st.ResponsesCreated)
	}
}

// A 401 on create fails at once: one request, a message that says why.
func TestResponsesNodeUnauthorizedFailsAtOnce(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Faults: []sim.Fault{{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultStatus, Status: 401}}})
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, responsesGraph(t, srv.BaseURL(), ""), j)
	n := res.Nodes[0]
	if n.State != journal.NodeFailed {
		t.Fatalf("node %s", n.State)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a 401 took %s to fail", took)
	}
	if st := srv.Stats(); st.Requests[sim.EndpointResponsesCreate] != 1 || len(st.Requests) != 1 {
		t.Errorf("requests %v, want exactly one create", st.Requests)
	}
	var ne *NodeError
	if !errors.As(n.Err, &ne) || ne.Class != diagnostics.ClassDeterministic {
		t.Fatalf("error = %v, want a deterministic NodeError", n.Err)
	}
	msg := n.Err.Error()
	for _, want := range []string{"401", "authentication", "api_key_env", "OPENAI_API_KEY", "not retried", diagnostics.DeterministicError.ID} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	ds := diagRecs(t, j, res.RunID, respNode)
	if count(ds, diagnostics.DeterministicError) < 1 || count(ds, diagnostics.NodeFailed) != 1 ||
		count(ds, diagnostics.RetryStarted)+count(ds, diagnostics.StatusChecked) != 0 {
		t.Errorf("codes:\n%s", strings.Join(diagCodes(ds), "\n"))
	}
}

// Silence longer than the idle window, with keepalive comments flowing: the
// comments do not count as progress, the adapter polls (NR202) instead of
// holding the silent stream, re-attaches when output moves, and nothing is
// regenerated. Silence alone is not a failure: no disconnect is journaled.
func TestResponsesNodeSilenceWithKeepalivesPolls(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	const T = 100
	want := undisturbedResponses(t, T, "")
	idle := ciProfile().IdleTimeout.D()
	silence, keepalive := idle+time.Second, 200*time.Millisecond
	cfg := sim.Config{Seed: respSeed, Tokens: T, TokensPerSecond: 2000, Silence: silence, Keepalive: keepalive}
	assertKeepalives(t, cfg, keepalive)

	srv := simtest.Start(t, cfg)
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, responsesGraph(t, srv.BaseURL(), ""), j)
	checkOutput(t, j, res, want)
	checkOneResponse(t, srv, T)
	if took := time.Since(start); took < silence {
		t.Errorf("completed in %s, before the silence (%s) ended", took, silence)
	}
	ds := diagRecs(t, j, res.RunID, respNode)
	if !inOrder(ds, diagnostics.PollingStarted, diagnostics.StatusChecked, diagnostics.Reattached) || count(ds, diagnostics.PollingStarted) != 1 {
		t.Errorf("want NR202, NR203, NR201:\n%s", strings.Join(diagCodes(ds), "\n"))
	}
	for _, c := range []diagnostics.Code{diagnostics.DisconnectDetected, diagnostics.IdleTimeout, diagnostics.RetryStarted, diagnostics.Recovered} {
		if count(ds, c) != 0 {
			t.Errorf("silence journaled %s:\n%s", c, strings.Join(diagCodes(ds), "\n"))
		}
	}
	st := srv.Stats()
	if st.Requests[sim.EndpointResponsesGet] < 2 || st.Requests[sim.EndpointResponsesStream] != 1 {
		t.Errorf("requests %v: want polls and one re-attach", st.Requests)
	}
	atts, err := j.Attempts(context.Background(), res.RunID, respNode)
	if err != nil || len(atts) != 1 {
		t.Fatalf("attempts = %+v, %v", atts, err)
	}
	checkAttempt(t, j, res.RunID, atts[0], ds)
	if atts[0].Cursor != 8+T {
		t.Errorf("cursor %d, want %d", atts[0].Cursor, 8+T)
	}
}

// A drop just before a silence longer than the recovery deadline: the
// re-attach finds nothing to stream, polls through the silence while the
// status says in_progress, and re-attaches when output moves. The deadline
// must not cut that polling: a stall is declared only when the status says
// the response is not progressing, never from silence alone (issue 4).
func TestResponsesNodeDropBeforeLongSilence(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	const T = 50
	want := undisturbedResponses(t, T, "")
	prof := ciProfile()
	silence := prof.Deadline.D() + time.Second
	// Events 0-4 come at once, then the silence before the first delta.
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: T, Silence: silence, Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 5}}})
	j := openJournal(t)
	start := time.Now()
	res := runGraph(t, responsesGraph(t, srv.BaseURL(), ""), j)
	took := time.Since(start)
	ds := diagRecs(t, j, res.RunID, respNode)
	if n := res.Nodes[0]; n.State != journal.NodeCompleted {
		t.Fatalf("node %s after %s: %v\n%s", n.State, took.Round(time.Millisecond), n.Err, strings.Join(diagCodes(ds), "\n"))
	}
	checkOutput(t, j, res, want)
	checkOneResponse(t, srv, T)
	if took < silence {
		t.Errorf("completed in %s, before the %s silence ended", took, silence)
	}
	if !inOrder(ds, diagnostics.DisconnectDetected, diagnostics.StatusChecked, diagnostics.ReconnectScheduled,
		diagnostics.Reattached, diagnostics.PollingStarted, diagnostics.Reattached, diagnostics.Recovered) ||
		count(ds, diagnostics.DisconnectDetected) != 1 || count(ds, diagnostics.DeadlineExceeded) != 0 {
		t.Errorf("want NR101, NR203, NR102, NR201, NR202, NR201, NR108:\n%s", strings.Join(diagCodes(ds), "\n"))
	}
	checkReattachCursors(t, ds[:2])
}

// assertKeepalives checks on a simulator of its own that cfg really sends
// keepalive comments during the silence, so that the test above shows they
// are ignored rather than absent.
func assertKeepalives(t *testing.T, cfg sim.Config, every time.Duration) {
	t.Helper()
	srv := simtest.Start(t, cfg)
	// The request and the first keepalive within ten intervals: a loaded
	// make test has taken more than three (600 ms) to deliver them. A server
	// without keepalives still fails: the read ends, at the deadline or with
	// the stream, before any comment.
	within := 10 * every
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.BaseURL()+"/responses",
		strings.NewReader(`{"model":"sim","input":"x","background":true,"stream":true,"store":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 0, 4096)
	for !strings.Contains(string(buf), ": keepalive") {
		tmp := make([]byte, 512)
		n, err := resp.Body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			t.Fatalf("no keepalive comment within %s: %v\n%s", within, err, buf)
		}
	}
}
