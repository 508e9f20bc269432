package temporal

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/view"
)

// Diagnosis is `diagnose --temporal`: the account local diagnose
// prints (each node's figures are those of the worker that finished it,
// from its journal, as its activity result carries them), what Temporal's
// history shows of the run, and each hand-over of a node from a lost or
// stopped worker to another.
type Diagnosis struct {
	*ledger.Account
	Temporal  Workflow   `json:"temporal"`
	Handovers []Handover `json:"handovers"`
}

// Workflow is the run as its workflow history shows it.
type Workflow struct {
	WorkflowID string `json:"workflow_id"`
	// Executions are the workflow's run ids, first to last (continue-as-new).
	Executions   []string           `json:"executions"`
	Status       string             `json:"status"`
	Started      *string            `json:"started,omitempty"`
	Closed       *string            `json:"closed,omitempty"`
	Events       int                `json:"history_events"`
	Bytes        int64              `json:"history_bytes"`
	Activities   []WorkflowActivity `json:"activities"`
	PendingNodes int                `json:"pending_nodes"`
}

// WorkflowActivity is one node activity (a node of a pack: the pack's times,
// attempt and worker).
type WorkflowActivity struct {
	Node      string  `json:"node"`
	Replay    int     `json:"replay"`
	Execution string  `json:"execution"`
	State     string  `json:"state"`
	Worker    string  `json:"worker"`
	Attempt   int32   `json:"activity_attempt"`
	Scheduled *string `json:"scheduled,omitempty"`
	Started   *string `json:"started,omitempty"`
	Closed    *string `json:"closed,omitempty"`
	Failure   string  `json:"failure,omitempty"`
	// Pack is the activity id of the pack that ran the node ("" alone).
	Pack string `json:"pack,omitempty"`
}

// Handover is a node taken over from a lost (or stopped) worker.
type Handover struct {
	Node   string `json:"node"`
	Replay int    `json:"replay"`
	// LostWorker is the worker whose last heartbeat the node continued
	// from ("" if that heartbeat did not name it: an older worker).
	LostWorker string `json:"lost_worker"`
	// Worker took the node over ("" while its next attempt waits to start).
	Worker          string `json:"worker"`
	ActivityAttempt int32  `json:"activity_attempt"`
	// Failure is how Temporal saw the lost attempt end: "activity Heartbeat
	// timeout" (a dead worker) or the stopped worker's error.
	Failure string `json:"failure"`
	// LastHeartbeat is when the lost worker recorded its last heartbeat
	// that Temporal holds; FailedAt when that heartbeat's timeout ran out
	// (LastHeartbeat + the activity's heartbeat timeout; only for a
	// timeout); Resumed when the next attempt started.
	LastHeartbeat *string `json:"last_heartbeat,omitempty"`
	FailedAt      *string `json:"failed_at,omitempty"`
	Resumed       *string `json:"resumed,omitempty"`
	// HandoverMS is LastHeartbeat → Resumed: how long nobody ran the node.
	HandoverMS         *int64 `json:"handover_ms"`
	HeartbeatTimeoutMS int64  `json:"heartbeat_timeout_ms"`
	// Cursor is the lost worker's last heartbeat (its answer left out) and
	// HeldBytes what of the answer it held.
	Cursor    *runner.NodeCursor `json:"cursor,omitempty"`
	HeldBytes int                `json:"held_bytes"`
	// Recovery is how the new worker went on: re-attached (NR201), output
	// from the response's status (NR206), continued (a chat answer), or
	// retried from scratch.
	Recovery string `json:"recovery"`
	// Tokens are the node's figures in the new worker's ledger: what the
	// provider generated for it there, what of it was regenerated, what a
	// re-attach or continue preserved.
	Tokens HandoverTokens `json:"tokens"`
}

type HandoverTokens struct {
	Generated   int  `json:"generated"`
	Regenerated int  `json:"regenerated"`
	Preserved   int  `json:"preserved"`
	Estimated   bool `json:"estimated"`
}

// Diagnose reads run runID's workflow history (and, while it runs,
// its pending activities) and accounts for it.
func Diagnose(ctx context.Context, tc client.Client, runID string) (*Diagnosis, *History, error) {
	h, err := ReadHistory(ctx, tc, runID)
	if err != nil {
		return nil, nil, err
	}
	in := InputOf(h)
	var pend map[string]PendingActivity
	if h.Status == "running" {
		if pend, err = pendingActivities(ctx, tc, runID); err != nil {
			return nil, nil, err
		}
	}
	return account(h, in, pend, time.Now()), h, nil
}

// InputOf is the run's input as its first execution got it: the graph
// and profile (zero if it does not decode: the figures do not need it).
func InputOf(h *History) RunInput {
	var in RunInput
	if p := h.Input.GetPayloads(); len(p) > 0 {
		_ = converter.GetDefaultDataConverter().FromPayload(p[0], &in)
	}
	return in
}

// pendingActivities are the run's running nodes (a pack's each) by
// nodeActivity.
func pendingActivities(ctx context.Context, tc client.Client, runID string) (map[string]PendingActivity, error) {
	d, err := tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return nil, fmt.Errorf("run %s: pending activities: %w", runID, err)
	}
	return pendingByNode(d), nil
}

// pendingByNode keys a run's running nodes by nodeActivity.
func pendingByNode(d *workflowservice.DescribeWorkflowExecutionResponse) map[string]PendingActivity {
	out := map[string]PendingActivity{}
	for _, p := range PendingActivities(d) {
		out[nodeActivity(p.Node, p.Replay)] = p
	}
	return out
}

// nodeActivity names a node's activity, packed or not: the node ("NODE#n"
// for an operator's replay, which runs alone). A node runs in one activity
// at a time, so it names the running one whatever its pack.
func nodeActivity(node string, replay int) string {
	if replay > 0 {
		return fmt.Sprintf("%s#%d", node, replay)
	}
	return node
}

// account builds the diagnosis from a history. A node's last
// activity (its latest replay) is its account; a node never scheduled is
// not listed.
func account(h *History, in RunInput, pend map[string]PendingActivity, now time.Time) *Diagnosis {
	graph := ""
	if g, err := runner.ParseGraph(in.GraphPath, []byte(in.GraphText)); err == nil {
		graph = g.Name
	}
	d := &Diagnosis{
		Account: &ledger.Account{RunID: h.WorkflowID, Graph: graph, Profile: in.Profile.Name, // its status once its nodes are known
			Nodes: []ledger.NodeAccount{}, Warnings: []string{}},
		Temporal: Workflow{WorkflowID: h.WorkflowID, Executions: h.Runs, Status: h.Status, Started: view.Time(h.Started),
			Closed: view.Time(h.Closed), Events: h.Events, Bytes: h.Bytes, Activities: []WorkflowActivity{}, PendingNodes: len(pend)},
		Handovers: []Handover{},
	}
	if !h.Closed.IsZero() {
		d.WallMS = h.Closed.Sub(h.Started).Milliseconds()
	} else if !h.Started.IsZero() {
		d.WallMS = now.Sub(h.Started).Milliseconds()
	}
	last := map[string]int{} // node → index of its account
	for _, a := range h.Activities {
		d.Temporal.Activities = append(d.Temporal.Activities, WorkflowActivity{Node: a.Node, Replay: a.Replay, Execution: a.Run, State: a.State,
			Worker: a.Worker, Attempt: a.Attempt, Scheduled: view.Time(a.Scheduled), Started: view.Time(a.Started), Closed: view.Time(a.Closed), Failure: a.Failure,
			Pack: a.Pack})
		p, running := pend[nodeActivity(a.Node, a.Replay)]
		running = running && a.State == "running"
		ho, ok := handoverOf(a, p, running)
		if ok {
			d.Handovers = append(d.Handovers, ho)
		}
		na := nodeAccount(a, ho, ok, p, running, now)
		if i, seen := last[a.Node]; seen {
			d.Nodes[i] = na
		} else {
			last[a.Node] = len(d.Nodes)
			d.Nodes = append(d.Nodes, na)
		}
	}
	d.Totals = ledger.Figures{RecoverySteps: map[ledger.CodeName]int{}, Faults: map[ledger.CodeName]int{}}
	for _, n := range d.Nodes {
		addFigures(&d.Totals, n.Figures)
	}
	d.Status = runStatus(h.Status, d.Nodes)
	d.Summary = summary(d)
	return d
}

// runStatus is the run's status as local diagnose names it: a workflow that
// completed with a node that did not is a failed run, as `run --temporal`
// says; one timed out, canceled or terminated failed too.
func runStatus(workflow string, nodes []ledger.NodeAccount) journal.RunStatus {
	switch workflow {
	case "running":
		return journal.RunRunning
	case "completed":
		for _, n := range nodes {
			if n.State != journal.NodeCompleted {
				return journal.RunFailed
			}
		}
		return journal.RunCompleted
	}
	return journal.RunFailed
}

// handoverOf is the hand-over an activity shows: an attempt above 1 (the
// history holds the last attempt only: of several hand-overs of one node,
// the last is detailed), or a running activity's retry.
func handoverOf(a Activity, p PendingActivity, running bool) (Handover, bool) {
	attempt, worker, started := a.Attempt, a.Worker, a.Started
	if running {
		// Under way: the last heartbeat is the lost worker's until the
		// attempt that took the node over sends its own, which names the
		// lost worker and its last heartbeat's time.
		attempt, started = p.Attempt, p.Started
		a.LastFailure = p.LastFailure
		switch c := p.Beat.NodeCursor; {
		case p.Beat.LostWorker != "": // the new attempt's heartbeat names the lost worker
			a.LastHeartbeat, a.LostWorker, a.LastBeat = nil, p.Beat.LostWorker, p.Beat.LostAt
		case p.Beat.Worker != "" && (started.IsZero() || p.Beat.Worker != p.Worker):
			a.LastHeartbeat, a.LostWorker, a.LastBeat = &c, p.Beat.Worker, p.Beat.At
		}
		worker = ""
		if !started.IsZero() {
			worker = p.Worker
		}
	}
	if attempt < 2 {
		return Handover{}, false
	}
	ho := Handover{Node: a.Node, Replay: a.Replay, Worker: worker, ActivityAttempt: attempt, Failure: a.LastFailure,
		LostWorker: a.LostWorker, HeartbeatTimeoutMS: a.HeartbeatTimeout.Milliseconds(), Resumed: view.Time(started), Recovery: "retried"}
	if c := a.LastHeartbeat; c != nil {
		cur := *c
		ho.HeldBytes = max(len(cur.Output), cur.Bytes)
		cur.Output = ""
		ho.Cursor = &cur
	}
	if !a.LastBeat.IsZero() {
		ho.LastHeartbeat = view.Time(a.LastBeat)
		if strings.Contains(strings.ToLower(a.LastFailure), "heartbeat timeout") {
			ho.FailedAt = view.Time(a.LastBeat.Add(a.HeartbeatTimeout))
		}
		if !started.IsZero() {
			ms := started.Sub(a.LastBeat).Milliseconds()
			ho.HandoverMS = &ms
		}
	}
	if o := a.Outcome; o != nil {
		codes := map[string]bool{}
		for _, dg := range o.Diagnostics {
			codes[dg.Code] = true
		}
		switch {
		case codes[diagnostics.Reattached.ID]:
			ho.Recovery = "re-attached"
		case codes[diagnostics.OutputFromStatus.ID]:
			ho.Recovery = "output from status"
		case codes[diagnostics.ContinueAccepted.ID] || a.LastHeartbeat != nil && a.LastHeartbeat.Output != "":
			ho.Recovery = "continued"
		case codes[diagnostics.ThreadResumed.ID]:
			ho.Recovery = "thread resumed"
		}
		if t := o.Tokens; t != nil {
			ho.Tokens = HandoverTokens{Generated: t.Generated, Regenerated: t.Regenerated, Preserved: t.Preserved, Estimated: t.Estimated}
		}
	}
	return ho, true
}

// nodeAccount is a node's figures from its activity: the finishing
// worker's ledger (tokens, verdict, the diagnostics it journaled) and the
// history's times; the time a hand-over took is time lost.
func nodeAccount(a Activity, ho Handover, handedOver bool, p PendingActivity, running bool, now time.Time) ledger.NodeAccount {
	// A node's state as local diagnose names it: its outcome's, else its
	// activity's (one that timed out or was canceled failed).
	state, kind := journal.NodeFailed, ledger.VerdictFailed
	if a.State == "running" {
		state, kind = journal.NodeRunning, ledger.VerdictRunning
	}
	na := ledger.NodeAccount{ID: a.Node, State: state, Figures: ledger.Figures{RecoverySteps: map[ledger.CodeName]int{}, Faults: map[ledger.CodeName]int{}}}
	end := a.Closed
	if end.IsZero() {
		end = now
	}
	if !a.Scheduled.IsZero() {
		na.WallMS = end.Sub(a.Scheduled).Milliseconds()
	}
	if handedOver && ho.HandoverMS != nil {
		na.TimeLostMS = min(*ho.HandoverMS, na.WallMS)
		na.Faults["lost worker"] += int(ho.ActivityAttempt - 1)
	}
	if o := a.Outcome; o != nil {
		na.State, na.Verdict, na.Attempts = journal.NodeState(o.State), ledger.Verdict{Kind: o.VerdictKind, Text: o.Verdict}, o.Cursor.Attempt
		if o.Tokens != nil {
			na.Tokens = *o.Tokens
		}
		for _, dg := range o.Diagnostics {
			code, ok := diagnostics.Lookup(dg.Code)
			switch {
			case !ok:
			case code.IsFault():
				na.Faults[ledger.CodeName(code.Name)]++
			case code.Role == diagnostics.RoleStep:
				na.RecoverySteps[ledger.CodeName(code.Name)]++
			}
		}
	} else if running {
		na.Attempts = p.Beat.Attempt
		na.Verdict = ledger.Verdict{Kind: ledger.VerdictRunning, Text: fmt.Sprintf("running on %s (activity attempt %d)", dash(p.Worker), p.Attempt)}
		if p.Started.IsZero() {
			na.Verdict.Text = fmt.Sprintf("waiting for a worker (activity attempt %d; the last one ended: %s)", p.Attempt, p.LastFailure)
		}
	}
	if na.Verdict.Text == "" { // no outcome: the activity's own state says it
		na.Verdict = ledger.Verdict{Kind: kind, Text: a.State}
		if a.Failure != "" {
			na.Verdict.Text += ": " + a.Failure
		}
	}
	if handedOver && ho.LostWorker != "" && ho.Worker != "" && ho.HandoverMS != nil {
		// The finishing worker's verdict does not know the time nobody ran
		// the node; the history does.
		na.Verdict.Text += fmt.Sprintf("; taken over from worker %s after %s", ho.LostWorker, ledger.Seconds(*ho.HandoverMS))
	}
	na.UsefulMS = max(na.WallMS-na.TimeLostMS, 0)
	return na
}

func addFigures(t *ledger.Figures, f ledger.Figures) {
	t.Attempts += f.Attempts
	t.WallMS += f.WallMS
	t.UsefulMS += f.UsefulMS
	t.TimeLostMS += f.TimeLostMS
	t.QuotaWaitMS += f.QuotaWaitMS
	for k, v := range f.RecoverySteps {
		t.RecoverySteps[k] += v
	}
	for k, v := range f.Faults {
		t.Faults[k] += v
	}
	tt, ft := &t.Tokens, f.Tokens
	tt.Generated += ft.Generated
	tt.Needed += ft.Needed
	tt.Regenerated += ft.Regenerated
	tt.Preserved += ft.Preserved
	tt.Unfinished += ft.Unfinished
	tt.Input += ft.Input
	tt.Reasoning += ft.Reasoning
	tt.CacheRead += ft.CacheRead
	tt.CacheWrite += ft.CacheWrite
	tt.Estimated = tt.Estimated || ft.Estimated
	tt.Hidden = tt.Hidden || ft.Hidden
}

// summary says in a few lines what the run cost and each hand-over.
func summary(d *Diagnosis) []string {
	t := d.Totals.Tokens
	out := []string{fmt.Sprintf("%s on Temporal: workflow %s, %s history events (%s) in %s; %s tokens generated, %s regenerated, %s preserved",
		ledger.ShortRunID(d.RunID), d.Temporal.Status, ledger.Thousands(d.Temporal.Events), ledger.Size(d.Temporal.Bytes),
		executionsText(len(d.Temporal.Executions)), ledger.Thousands(t.Generated), ledger.Thousands(t.Regenerated), ledger.Thousands(t.Preserved))}
	for _, ho := range d.Handovers {
		out = append(out, handoverLine(ho))
	}
	if len(d.Handovers) == 0 {
		out = append(out, "no node changed worker")
	}
	return out
}

// handoverLine is a hand-over for people: "hand-over of reason: worker w1
// lost (activity Heartbeat timeout), w2 re-attached 11.1 s after w1's last
// heartbeat; 2,000 tokens generated, 0 regenerated, 0 preserved" ("stopped"
// for a worker that stopped).
func handoverLine(ho Handover) string {
	lost := ho.LostWorker
	if lost == "" {
		lost = "(unnamed)"
	}
	took := "not yet taken over"
	if ho.Worker != "" {
		took = fmt.Sprintf("%s %s it", ho.Worker, ho.Recovery)
		if ho.HandoverMS != nil {
			took += fmt.Sprintf(" %s after %s's last heartbeat", ledger.Seconds(*ho.HandoverMS), lost)
		}
	}
	// A dead worker is noticed by its heartbeat timeout; one that stops
	// (SIGTERM) fails its node itself.
	how, why := "lost", ho.Failure
	if ho.FailedAt == nil && why != "" {
		how = "stopped"
	}
	if why == "" {
		why = "no failure recorded"
	}
	return fmt.Sprintf("hand-over of %s (activity attempt %d): worker %s %s (%s), %s; %s tokens generated, %s regenerated, %s preserved",
		ho.Node, ho.ActivityAttempt, lost, how, why, took, ledger.Thousands(ho.Tokens.Generated), ledger.Thousands(ho.Tokens.Regenerated),
		ledger.Thousands(ho.Tokens.Preserved))
}

// Clock is an RFC 3339 time as a time of day ("-" for none).
func Clock(s *string) string {
	if s == nil {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return *s
	}
	return t.Format("15:04:05.000")
}

// Only keeps node's account and hand-overs alone; it reports whether the
// run has that node.
func (d *Diagnosis) Only(node string) bool {
	var keep []ledger.NodeAccount
	for _, n := range d.Nodes {
		if n.ID == node {
			keep = append(keep, n)
		}
	}
	if keep == nil {
		return false
	}
	d.Nodes = keep
	hs := []Handover{}
	for _, ho := range d.Handovers {
		if ho.Node == node {
			hs = append(hs, ho)
		}
	}
	d.Handovers = hs
	return true
}

func executionsText(n int) string {
	if n == 1 {
		return "1 execution"
	}
	return fmt.Sprintf("%d executions (continued as new)", n)
}

// LedgerRun is a Temporal run as the report page draws a journaled
// one: the graph from the workflow's input, a node per graph node (its last
// activity's outcome; a node no activity ran is pending, or skipped once the
// run ended), an attempt per activity attempt the history shows (a lost
// attempt from its scheduling to its worker's last heartbeat, the last one
// from its start to its end), the diagnostics the finishing worker
// journaled, and one session: the workflow's life. The workers' journals
// hold the rest (each worker's share: noderun events --db WORKER.db RUN).
func LedgerRun(h *History, in RunInput, d *Diagnosis, now time.Time) *ledger.Run {
	// d accounts for h: its status is the run's as local diagnose names it.
	status := journal.RunStatus(d.Status)
	run := &ledger.Run{Run: journal.Run{ID: h.WorkflowID, GraphPath: in.GraphPath, GraphText: []byte(in.GraphText), Inputs: in.Inputs,
		Profile: in.Profile.Name, Status: status, Started: h.Started, Finished: h.Closed}}
	end := h.Closed
	if end.IsZero() {
		end = now
	}
	run.Sessions = []ledger.Span{{From: h.Started, To: end}}
	last := map[string]Activity{}
	var order []string
	for _, a := range h.Activities {
		if _, ok := last[a.Node]; !ok {
			order = append(order, a.Node)
		}
		last[a.Node] = a
	}
	if g, err := runner.ParseGraph(in.GraphPath, []byte(in.GraphText)); err == nil {
		run.Graph, run.Run.Graph = g, g.Name
		order = order[:0]
		for _, n := range g.Nodes {
			order = append(order, n.ID)
		}
	}
	for _, id := range order {
		a, ran := last[id]
		nd := &ledger.Node{Node: journal.Node{RunID: h.WorkflowID, ID: id, State: journal.NodePending}}
		provider := ""
		if run.Graph != nil {
			if n := run.Graph.Node(id); n != nil {
				provider = n.Provider
			}
		}
		switch {
		case !ran && status != journal.RunRunning:
			nd.State, nd.Reason = journal.NodeSkipped, "not run: a node it needs did not complete"
		case ran:
			nd.State, nd.Started, nd.Finished = journal.NodeRunning, a.Scheduled, a.Closed
			nd.Active = []ledger.Span{{From: a.Scheduled, To: later(a.Closed, end)}}
			if a.State == "timed_out" || a.State == "canceled" {
				nd.State, nd.Error = journal.NodeFailed, a.Failure
			}
			if o := a.Outcome; o != nil {
				nd.State, nd.Output, nd.Reason, nd.ErrClass = journal.NodeState(o.State), o.Output, o.Reason, diagnostics.Class(o.ErrClass)
				if nd.State == journal.NodeFailed {
					nd.Error = o.Reason
				}
			}
			nd.Attempts = activityAttempts(a, provider)
			nd.Node.Attempts = len(nd.Attempts)
			var diags []Diag
			if a.Outcome != nil {
				diags = a.Outcome.Diagnostics
			}
			for _, dg := range diags {
				code, ok := diagnostics.Lookup(dg.Code)
				if !ok {
					continue
				}
				nd.Records = append(nd.Records, ledger.Record{Record: diagnostics.New(code, dg.Message), Node: id,
					Attempt: len(nd.Attempts), Time: a.Started})
			}
		}
		run.Nodes = append(run.Nodes, nd)
	}
	return run
}

// later is t, or end when t is zero (not yet).
func later(t, end time.Time) time.Time {
	if t.IsZero() {
		return end
	}
	return t
}

// activityAttempts are the attempts the history shows of an activity: the
// lost one (when a hand-over is known: from the scheduling to the lost
// worker's last heartbeat) and the last one.
func activityAttempts(a Activity, provider string) []ledger.Attempt {
	var out []ledger.Attempt
	mode := journal.ModeStart
	if a.Attempt > 1 {
		mode = journal.ModeReattach
		lost := journal.Attempt{NodeID: a.Node, N: 1, Mode: journal.ModeStart, Provider: provider, Outcome: journal.OutcomeError,
			ErrClass: "lost_worker", Error: a.LastFailure, Started: a.Scheduled, Ended: a.LastBeat}
		if a.LastHeartbeat != nil {
			lost.Ref = a.LastHeartbeat.Ref
		}
		if lost.Ended.IsZero() {
			lost.Ended = a.Started
		}
		out = append(out, ledger.Attempt{Attempt: lost})
	}
	if a.Started.IsZero() {
		return out
	}
	at := journal.Attempt{NodeID: a.Node, N: len(out) + 1, Mode: mode, Provider: provider, Outcome: journal.OutcomeRunning,
		Started: a.Started, Ended: a.Closed}
	switch {
	case a.State == "completed" && a.Outcome != nil && a.Outcome.State == string(journal.NodeCompleted):
		at.Outcome = journal.OutcomeOK
	case a.State != "running":
		at.Outcome, at.Error = journal.OutcomeError, a.Failure
	}
	var u journal.Usage
	if o := a.Outcome; o != nil {
		at.Ref = o.Cursor.Ref
		if t := o.Tokens; t != nil {
			u = journal.Usage{InputTokens: t.Input, OutputTokens: t.Generated + t.Reasoning, ReasoningTokens: t.Reasoning,
				PreservedTokens: t.Preserved, Estimated: t.Estimated}
		}
	}
	return append(out, ledger.Attempt{Attempt: at, Usage: u, UsageRecorded: a.Outcome != nil})
}

// ReportHandovers are the hand-overs as the report page shows them.
func ReportHandovers(hs []Handover) []ledger.Handover {
	var out []ledger.Handover
	for _, ho := range hs {
		r := ledger.Handover{Node: ho.Node, LostWorker: dash(ho.LostWorker), Worker: dash(ho.Worker), Failure: ho.Failure,
			LastHeartbeat: Clock(ho.LastHeartbeat), Resumed: Clock(ho.Resumed), Took: "-", Recovery: ho.Recovery,
			Generated: ho.Tokens.Generated, Regenerated: ho.Tokens.Regenerated, Preserved: ho.Tokens.Preserved}
		if ho.HandoverMS != nil {
			r.TookMS, r.Took = *ho.HandoverMS, ledger.Seconds(*ho.HandoverMS)
		}
		out = append(out, r)
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
