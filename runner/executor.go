package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/resume"
	"github.com/noderun/noderun/runner/quota"
)

// nodeExec runs one node to completion: stream, journal, recover. It owns the
// recovery loop; resume.Decide owns the decision.
type nodeExec struct {
	run    *runState
	node   *Node
	prov   provider.Provider
	provNm string
	// inProcess: the provider lives in this process; its work ends with it.
	inProcess bool
	req       provider.Request
	prof      profile.Profile
	side      resume.SideEffects
	total     int // retry budget for this node
	retries   int // what is left of it
	rnd       *rand.Rand
	// attemptBase turns this machine's attempt numbers into the node's
	// (a node moved from a lost machine continues its count).
	attemptBase int

	attempt    int             // current attempt number, 1-based; a retry starts a new one
	cur        provider.Cursor // where the current attempt's work stands
	out        answer          // output of the current attempt
	deltas     int             // delta events of the current attempt, about a token each
	events     int             // events of the current attempt's streams (bounded by maxEvents)
	thought    int64           // reasoning bytes of the current attempt (bounded with the output)
	maxOut     int64           // bound of the answer: output and reasoning (bound)
	maxEvents  int             // bound of the attempt's events (the profile's max_events)
	cost       recoveryCost    // what recovery re-sent and regenerated (continue.go)
	done       bool            // terminal evidence seen
	progressed bool            // healthy progress since the last recovery step
	ground     resume.Ground   // how far this attempt got, against the node's earlier ones
	ended      bool            // the work named by cur.Ref is known to have ended at the provider
	learnt     bool            // an intermediary's idle cut was learnt and journaled
	recovering time.Time       // start of the current stretch of recovery (zero when healthy)
	backoffN   int             // backoff step; reset by healthy data
	resumes    int             // consecutive re-attaches without progress
	recoveries int             // recovery decisions taken: a recovered node reports NR108
	steps      int             // recovery step records journaled (NR108 says how many)
	checked    bool            // status checked since the last stream attempt
	dispatched bool            // some attempt may have reached the provider
	wasSent    bool            // dispatched, before the current stream attempt
	last       *diagnostics.Error
	touched    atomic.Int64 // unix nanos of the last event (or step start): the idle watchdog, the silence before a cut
	deadline   *time.Timer  // cuts a recovery step that outlasts the deadline
	chunks     coalescer    // deltas on their way to the journal
	usage      attemptUsage // what the current attempt has cost

	// Pacing (pace.go): the node's place in the graph, its provider's
	// pacer (nil: not paced), the request admitted and not yet ended, and
	// whether a 429 parked it (it goes first when the quota allows).
	order  int
	pacer  *quota.Pacer
	ticket *quota.Ticket
	parked bool
	// Failover (failover.go): the providers left to move to, in order,
	// and the longest answer an attempt delivered, which one continues.
	fallbacks []string
	best      struct {
		out             string
		chunks, attempt int
	}

	// For Options.OnProgress only (untouched without it): when the attempt
	// last had data and a poll that found its work alive, when its figures
	// were last reported as data, and whether they moved since.
	dataAt, pollAt, reportAt time.Time
	unreported               bool
}

// errRecoveryDeadline cuts a recovery step that made no progress in time.
var errRecoveryDeadline = errors.New("recovery deadline reached during the step")

// errRunnerStopped is the cause of recovery for a node picked up by a resumed run.
var errRunnerStopped = errors.New("the runner stopped while the node was in flight")

// entry is where a node picks up when a run is resumed: the attempt it
// continues, what its journal holds, and the first step to take.
type entry struct {
	attempt     int
	cur         provider.Cursor
	out         string
	streamed    int // the chunks of out, as the journal counted them (0: not known)
	action      resume.Action
	retriesUsed int
	fresh       bool // nothing to pick up: start the node (RunNode)
	attemptBase int  // see nodeExec.attemptBase
	// provider is the fallback the node had moved to (NR603), where it
	// picks up; empty for its own provider.
	provider string
}

// execute returns the node's output, or an error whose message explains what
// was tried. The partial output of a failed attempt stays in the journal.
func (x *nodeExec) execute(ctx context.Context, e *entry) (string, error) {
	action := resume.ActRetry // the first attempt is a fresh request
	var err error
	if e != nil {
		x.attemptBase = e.attemptBase
	}
	switch {
	case e == nil || e.fresh:
		err = x.beginAttempt(ctx, journal.ModeStart)
	case e.action == resume.ActRetry: // this retry comes out of the budget too
		x.attempt, x.dispatched = e.attempt, true
		x.retries -= min(e.retriesUsed+1, x.retries)
		err = x.beginAttempt(ctx, journal.ModeRetry)
	default: // re-attach to, or check on, the attempt that was in flight
		x.attempt, x.cur, x.dispatched, action = e.attempt, e.cur, true, e.action
		x.retries -= min(e.retriesUsed, x.retries)
		x.out.WriteString(e.out)
		streamed := e.streamed
		if streamed == 0 && e.out != "" { // a lost machine's cursor carries the text, not its count
			streamed = provider.EstimateTokens(e.out)
		}
		x.usage = attemptUsage{streamed: streamed, chain: true}
		x.recoveries++
		x.last = &diagnostics.Error{Class: diagnostics.ClassDisconnect, Err: errRunnerStopped}
		x.recovering = time.Now()
	}
	if err != nil {
		return "", x.stop(ctx, err)
	}
	for {
		err := x.take(ctx, action)
		if err == nil && x.done {
			return x.succeed(ctx), nil
		}
		ce := x.classify(ctx, err)
		x.noteFailure(ctx, action, ce)
		d, delay := x.decide(ce)
		switch d.Action {
		case resume.ActFail:
			return "", x.fail(ctx, d, ce)
		case resume.ActPark: // the same step again, when the quota allows (pace.go)
			x.park(ctx, ce, delay)
			if action != resume.ActRetry && action != resume.ActContinue {
				// A re-attach or a check asks the pacer nothing: it waits here.
				if err := sleep(ctx, delay); err != nil {
					return "", x.stop(ctx, err)
				}
			}
			continue
		case resume.ActFailover:
			x.recoveries++
			if action, err = x.failover(ctx, d, ce); err != nil {
				return "", x.stop(ctx, err)
			}
			continue
		}
		x.recoveries++
		if d.Action == resume.ActRetry {
			x.abandon(ctx) // stop the provider billing for work that will be redone
		}
		x.announce(ctx, d, ce, delay)
		if err := sleep(ctx, delay); err != nil {
			return "", x.stop(ctx, err)
		}
		if d.Action == resume.ActRetry {
			x.endAttempt(ctx, ce)
			x.retries--
			if err := x.beginAttempt(ctx, journal.ModeRetry); err != nil {
				return "", x.stop(ctx, err)
			}
		}
		action = d.Action
	}
}

// stop fails the node for an error outside the recovery loop's steps: an
// interruption while waiting, a journal that cannot begin an attempt.
func (x *nodeExec) stop(ctx context.Context, err error) error {
	ce := x.classify(ctx, err)
	return x.fail(ctx, resume.Decide(resume.Input{Class: ce.Class}), ce)
}

// succeed closes the attempt that reached terminal evidence.
func (x *nodeExec) succeed(ctx context.Context) string {
	x.endAttempt(ctx, nil)
	if x.recoveries > 0 {
		x.diag(ctx, diagnostics.New(diagnostics.Recovered, "node completed after recovery",
			append([]slog.Attr{diagnostics.KeyRecoverySteps.Attr(x.steps), diagnostics.KeyAttempts.Attr(x.attempt)}, x.cost.total()...)...))
	}
	return x.out.String()
}

// classify turns what a step returned into a classified failure.
func (x *nodeExec) classify(ctx context.Context, err error) *diagnostics.Error {
	if err == nil { // an adapter that returned without terminal evidence
		err = fmt.Errorf("%w: the adapter returned without a terminal event", diagnostics.ErrDisconnected)
	}
	ce := diagnostics.Classify(err)
	if ce.Class == diagnostics.ClassCanceled && ctx.Err() == nil {
		ce = &diagnostics.Error{Class: diagnostics.ClassDisconnect, Err: err} // our own idle watchdog
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ErrNodeTimeout) && ce.Class != diagnostics.ClassCanceled && ce.Class != diagnostics.ClassJournal {
		// The caller gave up (a cancel with a cause, its deadline):
		// whatever the adapter made of it, the node is interrupted and
		// resumable, not failed; the record keeps the cause.
		ce = &diagnostics.Error{Class: diagnostics.ClassCanceled, Err: fmt.Errorf("interrupted: %w", cause)}
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrNodeTimeout) { // the node's own timeout, not an interruption
		during := "while streaming"
		if !x.recovering.IsZero() {
			during = fmt.Sprintf("during recovery (last: %s)", x.last.Class)
		}
		ce = &diagnostics.Error{Class: diagnostics.ClassTimeout, Err: fmt.Errorf("%w %s after %d bytes of output", cause, during, x.out.Len())}
	}
	return ce
}

// decide asks resume.Decide for the next step and how long to wait before
// it; a wait that would end past the recovery deadline fails now instead.
func (x *nodeExec) decide(ce *diagnostics.Error) (resume.Decision, time.Duration) {
	in := x.input(ce)
	d := resume.Decide(in)
	if d.Action == resume.ActFail || d.Action == resume.ActFailover {
		return d, 0
	}
	delay := x.delay(d.Action, ce)
	if x.recoveryLeft() < delay {
		in.DeadlineExceeded = true
		d = resume.Decide(in) // fails, or moves to a fallback
		if d.Code == diagnostics.DeadlineExceeded || d.Action == resume.ActFailover {
			d.Reason = fmt.Sprintf("the next step would wait %s, past the profile's recovery deadline", profile.FormatDuration(delay.Round(time.Millisecond)))
		}
		return d, 0
	}
	return d, delay
}

// take performs one recovery action: a fresh stream, a re-attach, or a
// check, unless the provider's circuit breaker is open.
func (x *nodeExec) take(ctx context.Context, action resume.Action) error {
	br := x.run.breakers[x.provNm]
	if ok, wait := br.allow(); !ok {
		err := fmt.Errorf("%w (next probe in %s)", ErrBreakerOpen, profile.FormatDuration(wait.Round(time.Millisecond)))
		if cause := br.lastCause(); cause != nil { // the cause stays last: it is what to fix
			err = fmt.Errorf("%w; the last connection failed: %v", err, cause)
		}
		return &diagnostics.Error{Class: diagnostics.ClassConnect, Err: err}
	}
	if !x.recovering.IsZero() {
		// A recovery step that makes no progress must not outlast the
		// deadline: an agent harness can take minutes to give up by itself.
		sctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		x.deadline = time.AfterFunc(x.recoveryLeft(), func() { cancel(errRecoveryDeadline) })
		defer func() { x.deadline.Stop(); x.deadline = nil }()
		ctx = sctx
	}
	streamed := x.usage.streamed
	err := x.act(ctx, action)
	if ferr := x.chunks.flush(); ferr != nil && err == nil {
		err = x.journalErr(ferr)
	}
	generated := x.usage.streamed - streamed
	if u := x.usage.reported; x.done && u != nil && u.OutputTokens > 0 {
		generated = u.OutputTokens
	}
	x.releaseTicket(generated)
	connectFailed := err != nil && diagnostics.Classify(err).Class == diagnostics.ClassConnect
	br.record(connectFailed)
	if connectFailed && !errors.Is(err, ErrBreakerOpen) {
		br.failed(err)
	}
	return err
}

func (x *nodeExec) act(ctx context.Context, action resume.Action) error {
	x.progressed = false
	if action == resume.ActContinue || action == resume.ActRetry { // a request that generates waits for quota
		if err := x.admit(ctx); err != nil {
			return err
		}
	}
	x.touched.Store(time.Now().UnixNano())
	ctx = provider.WithAttempt(x.observed(ctx), x.attempt)
	switch action {
	case resume.ActCheck:
		return x.check(ctx)
	case resume.ActResume:
		x.resumes++
		x.checked = false
		x.usage.reattach()
		return x.withWatchdog(ctx, func(ctx context.Context, emit provider.Emit) error {
			return x.prov.(provider.Resumer).Resume(ctx, x.req, x.cur, emit)
		})
	case resume.ActContinue:
		x.resumes++
		x.usage.continued()
		return x.withWatchdog(ctx, func(ctx context.Context, emit provider.Emit) error {
			return x.prov.(provider.Continuer).Continue(ctx, x.req, x.out.String(), emit)
		})
	default:
		x.checked = false
		x.wasSent, x.dispatched = x.dispatched, true // undone by noteFailure if it provably never left
		return x.withWatchdog(ctx, func(ctx context.Context, emit provider.Emit) error {
			return x.prov.Stream(ctx, x.req, emit)
		})
	}
}

// emit receives the adapter's events: it journals them, tracks the cursor and
// output, and feeds the idle watchdog. A journal that cannot record stops the
// stream at once (class journal_unavailable): no provider work the journal
// cannot record.
func (x *nodeExec) emit(ctx context.Context) provider.Emit {
	record := x.record(ctx)
	return func(ev provider.Event) error { return x.journalErr(record(ev)) }
}

// journalErr classifies an error of the journal's.
func (x *nodeExec) journalErr(err error) error {
	if err == nil {
		return nil // before ce: errors.As moves it to the heap, an allocation a chunk
	}
	var ce *diagnostics.Error
	if errors.As(err, &ce) {
		return err
	}
	return &diagnostics.Error{Class: diagnostics.ClassJournal, Err: fmt.Errorf("%w: %s: %w", diagnostics.ErrJournal, x.run.j.Path(), err)}
}

// bound sets the bounds of the node's answer on its provider: its own
// max_output_bytes, else its provider's, else the profile's; and the
// profile's max_events. Set again at each attempt: a fallback's may differ.
func (x *nodeExec) bound() {
	var prov int64
	if p := x.run.g.Providers[x.provNm]; p != nil {
		prov = p.MaxOutputBytes
	}
	x.maxOut = cmp.Or(x.node.MaxOutputBytes, prov, int64(x.prof.OutputBound()))
	x.maxEvents = x.prof.EventBound()
}

// overLimit ends the attempt at a bound that keeps memory and the journal
// bounded whatever a server sends: the node fails (NR501), what it
// journaled before is kept, and it is not retried.
func (x *nodeExec) overLimit(what string) error {
	return &diagnostics.Error{Class: diagnostics.ClassLimit, Err: fmt.Errorf("%w: %s", diagnostics.ErrLimit, what)}
}

func (x *nodeExec) record(ctx context.Context) provider.Emit {
	return func(ev provider.Event) error {
		// Adapters stamp an event when they read it; reading the clock again
		// here was ~2% of a fast stream's time (time.Now is ~100 ns on this
		// kind of VM, and a chunk ~13 µs of decoding).
		at := ev.Time
		if at.IsZero() {
			at = time.Now()
		}
		x.touched.Store(at.UnixNano())
		if x.events++; x.events > x.maxEvents {
			return x.overLimit(fmt.Sprintf("its stream passed %d events in one attempt (the profile's max_events)", x.maxEvents))
		}
		if ev.Seq >= 0 && ev.Kind != provider.KindRef {
			if x.cur.Ref != "" && ev.Seq <= x.cur.Seq {
				return nil // already seen before a re-attach; never journal an event twice
			}
			x.cur.Seq = ev.Seq
		}
		rec := journal.Event{RunID: x.run.id, NodeID: x.node.ID, Attempt: x.attempt, Kind: string(ev.Kind),
			ProviderSeq: ev.Seq, Time: ev.Time}
		switch ev.Kind {
		case provider.KindDelta, provider.KindReasoning:
		default:
			// Anything else is journaled after the chunks that came before it.
			if err := x.chunks.flush(); err != nil {
				return err
			}
		}
		switch ev.Kind {
		case provider.KindRef:
			if ev.Ref == x.cur.Ref {
				return nil
			}
			x.cur = provider.Cursor{Ref: ev.Ref, Seq: max(ev.Seq, -1)}
			x.ended = false
			// Durable before anything else can go wrong: it is what a resume needs.
			if err := x.run.j.SetAttemptRef(bg(ctx), x.run.id, x.node.ID, x.attempt, ev.Ref); err != nil {
				return err
			}
			rec.Payload = []byte(ev.Ref)
			x.beat("started " + ev.Ref)      // what a machine taking over needs first
			if x.prov.Capabilities().Check { // a harness reports its thread itself (NR301)
				x.diag(ctx, diagnostics.New(diagnostics.ResponseCreated, "response "+ev.Ref+" created; journaled for resume",
					diagnostics.KeyRef.Attr(ev.Ref)))
			}
		case provider.KindDelta:
			if int64(x.out.Len()+len(ev.Text))+x.thought > x.maxOut {
				return x.overLimit(fmt.Sprintf("its answer passed %s (max_output_bytes)", profile.Size(x.maxOut)))
			}
			x.usage.streamed++
			x.out.WriteString(ev.Text)
			x.deltas++
			x.data(at)
			x.advance(int64(len(ev.Text)))
			return x.chunks.add(rec, ev.Text, at)
		case provider.KindReasoning:
			if x.thought += int64(len(ev.Text)); int64(x.out.Len())+x.thought > x.maxOut {
				return x.overLimit(fmt.Sprintf("its answer passed %s with its reasoning (max_output_bytes)", profile.Size(x.maxOut)))
			}
			x.usage.reasoning++
			x.data(at)
			x.advance(int64(len(ev.Text)))
			return x.chunks.add(rec, ev.Text, at)
		case provider.KindProgress:
			x.data(at)
			x.advance(1)
			return nil // the cursor is in memory and on the next journaled event
		case provider.KindAlive:
			x.poll(at)
			x.healthy()
			return nil
		case provider.KindRaw:
			rec.Payload = x.run.red.Bytes(ev.Raw) // a harness's own error lines may quote credentials
		case provider.KindMark:
			if ev.Mark == nil {
				return nil
			}
			rec.ProviderSeq, rec.Payload = journal.NoProviderSeq, jsonBytes(ev.Mark)
		case provider.KindReset:
			x.out.Reset()
		case provider.KindDiagnostic:
			if ev.Diag != nil {
				x.diag(ctx, *ev.Diag)
			}
			return nil
		case provider.KindDone:
			x.done, x.ended = true, true
			x.usage.reported = ev.Usage
			if ev.Usage != nil {
				rec.Payload = jsonBytes(ev.Usage)
				x.unreported = x.run.onProg != nil // the provider's count replaces ours
			}
		default:
			return &diagnostics.Error{Class: diagnostics.ClassDeterministic, Err: fmt.Errorf("adapter emitted unknown event kind %q", ev.Kind)}
		}
		return x.run.j.Append(rec)
	}
}

// advance records n units of the attempt's stream; only new ground (further
// than every earlier attempt of the node got) is healthy progress, so an
// upstream that always cuts at the same point backs off as an outage would.
func (x *nodeExec) advance(n int64) {
	if x.ground.Advance(n) {
		x.healthy()
	}
}

// healthy records progress: new ground, or a status that shows the work
// queued or in progress. The backoff, the reconnect count and the recovery
// deadline start over; the retry budget does not.
func (x *nodeExec) healthy() {
	x.beat("")
	if !x.progressed {
		x.progressed = true
		x.backoffN, x.resumes, x.recovering = 0, 0, time.Time{}
		if x.deadline != nil {
			x.deadline.Stop() // healthy again: no deadline
		}
	}
}

// withWatchdog runs f under an idle watchdog unless the adapter handles
// silence itself: a stream with no healthy data for IdleTimeout is cut and
// treated as a disconnect. Keepalive comments never reach emit, so they never
// count as data.
func (x *nodeExec) withWatchdog(ctx context.Context, f func(context.Context, provider.Emit) error) error {
	idle := x.prof.IdleTimeout.D()
	if x.prov.Capabilities().IdleHandled || idle <= 0 {
		return f(ctx, x.emit(ctx))
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The timer re-arms itself from the last event, so a chunk costs an
	// atomic store, not a timer reset.
	var mu sync.Mutex // orders the assignment of t before its callback's use
	mu.Lock()
	var t *time.Timer
	t = time.AfterFunc(idle, func() {
		mu.Lock()
		defer mu.Unlock()
		if left := idle - time.Since(time.Unix(0, x.touched.Load())); left > 0 {
			t.Reset(left)
			return
		}
		cancel(diagnostics.ErrIdleTimeout)
	})
	mu.Unlock()
	defer t.Stop()
	return f(wctx, x.emit(ctx))
}

// check asks the provider for the work's status. A completed response
// finishes the node from the status; a failed one fails it; one still running
// is re-attached.
func (x *nodeExec) check(ctx context.Context) error {
	x.checked = true
	st, err := x.prov.(provider.Checker).Check(ctx, x.cur.Ref)
	if err != nil {
		x.diag(ctx, diagnostics.New(diagnostics.StatusChecked, "status check failed", diagnostics.KeyError.Attr(err.Error())))
		if diagnostics.Classify(err).Status == http.StatusNotFound {
			// The provider no longer knows the work (expired, or another
			// server): nothing to resume, but a retry may still be safe.
			x.ended = true
			return &diagnostics.Error{Class: diagnostics.ClassNotFound, Err: fmt.Errorf("response %s is gone: %w", x.cur.Ref, err)}
		}
		return err
	}
	x.diag(ctx, diagnostics.New(diagnostics.StatusChecked, "status: "+string(st.State),
		diagnostics.KeyRef.Attr(x.cur.Ref), diagnostics.KeyState.Attr(string(st.State))))
	switch st.State {
	case provider.StateCompleted:
		emit := x.emit(ctx)
		have := x.out.String()
		rest := strings.TrimPrefix(st.Output, have)
		if len(rest) == len(st.Output) && have != "" {
			if err := emit(provider.Event{Kind: provider.KindReset, Seq: -1}); err != nil {
				return err
			}
			rest = st.Output
		}
		if rest != "" {
			if err := emit(provider.Event{Kind: provider.KindDelta, Text: rest, Seq: -1}); err != nil {
				return err
			}
		}
		x.diag(ctx, diagnostics.New(diagnostics.OutputFromStatus, "output taken from the completed response",
			diagnostics.KeyBytesFromStatus.Attr(len(rest))))
		return emit(provider.Event{Kind: provider.KindDone, Seq: -1, Usage: st.Usage})
	case provider.StateCancelled: // by `noderun cancel`, or by someone else: it cannot go on, a retry can
		x.ended = true
		return &diagnostics.Error{Class: diagnostics.ClassProviderCanceled, Err: fmt.Errorf("response %s was cancelled", x.cur.Ref)}
	case provider.StateFailed, provider.StateIncomplete:
		x.ended = true
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic,
			Err: fmt.Errorf("response %s is %s: %s", x.cur.Ref, st.State, st.Error)}
	}
	// Still queued or in progress: the provider is working on it, which is
	// progress (a response left queued is bounded by the adapter's stuck
	// bound while it polls). The last failure stands, and the decision
	// re-attaches with a fresh reconnect count.
	x.poll(time.Now())
	x.healthy()
	return x.last
}

// noteFailure starts or continues a stretch of recovery and reports what was detected.
func (x *nodeExec) noteFailure(ctx context.Context, action resume.Action, ce *diagnostics.Error) {
	if x.recovering.IsZero() {
		x.recovering = time.Now()
	}
	if ce.Class == diagnostics.ClassConnect && action == resume.ActRetry {
		x.dispatched = x.wasSent // this request never left
	}
	if errors.Is(ce, provider.ErrNoEffects) {
		// The provider shows that none of the node's work took effect (a
		// harness dropped the only thread the node ran, before any tool
		// call): sending the request again repeats nothing.
		x.dispatched = false
	}
	x.last = ce
	if action == resume.ActCheck || ce.Class.Restarts() || !ce.Class.Transient() ||
		errors.Is(ce, provider.ErrContinueRejected) {
		// Reported by the status check, the adapter, the retry (NR112), or
		// by fail as the node's outcome: an error that is not transient ends
		// the node, and one record of it is what the accounting counts.
		return
	}
	code := diagnostics.DetectedCode(ce.Class)
	switch {
	case errors.Is(ce, diagnostics.ErrIdleTimeout):
		code = diagnostics.IdleTimeout
	case errors.Is(ce, ErrBreakerOpen):
		code = diagnostics.BreakerOpen
	case ce.Status >= 500 && ce.Class != diagnostics.ClassRateLimited:
		// A gateway's 502/503/504 is recovered from as a disconnect, but it
		// is the provider's answer, and the verdict names it so.
		code = diagnostics.ProviderError
	}
	msg := fmt.Sprintf("%s after %d bytes of output", strings.ReplaceAll(code.Name, "_", " "), x.out.Len())
	attrs := []slog.Attr{diagnostics.KeyClass.Attr(ce.Class), diagnostics.KeyError.Attr(ce.Err.Error())}
	if cut := x.silentCut(ce); cut > 0 {
		msg += fmt.Sprintf(", silent for %s before the cut: an intermediary (proxy, load balancer) likely cuts idle streams at ~%[1]s",
			profile.FormatDuration(cut.Round(100*time.Millisecond)))
		attrs = append(attrs, diagnostics.KeySilent.Attr(cut))
		defer x.learnIdleCut(ctx, cut) // journaled after the disconnect it is learnt from
	}
	if ce.Status != 0 {
		attrs = append(attrs, diagnostics.KeyStatus.Attr(ce.Status))
	}
	if ce.RetryAfter > 0 {
		attrs = append(attrs, diagnostics.KeyRetryAfter.Attr(ce.RetryAfter))
	}
	if x.cur.Ref != "" {
		attrs = append(attrs, diagnostics.KeyRef.Attr(x.cur.Ref), diagnostics.KeyCursor.Attr(x.cur.Seq))
	}
	x.diag(ctx, diagnostics.New(code, msg, attrs...))
	_ = x.run.j.SetAttemptCursor(bg(ctx), x.run.id, x.node.ID, x.attempt, x.cur.Seq)
}

// silentCut is how long the stream had been silent when it was cut, if that
// looks like an intermediary's idle timeout rather than a blip: a disconnect
// (not our own idle watchdog) after at least resume.MinSilentCut without an event.
func (x *nodeExec) silentCut(ce *diagnostics.Error) time.Duration {
	if ce.Class != diagnostics.ClassDisconnect || errors.Is(ce, diagnostics.ErrIdleTimeout) {
		return 0
	}
	if silent := time.Since(time.Unix(0, x.touched.Load())); silent >= resume.MinSilentCut {
		return silent
	}
	return 0
}

// learnIdleCut adapts a node whose adapter polls through silence to a
// gateway that cuts idle streams sooner than the profile's poll_after: from
// now on the adapter lets a silent stream go after half the silence that was
// cut, and polls, instead of re-attaching into the same cut again.
func (x *nodeExec) learnIdleCut(ctx context.Context, cut time.Duration) {
	if caps := x.prov.Capabilities(); !caps.IdleHandled || !caps.Check {
		return // nothing to switch to: the hint in the disconnect message is all there is
	}
	hold, learnt := resume.IdleHold(cut, x.req.Policy.PollAfter.D())
	if !learnt {
		return
	}
	x.req.Policy.PollAfter = profile.D(hold)
	if x.learnt {
		x.run.log.Debug("idle cut learnt again", "node", x.node.ID, "cut", cut, "hold", hold)
		return
	}
	x.learnt = true
	x.diag(ctx, diagnostics.New(diagnostics.IdleCutLearnt,
		fmt.Sprintf("an intermediary likely cuts idle streams at ~%s; this node now lets a silent stream go after %s and polls the response instead",
			profile.FormatDuration(cut.Round(100*time.Millisecond)), profile.FormatDuration(hold.Round(time.Millisecond))),
		diagnostics.KeyCutAfter.Attr(cut), diagnostics.KeyPollFor.Attr(hold)))
}

func (x *nodeExec) input(ce *diagnostics.Error) resume.Input {
	caps := x.prov.Capabilities()
	return resume.Input{
		Class:            ce.Class,
		CanResume:        caps.Resume && x.cur.Ref != "",
		CanCheck:         caps.Check && x.cur.Ref != "",
		CanContinue:      caps.Continue && x.out.Len() > 0 && provider.CanContinue(x.prov, x.req),
		ContinueRejected: errors.Is(ce, provider.ErrContinueRejected),
		Checked:          x.checked,
		Dispatched:       x.dispatched,
		SideEffects:      x.side,
		ResumesLeft:      x.prof.Reconnects - x.resumes,
		RetriesLeft:      x.retries,
		DeadlineExceeded: x.recoveryLeft() <= 0,
		Status:           ce.Status,
		Paced:            x.pacer != nil,
		BreakerOpen:      errors.Is(ce, ErrBreakerOpen),
		CanFailover:      len(x.fallbacks) > 0,
	}
}

// recoveryLeft is how much of the profile's recovery deadline remains.
func (x *nodeExec) recoveryLeft() time.Duration {
	if x.recovering.IsZero() {
		return x.prof.Deadline.D()
	}
	return x.prof.Deadline.D() - time.Since(x.recovering)
}

// delay is the wait before the next step: none before a status check (it is
// cheap and may end the node), else full-jitter backoff, but never less than
// the provider's Retry-After.
func (x *nodeExec) delay(to resume.Action, ce *diagnostics.Error) time.Duration {
	switch {
	case to == resume.ActCheck:
		return 0
	case to == resume.ActPark && ce.RetryAfter > 0:
		return ce.RetryAfter // the provider's word; the pacer holds the request until then
	}
	d := x.prof.Backoff.Delay(x.backoffN, x.rnd)
	x.backoffN++
	if ra := min(ce.RetryAfter, x.prof.MaxRetryAfter.D()); ra > d {
		d = ra
	}
	return d
}

// announce reports the step about to be taken, in the journal, on stderr
// and to Options.OnProgress.
func (x *nodeExec) announce(ctx context.Context, d resume.Decision, ce *diagnostics.Error, delay time.Duration) {
	if d.Action == resume.ActCheck {
		return // check reports its own result
	}
	step := x.step(d, ce.Class, delay)
	line := step.line(x.out.Len())
	left := x.retries
	if d.Action == resume.ActRetry {
		left-- // this retry is taken from the budget
	}
	attrs := []slog.Attr{diagnostics.KeyClass.Attr(ce.Class), diagnostics.KeyDelay.Attr(delay),
		diagnostics.KeyBackoffStep.Attr(x.backoffN - 1), // the delay was drawn from [0, base*factor^step]
		diagnostics.KeyRetriesLeft.Attr(left), diagnostics.KeyReconnectsLeft.Attr(x.prof.Reconnects - x.resumes)}
	if d.Action == resume.ActRetry {
		// false: no earlier attempt can have taken effect (it never left,
		// or the provider shows nothing of it did), so this one repeats nothing
		attrs = append(attrs, diagnostics.KeyReplays.Attr(x.dispatched))
	}
	x.diag(ctx, diagnostics.New(d.Code, line, append(attrs, x.cost.step(d.Action, x.out.Len(), x.deltas)...)...))
	x.report(Progress{State: ProgressRecovering, Text: line, Step: step})
	x.beatStep(line, &step)
}

// step is the recovery step d, as data: which, its wait, and its place in
// the budget it spends (the reconnect budget for a re-attach or a continue,
// the retry budget for a retry).
func (x *nodeExec) step(d resume.Decision, class diagnostics.Class, delay time.Duration) RecoveryStep {
	s := RecoveryStep{Code: d.Code, Class: class, Delay: delay}
	switch d.Action {
	case resume.ActResume, resume.ActContinue:
		s.N, s.Of = x.resumes+1, x.prof.Reconnects
	case resume.ActRetry:
		s.N, s.Of = x.total-x.retries+1, x.total
	}
	return s
}

// line says the step for people; a continue starts from byte from.
func (s RecoveryStep) line(from int) string {
	d := profile.FormatDuration(s.Delay.Round(time.Millisecond))
	switch s.Code.Means {
	case diagnostics.ByReconnect:
		return fmt.Sprintf("reconnecting %d/%d in %s (%s)", s.N, s.Of, d, s.Class)
	case diagnostics.ByContinue:
		return fmt.Sprintf("continuing from byte %d, %d/%d in %s (%s)", from, s.N, s.Of, d, s.Class)
	case diagnostics.ByRetry:
		return fmt.Sprintf("retrying %d/%d in %s (%s)", s.N, s.Of, d, s.Class)
	}
	return fmt.Sprintf("%s in %s (%s)", s.Code.Name, d, s.Class)
}

// report hands p, with the node's figures so far, to Options.OnProgress.
func (x *nodeExec) report(p Progress) {
	if x.run.onProg == nil {
		return
	}
	p.Node, p.Attempt, p.Bytes, p.Reasoning = x.node.ID, x.attempt, x.out.Len(), x.usage.reasoning
	p.Tokens = x.usage.record().Visible() // as the journal will account the attempt
	p.LastData, p.LastPoll = x.dataAt, x.pollAt
	x.unreported = false
	x.run.onProg.report(p)
}

// data notes that the attempt had data at time at; it is reported at most
// every dataEvery. Called per chunk: without OnProgress it is an inlined
// compare.
func (x *nodeExec) data(at time.Time) {
	if x.run.onProg != nil {
		x.noteData(at)
	}
}

func (x *nodeExec) noteData(at time.Time) {
	x.dataAt, x.unreported = at, true
	if at.Sub(x.reportAt) >= dataEvery {
		x.reportAt = at
		x.report(Progress{State: ProgressData})
	}
}

// poll reports at once that a status poll or check found the work alive at
// time at: a silent stream's one sign of life.
func (x *nodeExec) poll(at time.Time) {
	if x.run.onProg == nil {
		return
	}
	x.pollAt = at
	x.report(Progress{State: ProgressData})
}

// fail ends the attempt and reports why the node failed and what was tried.
func (x *nodeExec) fail(ctx context.Context, d resume.Decision, ce *diagnostics.Error) error {
	stopped := ce.Class == diagnostics.ClassCanceled || ce.Class == diagnostics.ClassJournal
	if !stopped {
		x.release(ctx) // abandoned for good: leave nothing of ours running
	}
	x.endAttempt(ctx, ce)
	tried := fmt.Sprintf("%s, %d of %s used", textfit.Count(x.attempt, "attempt"), x.total-x.retries, textfit.Count(x.total, "retry"))
	if spec := x.run.g.Providers[x.provNm]; (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden) &&
		spec.Kind != ProviderKindHarness { // a harness explains its own credentials
		// The fix first: a shortened line keeps its start.
		d.Reason = fmt.Sprintf("authentication failed (HTTP %d): check the API key in %s (provider %s's api_key_env); not retried", ce.Status, keyEnvOf(spec), x.provNm)
		if docs := keyDocs(spec.Kind); docs != "" {
			d.Reason += " (" + docs + ")"
		}
	}
	if stopped { // interrupted, not failed: resumable
		code := diagnostics.NodeCanceled
		if ce.Class == diagnostics.ClassJournal {
			code = diagnostics.JournalUnavailable
		}
		x.diag(ctx, diagnostics.New(code, fmt.Sprintf("interrupted after %d bytes of output", x.out.Len()),
			diagnostics.KeyClass.Attr(ce.Class), diagnostics.KeyTried.Attr(tried), diagnostics.KeyError.Attr(ce.Error()),
			diagnostics.KeyOutputBytes.Attr(x.out.Len())))
		ne := &NodeError{Node: x.node.ID, Class: ce.Class, Code: d.Code, Reason: d.Reason, Tried: tried, Err: ce}
		if x.remote() && !x.inProcess {
			// Interruption detaches: the response goes on at the provider and
			// `noderun resume` re-attaches to it, regenerating nothing.
			ne.Running = x.cur.Ref
			x.diag(ctx, diagnostics.New(diagnostics.WorkDetached,
				// The commands that resume or cancel it are said once, by
				// whoever ends the run (the CLI prints them with every
				// detached response).
				fmt.Sprintf("response %s keeps running at the provider (detached)", x.cur.Ref),
				diagnostics.KeyRef.Attr(x.cur.Ref), diagnostics.KeyCursor.Attr(x.cur.Seq)))
		}
		return ne
	}
	attrs := []slog.Attr{diagnostics.KeyClass.Attr(ce.Class), diagnostics.KeyError.Attr(ce.Error()), diagnostics.KeyOutputBytes.Attr(x.out.Len())}
	if ce.Status != 0 {
		attrs = append(attrs, diagnostics.KeyStatus.Attr(ce.Status))
	}
	msg := d.Reason
	if d.Code != diagnostics.NodeFailed { // why, in its own code; the outcome says it once
		x.diag(ctx, diagnostics.New(d.Code, d.Reason, attrs...))
		msg = "node failed after " + tried
	}
	x.diag(ctx, diagnostics.New(diagnostics.NodeFailed, msg, append(attrs, diagnostics.KeyTried.Attr(tried))...))
	return &NodeError{Node: x.node.ID, Class: ce.Class, Code: d.Code, Reason: d.Reason, Tried: tried, Err: ce}
}

// remote reports whether the current attempt names work that may still be
// running at the provider and can be checked and cancelled there (a
// background response; a harness's thread ends with its process).
func (x *nodeExec) remote() bool {
	caps := x.prov.Capabilities()
	return x.cur.Ref != "" && !x.ended && caps.Cancel && caps.Check
}

// abandon stops billing for work that will be retried from scratch: it is
// given up for good (stuck, gone quiet past the reconnect budget), and its
// output will be generated again.
func (x *nodeExec) abandon(ctx context.Context) {
	if !x.remote() {
		return
	}
	if errors.Is(x.last, diagnostics.ErrStuck) {
		x.cancelWork(ctx, diagnostics.StuckCancelled, "cancelled the stuck response "+x.cur.Ref+" before retrying")
		return
	}
	x.cancelWork(ctx, diagnostics.WorkCancelled, "cancelled "+x.cur.Ref+" at the provider before retrying from scratch")
}

// release leaves nothing of a failed node running at the provider: a
// response that is still queued or in progress is cancelled, so it stops
// billing for output nobody will read.
func (x *nodeExec) release(ctx context.Context) {
	if !x.remote() {
		return
	}
	cctx, cancel := context.WithTimeout(bg(ctx), 10*time.Second)
	defer cancel()
	if st, err := x.prov.(provider.Checker).Check(cctx, x.cur.Ref); err == nil &&
		st.State != provider.StateQueued && st.State != provider.StateInProgress {
		return // it ended by itself
	}
	x.cancelWork(ctx, diagnostics.WorkCancelled, "the node failed: cancelled its response "+x.cur.Ref+" at the provider so it stops billing")
}

// cancelWork cancels the current attempt's response and journals it (or why
// it could not be, with the command that can).
func (x *nodeExec) cancelWork(ctx context.Context, code diagnostics.Code, msg string) {
	cctx, cancel := context.WithTimeout(bg(ctx), 10*time.Second)
	defer cancel()
	if err := x.prov.(provider.Canceler).Cancel(cctx, x.cur.Ref); err != nil {
		msg = fmt.Sprintf("could not cancel %s (it may still be running: `%s`): %v", x.cur.Ref, x.run.command("cancel", x.run.id, x.node.ID), err)
	} else {
		x.ended = true
	}
	x.diag(ctx, diagnostics.New(code, msg, diagnostics.KeyRef.Attr(x.cur.Ref)))
}

func (x *nodeExec) beginAttempt(ctx context.Context, mode journal.AttemptMode) error {
	x.keepBest()
	x.cur = provider.Cursor{Seq: -1}
	x.ground.Restart()
	x.out.Reset()
	x.deltas, x.events, x.thought = 0, 0, 0
	x.bound()
	x.done = false
	x.usage = attemptUsage{}
	x.dataAt, x.pollAt = time.Time{}, time.Time{}
	n, err := x.run.j.BeginAttempt(bg(ctx), x.run.id, x.node.ID, mode, x.provNm)
	if err != nil {
		return x.journalErr(err) // no request the journal cannot record
	}
	x.attempt = n
	x.report(Progress{State: ProgressStreaming, Text: "streaming"})
	return nil
}

func (x *nodeExec) endAttempt(ctx context.Context, ce *diagnostics.Error) {
	outcome, class, msg := journal.OutcomeOK, diagnostics.ClassNone, ""
	if ce != nil && ce.Class != diagnostics.ClassNone {
		outcome, class, msg = journal.OutcomeError, ce.Class, x.run.red.String(attemptError(ce))
	}
	if x.unreported { // the last figures of the attempt, before whatever comes next
		x.report(Progress{State: ProgressData})
	}
	u := x.usage.record()
	u.Model = x.req.Model
	_ = x.run.j.RecordUsage(x.run.id, x.node.ID, x.attempt, u)
	end := journal.AttemptEnd{Outcome: outcome, ErrClass: class, Error: msg, Cursor: x.cur.Seq}
	if err := x.run.j.EndAttempt(bg(ctx), x.run.id, x.node.ID, x.attempt, end); err != nil {
		x.run.log.Error("journal: end attempt", "node", x.node.ID, "error", err)
	}
}

// attemptError is the text of an attempt's error without its class, which
// the attempt records apart (journal.Attempt.ErrClass): ce.Error() would
// say it twice wherever the two are shown together.
func attemptError(ce *diagnostics.Error) string {
	msg := ""
	if ce.Err != nil {
		msg = ce.Err.Error()
	}
	if ce.Status != 0 {
		msg = fmt.Sprintf("HTTP %d: %s", ce.Status, msg)
	}
	return msg
}

// diag journals a diagnostic, logs it on stderr and reports it with the
// node's figures.
func (x *nodeExec) diag(ctx context.Context, d diagnostics.Record) {
	d = x.run.journalDiag(ctx, x.node.ID, x.attempt, d)
	if d.Code.Role == diagnostics.RoleStep {
		x.steps++ // as the ledger counts them (Figures.Steps)
	}
	x.report(Progress{State: ProgressDiagnostic, Text: d.Message, Code: d.Code})
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// bg keeps ctx's values but not its cancellation: journaling what happened
// must succeed even while the run is being interrupted.
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
