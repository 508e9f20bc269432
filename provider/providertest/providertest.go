// Package providertest checks a provider adapter against the contract the
// runner's recovery loop relies on (see package provider), the way
// testing/fstest.TestFS checks a file system: an adapter's author runs Test
// in their own test, against their own server, and every built-in adapter
// runs it against the simulator.
//
// The checks disturb the server for real: Config.CutNext must make the
// server close the connection of its next stream mid-body (a real socket
// cut, as a gateway's idle cut is), never fake it in the adapter.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// Config is an adapter under test and the means to disturb its server.
type Config struct {
	// New returns a new adapter of the kind under test, sharing no state
	// with those it returned before: as another process would build it
	// (a resumed run). Adapters that implement io.Closer are closed.
	New func() provider.Provider
	// Request is what every check sends; Want is its output undisturbed,
	// byte for byte. Want should span at least a few dozen events, so that
	// a cut after CutAfter of them falls in its middle.
	Request provider.Request
	Want    string
	// WantResumed, when set, is what a resume of cut work must emit, for
	// an adapter whose Resume is a new turn on the same thread (an agent
	// CLI resuming its session with a continue prompt) rather than the
	// rest of the same stream.
	WantResumed string
	// CutNext makes the server cut the connection of the next stream it
	// serves (a Stream, Resume or Continue request) after it has sent
	// after events of it.
	CutNext func(after int)
	// CutAfter is the after given to CutNext: enough events for the work's
	// id and some output to arrive first (default 8).
	CutAfter int
	// Timeout bounds each call (default 30 s): an adapter that hangs fails.
	Timeout time.Duration
}

// Test runs the conformance checks on cfg as subtests of t:
//
//   - capabilities: every Capabilities flag has its interface
//     (provider.CheckCapabilities);
//   - stream: an undisturbed Stream returns nil after exactly one
//     KindDone, its last event, and its deltas are Want; an adapter that can
//     resume, check or cancel emits the work's Ref before its first delta;
//     sequence numbers never go back;
//   - emit error: an error returned by Emit (on the first delta) ends the
//     stream at once and is returned unchanged (errors.Is finds it);
//   - cut: a stream cut mid-body is an error classified as a disconnect
//     (diagnostics.ClassDisconnect), never nil, never KindDone; what it
//     emitted is a prefix of Want;
//   - resume (Capabilities.Resume): a new adapter resumes the cut work from
//     its cursor (Ref, last Seq, last Mark) and emits exactly the rest of
//     Want (or WantResumed), every event past the cursor;
//   - continue (Capabilities.Continue, for a request it can continue): a
//     new adapter continues the cut answer and emits exactly the rest;
//   - status (Capabilities.Check): the completed work's status is
//     completed, with Want as its output;
//   - cancel (Capabilities.Cancel): cancelling work that is under way, and
//     again, succeeds; its status (if checkable) is then cancelled or
//     completed, never in progress;
//   - context: a Stream whose context is cancelled (with a cause) returns
//     within the Timeout, with an error unless it had emitted its KindDone.
func Test(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil || cfg.CutNext == nil {
		t.Fatal("providertest: Config.New and Config.CutNext are required")
	}
	if cfg.CutAfter <= 0 {
		cfg.CutAfter = 8
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	x := &suite{cfg: cfg}
	caps := x.adapter(t).Capabilities()
	t.Run("capabilities", func(t *testing.T) {
		if err := provider.CheckCapabilities(x.adapter(t)); err != nil {
			t.Error(err)
		}
	})
	t.Run("stream", x.stream)
	t.Run("emit error", x.emitError)
	t.Run("cut", func(t *testing.T) { x.cut(t) })
	if caps.Resume {
		t.Run("resume", x.resume)
	}
	if caps.Continue && provider.CanContinue(x.adapter(t), cfg.Request) {
		t.Run("continue", x.continued)
	}
	if caps.Check {
		t.Run("status", x.status)
	}
	if caps.Cancel {
		t.Run("cancel", x.cancel)
	}
	t.Run("context", x.context)
}

type suite struct{ cfg Config }

// adapter is a new adapter, closed when t ends.
func (x *suite) adapter(t *testing.T) provider.Provider {
	t.Helper()
	p := x.cfg.New()
	if p == nil {
		t.Fatal("Config.New returned nil")
	}
	if c, ok := p.(interface{ Close() error }); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return p
}

// recorder keeps what an adapter emitted; Emit may be called from the
// adapter's goroutines, though in order.
type recorder struct {
	mu   sync.Mutex
	evs  []provider.Event
	hook func(provider.Event) error // called after recording, outside mu
}

func (r *recorder) emit(ev provider.Event) error {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
	if r.hook != nil {
		return r.hook(ev)
	}
	return nil
}

func (r *recorder) events() []provider.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]provider.Event(nil), r.evs...)
}

// text is the output the events make: deltas, voided by a reset.
func (r *recorder) text() string {
	var b strings.Builder
	for _, ev := range r.events() {
		switch ev.Kind {
		case provider.KindDelta:
			b.WriteString(ev.Text)
		case provider.KindReset:
			b.Reset()
		}
	}
	return b.String()
}

// cursor is where the events leave the work, as the runner journals it.
func (r *recorder) cursor() provider.Cursor {
	cur := provider.Cursor{Seq: -1}
	for _, ev := range r.events() {
		if ev.Ref != "" {
			cur.Ref = ev.Ref
		}
		if ev.Seq > cur.Seq && ev.Kind != provider.KindMark {
			cur.Seq = ev.Seq
		}
		if ev.Kind == provider.KindMark && ev.Mark != nil {
			m := *ev.Mark
			cur.Mark = &m
		}
	}
	return cur
}

func (r *recorder) count(k provider.Kind) int {
	n := 0
	for _, ev := range r.events() {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// call runs f with the suite's timeout, failing t if it does not return.
func (x *suite) call(t *testing.T, what string, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), x.cfg.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(x.cfg.Timeout + 5*time.Second):
		t.Fatalf("%s did not return within %s of its context's deadline", what, x.cfg.Timeout)
		return nil
	}
}

// checkEnd fails t unless the events end with their one KindDone.
func checkEnd(t *testing.T, what string, r *recorder) {
	t.Helper()
	evs := r.events()
	if n := r.count(provider.KindDone); n != 1 || len(evs) == 0 || evs[len(evs)-1].Kind != provider.KindDone {
		t.Errorf("%s: %d KindDone events, want exactly one, the last (events: %s)", what, n, kinds(evs))
	}
}

func (x *suite) stream(t *testing.T) {
	p := x.adapter(t)
	r := &recorder{}
	if err := x.call(t, "Stream", func(ctx context.Context) error { return p.Stream(ctx, x.cfg.Request, r.emit) }); err != nil {
		t.Fatalf("an undisturbed Stream: %v", err)
	}
	checkEnd(t, "Stream", r)
	if got := r.text(); got != x.cfg.Want {
		t.Errorf("Stream's output is not Want:\n got %q\nwant %q", got, x.cfg.Want)
	}
	caps := p.Capabilities()
	if caps.Resume || caps.Check || caps.Cancel {
		ref := false
		for _, ev := range r.events() {
			if ev.Kind == provider.KindRef && ev.Ref != "" {
				ref = true
			}
			if ev.Kind == provider.KindDelta && !ref {
				t.Errorf("a delta before the work's Ref: an adapter that can resume, check or cancel names the work first (events: %s)", kinds(r.events()))
				break
			}
		}
	}
	last := int64(-1)
	for _, ev := range r.events() {
		if ev.Seq < 0 || ev.Kind == provider.KindMark {
			continue
		}
		if ev.Seq < last {
			t.Errorf("Seq went back from %d to %d", last, ev.Seq)
		}
		last = ev.Seq
	}
}

var errEmit = errors.New("providertest: the journal refused the event")

func (x *suite) emitError(t *testing.T) {
	p := x.adapter(t)
	r := &recorder{}
	r.hook = func(ev provider.Event) error {
		if ev.Kind == provider.KindDelta {
			return errEmit
		}
		return nil
	}
	err := x.call(t, "Stream", func(ctx context.Context) error { return p.Stream(ctx, x.cfg.Request, r.emit) })
	if !errors.Is(err, errEmit) {
		t.Fatalf("Emit's error on the first delta: Stream returned %v, want it unchanged", err)
	}
	if n := r.count(provider.KindDelta); n != 1 || r.count(provider.KindDone) != 0 {
		t.Errorf("%d deltas and %d KindDone emitted, want the stream to end at the first delta, whose Emit failed", n, r.count(provider.KindDone))
	}
}

// cut streams with a cut after CutAfter events and returns what the cut
// stream emitted.
func (x *suite) cut(t *testing.T) *recorder {
	t.Helper()
	p := x.adapter(t)
	r := &recorder{}
	x.cfg.CutNext(x.cfg.CutAfter)
	err := x.call(t, "Stream", func(ctx context.Context) error { return p.Stream(ctx, x.cfg.Request, r.emit) })
	if err == nil {
		t.Fatalf("a stream cut after %d events returned nil: only terminal evidence completes a stream (events: %s)", x.cfg.CutAfter, kinds(r.events()))
	}
	if c := diagnostics.Classify(err).Class; c != diagnostics.ClassDisconnect {
		t.Errorf("a cut stream's error %v is classified %s, want %s", err, c, diagnostics.ClassDisconnect)
	}
	if n := r.count(provider.KindDone); n != 0 {
		t.Errorf("a cut stream emitted KindDone")
	}
	if got := r.text(); !strings.HasPrefix(x.cfg.Want, got) {
		t.Errorf("a cut stream's output is not a prefix of Want:\n got %q\nwant %q", got, x.cfg.Want)
	}
	return r
}

func (x *suite) resume(t *testing.T) {
	before := x.cut(t)
	cur := before.cursor()
	if cur.Ref == "" {
		t.Fatalf("the cut stream named no work to resume (events: %s)", kinds(before.events()))
	}
	p := x.adapter(t).(provider.Resumer)
	r := &recorder{}
	if err := x.call(t, "Resume", func(ctx context.Context) error { return p.Resume(ctx, x.cfg.Request, cur, r.emit) }); err != nil {
		t.Fatalf("Resume from %+v: %v", cur, err)
	}
	checkEnd(t, "Resume", r)
	if x.cfg.WantResumed != "" {
		if got := r.text(); got != x.cfg.WantResumed {
			t.Errorf("the resumed turn's output is not WantResumed:\n got %q\nwant %q", got, x.cfg.WantResumed)
		}
	} else if got := before.text() + r.text(); got != x.cfg.Want {
		t.Errorf("the cut output and the resumed one are not Want:\n got %q\nwant %q", got, x.cfg.Want)
	}
	if r.count(provider.KindReset) > 0 && x.cfg.WantResumed == "" {
		t.Errorf("Resume voided the output (KindReset): a resume regenerates nothing")
	}
	for _, ev := range r.events() {
		if ev.Kind != provider.KindMark && ev.Seq >= 0 && ev.Seq <= cur.Seq {
			t.Errorf("Resume emitted an event at Seq %d, not past the cursor's %d", ev.Seq, cur.Seq)
			break
		}
	}
}

func (x *suite) continued(t *testing.T) {
	before := x.cut(t)
	have := before.text()
	p := x.adapter(t).(provider.Continuer)
	r := &recorder{}
	if err := x.call(t, "Continue", func(ctx context.Context) error { return p.Continue(ctx, x.cfg.Request, have, r.emit) }); err != nil {
		t.Fatalf("Continue after %d bytes: %v", len(have), err)
	}
	checkEnd(t, "Continue", r)
	if got := have + r.text(); got != x.cfg.Want {
		t.Errorf("the cut output and its continuation are not Want:\n got %q\nwant %q", got, x.cfg.Want)
	}
}

// ref streams the request undisturbed (or, with stop, until its first
// delta) and returns the work's Ref.
func (x *suite) ref(t *testing.T, p provider.Provider) (string, *recorder) {
	t.Helper()
	r := &recorder{}
	if err := x.call(t, "Stream", func(ctx context.Context) error { return p.Stream(ctx, x.cfg.Request, r.emit) }); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	ref := r.cursor().Ref
	if ref == "" {
		t.Fatal("the stream named no work (no KindRef)")
	}
	return ref, r
}

func (x *suite) status(t *testing.T) {
	p := x.adapter(t)
	ref, _ := x.ref(t, p)
	var st provider.Status
	ch := x.adapter(t).(provider.Checker) // another process's adapter
	err := x.call(t, "Check", func(ctx context.Context) (err error) {
		st, err = ch.Check(ctx, ref)
		return err
	})
	if err != nil {
		t.Fatalf("Check(%s): %v", ref, err)
	}
	if st.State != provider.StateCompleted || st.Output != x.cfg.Want {
		t.Errorf("Check of completed work: %s with output %q, want completed with Want", st.State, st.Output)
	}
}

func (x *suite) cancel(t *testing.T) {
	p := x.adapter(t)
	r := &recorder{}
	refs := make(chan string, 1)
	r.hook = func(ev provider.Event) error {
		if ev.Kind == provider.KindRef && ev.Ref != "" {
			select {
			case refs <- ev.Ref:
			default:
			}
		}
		return nil
	}
	// The stream is cut where the work goes on at the provider, so that
	// it is under way when cancelled.
	x.cfg.CutNext(x.cfg.CutAfter)
	_ = x.call(t, "Stream", func(ctx context.Context) error { return p.Stream(ctx, x.cfg.Request, r.emit) })
	var ref string
	select {
	case ref = <-refs:
	default:
		t.Fatalf("the stream named no work to cancel (events: %s)", kinds(r.events()))
	}
	c := x.adapter(t).(provider.Canceler)
	for i := range 2 {
		if err := x.call(t, "Cancel", func(ctx context.Context) error { return c.Cancel(ctx, ref) }); err != nil {
			t.Fatalf("Cancel(%s), call %d: %v (cancelling twice must succeed too)", ref, i+1, err)
		}
	}
	if ch, ok := c.(provider.Checker); ok && p.Capabilities().Check {
		var st provider.Status
		err := x.call(t, "Check", func(ctx context.Context) (err error) { st, err = ch.Check(ctx, ref); return err })
		if err != nil {
			t.Fatalf("Check after Cancel: %v", err)
		}
		if st.State != provider.StateCancelled && st.State != provider.StateCompleted {
			t.Errorf("cancelled work is %s, want cancelled (or completed, had it finished first)", st.State)
		}
	}
}

func (x *suite) context(t *testing.T) {
	p := x.adapter(t)
	cause := errors.New("providertest: the operator stopped the run")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	r := &recorder{}
	r.hook = func(ev provider.Event) error {
		if ev.Kind == provider.KindDelta {
			cancel(cause)
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- p.Stream(ctx, x.cfg.Request, r.emit) }()
	select {
	case err := <-done:
		if err == nil && r.count(provider.KindDone) != 1 {
			t.Errorf("Stream returned nil after its context was cancelled, without KindDone")
		}
	case <-time.After(x.cfg.Timeout):
		t.Fatalf("Stream did not return within %s of its context's cancellation", x.cfg.Timeout)
	}
}

func kinds(evs []provider.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == 40 {
			fmt.Fprintf(&b, "... (%d events)", len(evs))
			break
		}
		b.WriteString(string(ev.Kind))
	}
	return b.String()
}
