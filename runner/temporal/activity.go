package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	g, err := runner.ParseGraph(in.GraphPath, []byte(in.GraphText))
	if err != nil {
		return NodeOutcome{}, temporal.NewNonRetryableApplicationError(err.Error(), "BadGraph", nil)
	}
	var from *runner.NodeCursor
	if activity.HasHeartbeatDetails(ctx) {
		var c runner.NodeCursor
		if err := activity.GetHeartbeatDetails(ctx, &c); err == nil {
			from = &c
		}
	}
	before, err := a.Journal.Attempts(ctx, in.RunID, in.Node)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		return NodeOutcome{}, err
	}
	hb := &beater{ctx: ctx, every: info.HeartbeatTimeout / 3}
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
		Options: runner.Options{Journal: a.Journal, Profiles: profile.Set{in.Profile.Name: in.Profile}, Profile: in.Profile.Name,
			Logger: a.logger(), Getenv: a.Getenv, RunID: in.RunID, Inputs: in.Inputs, Quota: runner.QuotaOptions{Pacers: a.Pacers},
			Observer: a.Observer},
		Needs: in.Needs, Failed: in.Failed, From: from, Force: in.Force, Heartbeat: hb.beat,
	})
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return NodeOutcome{}, fmt.Errorf("worker interrupted: %w", err)
		}
		return NodeOutcome{}, temporal.NewNonRetryableApplicationError(err.Error(), "RunError", err)
	}
	out := NodeOutcome{Node: in.Node, State: string(res.State), Output: res.Output, Reason: res.Reason,
		Worker: a.Identity, TemporalAttempt: info.Attempt, Cursor: hb.cursor()}
	out.Cursor.Output = "" // the result has the output; the history need not hold it twice
	out.Diagnostics, out.Verdict = a.account(context.WithoutCancel(ctx), in.RunID, in.Node, len(before))
	switch res.State {
	case journal.NodeCompleted, journal.NodeAttention:
		return out, nil
	case journal.NodeCanceled:
		// This worker is stopping: the node is not failed, another worker
		// takes it over from the last heartbeat.
		return out, fmt.Errorf("node %s interrupted on worker %s", in.Node, a.Identity)
	}
	if res.Err != nil {
		out.ErrClass = string(diagnostics.Classify(res.Err).Class)
	}
	return out, temporal.NewNonRetryableApplicationError(res.Reason, errNodeFailed, res.Err, out)
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
// node's verdict as this worker saw it.
func (a *Activities) account(ctx context.Context, runID, node string, before int) ([]Diag, string) {
	nd, err := ledger.LoadNode(ctx, a.Journal, runID, node)
	if err != nil {
		return nil, ""
	}
	var out []Diag
	for _, r := range nd.Records {
		if r.Attempt != 0 && r.Attempt <= before {
			continue
		}
		out = append(out, Diag{Code: r.Code.ID, Name: r.Code.Name, Attempt: r.Attempt, Message: r.Message})
	}
	return out, ledger.AccountNode(nd, nil).Verdict
}

// beater turns the executor's cursor reports into activity heartbeats:
// healthy data at most every beatThrottle, recovery steps always, and the
// last cursor again every third of the heartbeat timeout while the node
// waits (a backoff, a silent stream), so a live worker is never taken for lost.
type beater struct {
	ctx   context.Context
	every time.Duration

	mu   sync.Mutex
	last runner.NodeCursor
	sent time.Time
}

func (b *beater) beat(c runner.NodeCursor, step bool) {
	b.mu.Lock()
	b.last = c
	b.mu.Unlock()
	b.record(step)
}

func (b *beater) record(force bool) {
	b.mu.Lock()
	if !force && time.Since(b.sent) < beatThrottle {
		b.mu.Unlock()
		return
	}
	b.sent = time.Now()
	c := b.last
	b.mu.Unlock()
	activity.RecordHeartbeat(b.ctx, c)
}

func (b *beater) cursor() runner.NodeCursor {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// keepAlive heartbeats the last cursor until stop is called.
func (b *beater) keepAlive() (stop func()) {
	every := b.every
	if every <= 0 {
		every = 10 * time.Second
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-b.ctx.Done():
				return
			case <-t.C:
				b.record(true)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
