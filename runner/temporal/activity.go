package temporal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
	"github.com/noderun/noderun/runner/quota"
)

// Activities executes nodes on a worker. Its journal is the worker's own:
// the attempts, chunks and diagnostics of the nodes this worker ran.
type Activities struct {
	Journal *journal.Journal
	Logger  *slog.Logger        // diagnostics (default: discard)
	Getenv  func(string) string // API keys and base URLs (default os.Getenv)
	// Identity names this worker in results (the client's identity).
	Identity string
	// Pacers pace every node this worker runs to its providers' rate
	// limits together (runner.QuotaOptions); nil paces each node alone.
	// Workers do not share what they learn: each learns from its own
	// answers, and a 429 one of them meets holds only its own nodes.
	Pacers *quota.Registry
	// Observer, when set, watches the nodes this worker runs (traces,
	// metrics: runner.Observer).
	Observer runner.Observer

	specs   specCache   // the runs' graphs and profiles
	outputs outputCache // outputs read from executions' histories
	slots   *nodeSlots  // the worker's node slots (NewWorker); nil: not counted
}

// beatThrottle bounds how often healthy data becomes a heartbeat call; the
// SDK batches them further (it sends at most one per HeartbeatThrottle).
const beatThrottle = 200 * time.Millisecond

// packBeatBytes bounds the answers so far (chat nodes' cursors) a pack's
// heartbeat carries besides its ended nodes' outputs (at most PackBytes):
// Temporal caps a payload at 2 MB. A node past it heartbeats its cursor
// without its answer: a worker that takes it over retries it from the
// start, within its budget, as it does a node past runner.MaxCursorOutput.
const packBeatBytes = 768 << 10

// errInterrupted marks a node this worker stopped running (it is stopping,
// or Temporal canceled the activity): another worker takes it over.
var errInterrupted = errors.New("worker interrupted")

// nodeFailed is a node that failed by noderun's profile: its outcome.
type nodeFailed struct {
	out NodeOutcome
	err error // the node's error (res.Err), may be nil
}

func (f *nodeFailed) Error() string { return f.out.Reason }
func (f *nodeFailed) Unwrap() error { return f.err }

// Node runs one node with runner.RunNode. On a retried activity (its worker
// was lost) it starts from the last heartbeat's cursor. Completed nodes and
// nodes held for an operator are results; a node that failed by noderun's
// profile is a non-retryable error carrying its NodeOutcome; an interruption
// of this worker is a retryable error, so another worker picks the node up.
func (a *Activities) Node(ctx context.Context, in NodeInput) (NodeOutcome, error) {
	info := activity.GetInfo(ctx)
	sp, err := a.spec(ctx, in)
	if err != nil {
		return NodeOutcome{}, err
	}
	hb := newBeater(ctx, info.HeartbeatTimeout/3, a.Identity, false)
	var from *Heartbeat
	if activity.HasHeartbeatDetails(ctx) {
		var h Heartbeat
		if err := activity.GetHeartbeatDetails(ctx, &h); err == nil {
			from = &h
		}
	}
	nb := hb.add(in.Node, from)
	if from != nil {
		// What a later loss must still find until this worker gets further.
		// A fresh node sends its first heartbeat with its response id (the
		// SDK sends a first heartbeat at once and batches later ones).
		hb.record(true)
	}
	stop := hb.keepAlive()
	ctx, cancel := a.untilStopping(ctx, hb)
	defer cancel()
	nb.cancel = cancel
	out, err := a.run(ctx, sp, in, nb, info.Attempt)
	stop()
	var failed *nodeFailed
	switch {
	case errors.As(err, &failed):
		return failed.out, temporal.NewNonRetryableApplicationError(failed.out.Reason, errNodeFailed, failed.err, failed.out)
	case errors.Is(err, errInterrupted):
		// Another worker takes the node over from the last heartbeat: this
		// one, with all the node had (the last one sent may be beatThrottle
		// old; the SDK sends the one it holds back with the failure).
		hb.record(true)
		return out, fmt.Errorf("node %s interrupted on worker %s: %w", in.Node, a.Identity, err)
	}
	return out, err
}

// Nodes runs a pack of nodes (PackInput) side by side, each as Node runs
// one, and returns their outcomes when all have ended. A node failed by
// noderun's profile is an outcome among the others. The pack's heartbeat
// holds each node's cursor and the outcome of each that ended, so that a
// worker taking the pack over (this one lost or stopping) runs only the
// others, each from its cursor. An outcome whose output goes past the
// result's bound (PackInput.Bytes), or of a node a dependent waits for
// (PackInput.Early), is sent to the workflow as SignalSettled as soon as its
// node ends, and left out of the result.
func (a *Activities) Nodes(ctx context.Context, in PackInput) (PackOutcome, error) {
	info := activity.GetInfo(ctx)
	sp, err := a.spec(ctx, NodeInput{RunID: in.RunID})
	if err != nil {
		return PackOutcome{}, err
	}
	if in.Bytes <= 0 {
		in.Bytes = PackBytes
	}
	var prev PackBeat
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &prev) // undecodable: the nodes start afresh
	}
	was := map[string]PackNode{}
	for _, n := range prev.Nodes {
		was[n.Node] = n
	}
	hb := newBeater(ctx, info.HeartbeatTimeout/3, a.Identity, true)
	beats := make([]*nodeBeat, len(in.Nodes))
	for i, n := range in.Nodes {
		p, ok := was[n.Node]
		switch {
		case !ok:
			beats[i] = hb.add(n.Node, nil)
		case p.Done != nil:
			beats[i] = hb.add(n.Node, nil)
			beats[i].done, beats[i].signalled = p.Done, p.Signalled // it ended on the lost worker
		default:
			beats[i] = hb.add(n.Node, &p.Heartbeat)
		}
	}
	if len(prev.Nodes) > 0 {
		hb.record(true)
	}
	stop := hb.keepAlive()
	ctx, cancel := a.untilStopping(ctx, hb)
	defer cancel()
	// The pack's permit counts one node: its others hold a slot each while
	// they run.
	a.slots.add(len(in.Nodes) - 1)
	defer a.slots.add(1)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		inline int   // output bytes in the result so far
		failed error // a node that could not run here: the pack goes to another worker
	)
	for _, nb := range beats {
		if nb.done != nil && !nb.signalled {
			inline += len(nb.done.Output)
		}
	}
	for i, nb := range beats {
		if nb.done != nil {
			a.slots.add(-1)
			continue
		}
		node := in.Nodes[i]
		node.RunID = in.RunID
		wg.Go(func() {
			defer a.slots.add(-1)
			ctx, cancel := context.WithCancel(ctx) // the node's own: a stopping worker cuts each at its own chunk
			defer cancel()
			nb.cancel = cancel
			out, err := a.run(ctx, sp, node, nb, info.Attempt)
			var nf *nodeFailed
			var ae *temporal.ApplicationError
			switch {
			case errors.As(err, &nf):
				out = nf.out
			case errors.As(err, &ae) && ae.NonRetryable():
				out = NodeOutcome{Node: node.Node, State: string(journal.NodeFailed), Reason: err.Error(), Worker: a.Identity, TemporalAttempt: info.Attempt}
			case err != nil:
				mu.Lock()
				failed = cmp.Or(failed, err)
				mu.Unlock()
				return
			}
			mu.Lock()
			fits := !slices.Contains(in.Early, node.Node) && inline+len(out.Output) <= in.Bytes
			if fits {
				inline += len(out.Output)
			}
			mu.Unlock()
			if !fits {
				// The history keeps the signal; the pack's result leaves it
				// out. The workflow settles the node now, and starts what
				// waited for it.
				if err := activity.GetClient(ctx).SignalWorkflow(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, SignalSettled, out); err != nil {
					mu.Lock()
					failed = cmp.Or(failed, fmt.Errorf("node %s's outcome to the workflow: %w", node.Node, err))
					mu.Unlock()
					return
				}
			}
			nb.finish(&out, !fits)
		})
	}
	wg.Wait()
	stop()
	if failed != nil {
		hb.record(true) // the nodes that ended, for the worker that goes on
		return PackOutcome{}, fmt.Errorf("pack %s on worker %s: %w", info.ActivityID, a.Identity, failed)
	}
	res := PackOutcome{Nodes: make([]NodeOutcome, 0, len(beats))}
	for _, nb := range beats {
		if !nb.signalled {
			res.Nodes = append(res.Nodes, *nb.done)
		}
	}
	return res, nil
}

// stopGrace is how long a stopping worker waits for a streaming node's
// next chunk before it cuts the node anyway (a silent stream, a backoff).
const stopGrace = 300 * time.Millisecond

// untilStopping is ctx, canceled as well when this worker stops: a worker
// that is stopping hands its nodes over at once rather than after its stop
// timeout (a response keeps running at the provider, and another worker
// re-attaches to it). A streaming node is cut right after the next chunk
// it takes in (hb.stopping: see nodeBeat.beat), not at a random point of
// its stream: the provider sees the connection close well before its next
// chunk, so it has generated nothing the node did not receive, and the
// heartbeat the next worker starts from holds all of it. What has not cut
// itself by stopGrace is cut then.
func (a *Activities) untilStopping(ctx context.Context, hb *beater) (context.Context, context.CancelFunc) {
	stopping := activity.GetWorkerStopChannel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stopping:
		case <-ctx.Done():
			return
		}
		hb.stopping.Store(true)
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// run runs one node from where nb says it stood. Its error is a *nodeFailed
// for a node failed by noderun's profile (out is in it), errInterrupted
// (wrapped) when this worker stopped running it, a non-retryable
// application error for a run that cannot go on here (a bad configuration),
// and any other error for a node whose needs could not be read.
func (a *Activities) run(ctx context.Context, sp *spec, in NodeInput, nb *nodeBeat, attempt int32) (NodeOutcome, error) {
	needs, err := a.needs(ctx, in)
	if err != nil {
		return NodeOutcome{}, err
	}
	began := time.Now() // attempts since are this activity's (account)
	res, err := runner.RunNode(ctx, sp.g, in.Node, runner.NodeOptions{
		Options: runner.Options{Journal: a.Journal, Profiles: profile.Set{sp.profile.Name: sp.profile}, Profile: sp.profile.Name,
			Logger: a.logger(), Getenv: a.Getenv, RunID: in.RunID, Inputs: sp.inputs, Quota: runner.QuotaOptions{Pacers: a.Pacers},
			Observer: a.Observer},
		Needs: needs, Failed: in.Failed, From: nb.from(), Force: in.Force, Heartbeat: nb.beat,
	})
	if err != nil {
		if ctx.Err() != nil {
			nb.b.record(true) // as for a canceled node below
			return NodeOutcome{}, fmt.Errorf("%w: %w", errInterrupted, err)
		}
		return NodeOutcome{}, temporal.NewNonRetryableApplicationError(err.Error(), "RunError", err)
	}
	out := NodeOutcome{Node: in.Node, State: string(res.State), Output: res.Output, Reason: res.Reason,
		Worker: a.Identity, TemporalAttempt: attempt, Cursor: nb.cursor(), From: nb.lost()}
	out.Cursor.Output = "" // the result has the output; the history need not hold it twice
	var verdict ledger.Verdict
	out.Diagnostics, verdict, out.Tokens = a.account(context.WithoutCancel(ctx), sp.g, in.RunID, in.Node, began)
	out.Verdict, out.VerdictKind = verdict.Text, verdict.Kind
	switch res.State {
	case journal.NodeCompleted, journal.NodeAttention:
		return out, nil
	case journal.NodeCanceled:
		return out, errInterrupted
	}
	if res.Err != nil {
		out.ErrClass = string(diagnostics.Classify(res.Err).Class)
	}
	return out, &nodeFailed{out: out, err: res.Err}
}

// spec is the graph and profile of in's run: read from the workflow
// execution's input and parsed once per run on this worker (specs), or,
// from an activity an older client's workflow scheduled, from in itself.
func (a *Activities) spec(ctx context.Context, in NodeInput) (*spec, error) {
	bad := func(err error) error { return temporal.NewNonRetryableApplicationError(err.Error(), "BadGraph", nil) }
	if in.GraphText != "" && in.Profile != nil {
		sp, err := parseSpec(RunInput{GraphPath: in.GraphPath, GraphText: in.GraphText, Profile: *in.Profile, Inputs: in.Inputs})
		if err != nil {
			return nil, bad(err)
		}
		return sp, nil
	}
	info := activity.GetInfo(ctx)
	var parseErr error
	sp, err := a.specs.get(ctx, in.RunID, func(ctx context.Context) (*spec, error) {
		ri, err := startInput(ctx, activity.GetClient(ctx), info.WorkflowNamespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
		if err != nil {
			return nil, err
		}
		sp, err := parseSpec(ri)
		parseErr = err
		return sp, err
	})
	if parseErr != nil {
		return nil, bad(parseErr)
	}
	return sp, err
}

// needs are the outputs of in's needs: those it carries, and those it
// refers to, read from the history of the workflow execution that ran them.
func (a *Activities) needs(ctx context.Context, in NodeInput) (map[string]string, error) {
	if len(in.NeedRuns) == 0 {
		return in.Needs, nil
	}
	out := maps.Clone(in.Needs)
	if out == nil {
		out = map[string]string{}
	}
	byRun := map[string][]string{}
	for need, run := range in.NeedRuns {
		byRun[run] = append(byRun[run], need)
	}
	for run, ids := range byRun {
		got, err := a.outputs.get(ctx, activity.GetClient(ctx), activity.GetInfo(ctx).WorkflowExecution.ID, run, ids)
		if err != nil {
			return nil, fmt.Errorf("node %s's needs: %w", in.Node, err)
		}
		maps.Copy(out, got)
	}
	return out, nil
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

// account reads the node from this worker's journal (package ledger, as
// every report does): the diagnostics this activity journaled (attempts
// it started, since began, and node-level ones), and the node's verdict
// and token figures as this worker saw it.
func (a *Activities) account(ctx context.Context, g *runner.Graph, runID, node string, began time.Time) ([]Diag, ledger.Verdict, *ledger.Tokens) {
	nd, err := ledger.LoadNodeOf(ctx, a.Journal, g, runID, node)
	if err != nil {
		return nil, ledger.Verdict{}, nil
	}
	before := 0 // attempts this worker had made before this activity
	for _, at := range nd.Attempts {
		if at.Started.Before(began) {
			before = max(before, at.N)
		}
	}
	var out []Diag
	for _, r := range nd.Records {
		if r.Attempt != 0 && r.Attempt <= before {
			continue
		}
		out = append(out, Diag{Code: r.Code.ID, Name: r.Code.Name, Attempt: r.Attempt, Message: r.Message})
	}
	na := ledger.AccountNode(nd, nil)
	return out, na.Verdict, &na.Tokens
}

// beater turns the executor's cursor reports into activity heartbeats —
// one node's Heartbeat, or a pack's PackBeat: healthy data at most every
// beatThrottle, recovery steps and ended nodes at once, and the last
// cursors again every third of the heartbeat timeout while nothing moves
// (a backoff, a silent stream), so a live worker is never taken for lost.
// The executor's report only stores the cursor: the heartbeat is sent from
// the beater's own goroutine, since the SDK's RecordHeartbeat may make its
// call to Temporal in the caller, or wait on a lock held through one, and
// a node's stream must not stop for that (on a busy server it stopped long
// enough for the stream's idle timeout).
type beater struct {
	ctx    context.Context
	every  time.Duration
	worker string // this worker's identity: the heartbeat names it
	pack   bool   // heartbeat a PackBeat
	wake   chan struct{}
	// stopping: the worker stops; each node cuts itself at its next chunk.
	stopping atomic.Bool

	mu    sync.Mutex
	nodes []*nodeBeat
	dirty bool // a cursor has not been sent
	sent  time.Time
}

// nodeBeat is one node's part of a heartbeat.
type nodeBeat struct {
	b    *beater
	node string
	// cancel ends the node's run (its context): set before it runs.
	cancel context.CancelFunc
	// Under b.mu:
	last runner.NodeCursor
	// hand is the lost worker's last heartbeat this node started from
	// (nil for a fresh start), repeated in every heartbeat as LostWorker
	// and LostAt: a hand-over under way.
	hand      *Heartbeat
	done      *NodeOutcome // the node ended (in a pack)
	signalled bool         // done went to the workflow by SignalSettled
}

func newBeater(ctx context.Context, every time.Duration, worker string, pack bool) *beater {
	if every <= 0 {
		every = 10 * time.Second
	}
	return &beater{ctx: ctx, every: every, worker: worker, pack: pack, wake: make(chan struct{}, 1)}
}

// add is node's part, starting from a lost worker's heartbeat (nil: a fresh
// start).
func (b *beater) add(node string, from *Heartbeat) *nodeBeat {
	nb := &nodeBeat{b: b, node: node}
	if from != nil {
		nb.last, nb.hand = from.NodeCursor, from
	}
	b.mu.Lock()
	b.nodes = append(b.nodes, nb)
	b.mu.Unlock()
	return nb
}

// beat is the executor's report: it stores the cursor and, for a recovery
// step, wakes the sender. It never waits on Temporal. When the worker is
// stopping, healthy data (a chunk taken in) cuts the node there.
func (n *nodeBeat) beat(c runner.NodeCursor, step bool) {
	n.b.mu.Lock()
	n.last, n.b.dirty = c, true
	n.b.mu.Unlock()
	if step {
		n.b.poke()
	} else if n.b.stopping.Load() && n.cancel != nil {
		n.cancel()
	}
}

// finish records a pack's node as ended (its output left out when the
// outcome went by SignalSettled) and sends it at once.
func (n *nodeBeat) finish(out *NodeOutcome, signalled bool) {
	o := *out
	if signalled {
		o.Output = ""
	}
	n.b.mu.Lock()
	n.done, n.signalled, n.b.dirty = &o, signalled, true
	n.b.mu.Unlock()
	n.b.poke()
}

func (b *beater) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// from is where the node starts: the lost worker's cursor, nil for a fresh start.
func (n *nodeBeat) from() *runner.NodeCursor {
	if n.hand == nil {
		return nil
	}
	c := n.hand.NodeCursor
	return &c
}

// lost is the lost worker's heartbeat the node started from, without its
// output (the outcome has it), for NodeOutcome.From.
func (n *nodeBeat) lost() *Heartbeat {
	if n.hand == nil {
		return nil
	}
	return &Heartbeat{NodeCursor: n.hand.NodeCursor, Worker: n.hand.Worker, At: n.hand.At}
}

func (n *nodeBeat) cursor() runner.NodeCursor {
	n.b.mu.Lock()
	defer n.b.mu.Unlock()
	return n.last
}

// heartbeat is the node's Heartbeat now (under b.mu).
func (n *nodeBeat) heartbeat(now time.Time) Heartbeat {
	h := Heartbeat{NodeCursor: n.last, Worker: n.b.worker, At: now}
	if n.hand != nil {
		h.LostWorker, h.LostAt = n.hand.Worker, n.hand.At
	}
	return h
}

// details are the heartbeat's details now (under b.mu).
func (b *beater) details(now time.Time) any {
	if !b.pack {
		return b.nodes[0].heartbeat(now)
	}
	pb := PackBeat{Nodes: make([]PackNode, len(b.nodes))}
	partial := 0
	for i, n := range b.nodes {
		p := PackNode{Node: n.node, Done: n.done, Signalled: n.signalled}
		if n.done == nil {
			p.Heartbeat = n.heartbeat(now)
			if partial += len(p.Output); partial > packBeatBytes {
				p.Output = "" // see packBeatBytes
			}
		}
		pb.Nodes[i] = p
	}
	return pb
}

// record sends the heartbeat: always when force, else when a cursor has
// not been sent and beatThrottle has passed, or every has passed.
func (b *beater) record(force bool) {
	b.mu.Lock()
	since := time.Since(b.sent)
	if !force && !(b.dirty && since >= beatThrottle) && since < b.every {
		b.mu.Unlock()
		return
	}
	now := time.Now()
	b.sent, b.dirty = now, false
	d := b.details(now.UTC())
	b.mu.Unlock()
	activity.RecordHeartbeat(b.ctx, d)
}

// keepAlive sends the heartbeats, from a goroutine of its own, until stop
// is called.
func (b *beater) keepAlive() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(beatThrottle)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-b.ctx.Done():
				return
			case <-b.wake:
				b.record(true)
			case <-t.C:
				b.record(false)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
