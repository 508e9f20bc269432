package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
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
}

// beatThrottle bounds how often healthy data becomes a heartbeat call; the
// SDK batches them further (it sends at most one per 0.8 × timeout).
const beatThrottle = 200 * time.Millisecond

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
	g := sp.g
	needs, err := a.needs(ctx, in)
	if err != nil {
		return NodeOutcome{}, err
	}
	var from *runner.NodeCursor
	var lost *Heartbeat // the lost worker's last heartbeat, for the outcome
	if activity.HasHeartbeatDetails(ctx) {
		var h Heartbeat
		if err := activity.GetHeartbeatDetails(ctx, &h); err == nil {
			from, lost = &h.NodeCursor, &Heartbeat{NodeCursor: h.NodeCursor, Worker: h.Worker, At: h.At}
			lost.Output = "" // the result has the output
		}
	}
	before, err := a.Journal.Attempts(ctx, in.RunID, in.Node)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		return NodeOutcome{}, err
	}
	hb := newBeater(ctx, info.HeartbeatTimeout/3, a.Identity)
	if lost != nil {
		hb.lost, hb.lostAt = lost.Worker, lost.At
	}
	if from != nil {
		// What a later loss must still find until this worker gets further.
		// A fresh node sends its first heartbeat with its response id (the
		// SDK sends a first heartbeat at once and batches later ones).
		hb.last = *from
		hb.record(true)
	}
	stop := hb.keepAlive()
	// A worker that is stopping hands its nodes over at once rather than
	// after its stop timeout: the node is interrupted (a response keeps
	// running at the provider) and another worker re-attaches to it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-activity.GetWorkerStopChannel(ctx):
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := runner.RunNode(ctx, g, in.Node, runner.NodeOptions{
		Options: runner.Options{Journal: a.Journal, Profiles: profile.Set{sp.profile.Name: sp.profile}, Profile: sp.profile.Name,
			Logger: a.logger(), Getenv: a.Getenv, RunID: in.RunID, Inputs: sp.inputs, Quota: runner.QuotaOptions{Pacers: a.Pacers},
			Observer: a.Observer},
		Needs: needs, Failed: in.Failed, From: from, Force: in.Force, Heartbeat: hb.beat,
	})
	stop()
	if err != nil {
		if ctx.Err() != nil {
			hb.record(true) // as for a canceled node below
			return NodeOutcome{}, fmt.Errorf("worker interrupted: %w", err)
		}
		return NodeOutcome{}, temporal.NewNonRetryableApplicationError(err.Error(), "RunError", err)
	}
	out := NodeOutcome{Node: in.Node, State: string(res.State), Output: res.Output, Reason: res.Reason,
		Worker: a.Identity, TemporalAttempt: info.Attempt, Cursor: hb.cursor(), From: lost}
	out.Cursor.Output = "" // the result has the output; the history need not hold it twice
	out.Diagnostics, out.Verdict, out.Tokens = a.account(context.WithoutCancel(ctx), g, in.RunID, in.Node, len(before))
	switch res.State {
	case journal.NodeCompleted, journal.NodeAttention:
		return out, nil
	case journal.NodeCanceled:
		// This worker is stopping: the node is not failed, another worker
		// takes it over from the last heartbeat: this one, with all the
		// node had (the last one sent may be beatThrottle old; the SDK
		// sends the one it holds back with the failure).
		hb.record(true)
		return out, fmt.Errorf("node %s interrupted on worker %s", in.Node, a.Identity)
	}
	if res.Err != nil {
		out.ErrClass = string(diagnostics.Classify(res.Err).Class)
	}
	return out, temporal.NewNonRetryableApplicationError(res.Reason, errNodeFailed, res.Err, out)
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
// after the ones the worker had before it, and node-level ones), and the
// node's verdict and token figures as this worker saw it.
func (a *Activities) account(ctx context.Context, g *runner.Graph, runID, node string, before int) ([]Diag, string, *ledger.Tokens) {
	nd, err := ledger.LoadNodeOf(ctx, a.Journal, g, runID, node)
	if err != nil {
		return nil, "", nil
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

// beater turns the executor's cursor reports into activity heartbeats:
// healthy data at most every beatThrottle, recovery steps at once, and the
// last cursor again every third of the heartbeat timeout while the node
// waits (a backoff, a silent stream), so a live worker is never taken for
// lost. The executor's report only stores the cursor: the heartbeat is
// sent from the beater's own goroutine, since the SDK's RecordHeartbeat
// may make its call to Temporal in the caller, or wait on a lock held
// through one, and the stream of the node must not stop for that (on a
// busy server it stopped long enough for the stream's idle timeout).
type beater struct {
	ctx    context.Context
	every  time.Duration
	worker string // this worker's identity: the heartbeat names it
	// lost and lostAt: the worker this node was taken over from and its
	// last heartbeat, repeated in every heartbeat (a hand-over under way).
	lost   string
	lostAt time.Time
	wake   chan struct{} // a recovery step to send now

	mu    sync.Mutex
	last  runner.NodeCursor
	dirty bool // last has not been sent
	sent  time.Time
}

func newBeater(ctx context.Context, every time.Duration, worker string) *beater {
	if every <= 0 {
		every = 10 * time.Second
	}
	return &beater{ctx: ctx, every: every, worker: worker, wake: make(chan struct{}, 1)}
}

// beat is the executor's report: it stores the cursor and, for a recovery
// step, wakes the sender. It never waits on Temporal.
func (b *beater) beat(c runner.NodeCursor, step bool) {
	b.mu.Lock()
	b.last, b.dirty = c, true
	b.mu.Unlock()
	if step {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// record sends the last cursor: always when force, else when it has not
// been sent and beatThrottle has passed, or every has passed.
func (b *beater) record(force bool) {
	b.mu.Lock()
	since := time.Since(b.sent)
	if !force && !(b.dirty && since >= beatThrottle) && since < b.every {
		b.mu.Unlock()
		return
	}
	b.sent, b.dirty = time.Now(), false
	c := b.last
	b.mu.Unlock()
	activity.RecordHeartbeat(b.ctx, Heartbeat{NodeCursor: c, Worker: b.worker, At: time.Now().UTC(), LostWorker: b.lost, LostAt: b.lostAt})
}

func (b *beater) cursor() runner.NodeCursor {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// keepAlive sends the node's heartbeats, from a goroutine of its own,
// until stop is called.
func (b *beater) keepAlive() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
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
	}()
	return func() { close(done); wg.Wait() }
}
