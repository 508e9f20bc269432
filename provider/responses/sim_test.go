package responses

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Recovery scenarios over real sockets against the simulator (127.0.0.1).

const simSeed = 42

func startSim(t *testing.T, cfg sim.Config) *sim.Server {
	t.Helper()
	cfg.Seed = simSeed
	return simtest.Start(t, cfg)
}

func simProvider(t *testing.T, s *sim.Server) *Provider {
	t.Helper()
	p, err := New(Config{BaseURL: s.BaseURL(), APIKey: "sim-key"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.hc.CloseIdleConnections)
	return p
}

func simRequest(prompt string) provider.Request {
	return provider.Request{Node: "n", Model: "sim", System: "be brief", Prompt: prompt, Policy: ciPolicy()}
}

func want(prompt string, tokens int) string {
	return strings.Join(sim.Text("sim", prompt, simSeed, tokens), "")
}

// cursor is where the recorded stream stands, as the executor's journal would have it.
func (r *recorder) cursor() provider.Cursor {
	cur := provider.Cursor{Seq: -1}
	for _, ev := range r.events() {
		if ev.Kind == provider.KindRef {
			cur.Ref = ev.Ref
		}
		if ev.Kind != provider.KindDiagnostic && ev.Seq > cur.Seq {
			cur.Seq = ev.Seq
		}
	}
	return cur
}

func (r *recorder) diags() []string {
	var out []string
	for _, ev := range r.events() {
		if ev.Kind == provider.KindDiagnostic {
			out = append(out, ev.Diag.Code.Name)
		}
	}
	return out
}

// drive stands in for the executor's recovery loop: Stream, then Resume from
// the cursor after every disconnect (no backoff, bounded).
func drive(ctx context.Context, p *Provider, req provider.Request, rec *recorder) (resumes int, err error) {
	err = p.Stream(ctx, req, rec.emit)
	for ; err != nil && resumes < 20; resumes++ {
		if diagnostics.Classify(err).Class != diagnostics.ClassDisconnect {
			return resumes, err
		}
		cur := rec.cursor()
		if cur.Ref == "" {
			return resumes, fmt.Errorf("no response id to resume: %w", err)
		}
		err = p.Resume(ctx, req, cur, rec.emit)
	}
	return resumes, err
}

// checkStream checks the invariants of a recorded stream: KindRef first,
// strictly increasing sequence numbers, one KindDone at the end.
func checkStream(t *testing.T, rec *recorder) {
	t.Helper()
	evs := rec.events()
	if len(evs) == 0 || evs[0].Kind != provider.KindRef || evs[0].Ref == "" {
		t.Fatalf("first event is not KindRef: %s", rec.kinds())
	}
	last := int64(-1)
	for i, ev := range evs {
		if ev.Seq == -1 { // diagnostics and other non-wire events
			continue
		}
		if ev.Seq <= last {
			t.Fatalf("event %d (%s) seq %d after %d: %s", i, ev.Kind, ev.Seq, last, rec.kinds())
		}
		last = ev.Seq
		if ev.Ref != evs[0].Ref {
			t.Fatalf("event %d ref %q", i, ev.Ref)
		}
		if ev.Kind == provider.KindDone && i != len(evs)-1 {
			t.Fatalf("events after KindDone: %s", rec.kinds())
		}
	}
	if evs[len(evs)-1].Kind != provider.KindDone {
		t.Fatalf("no KindDone at the end: %s", rec.kinds())
	}
}

func checkOneResponse(t *testing.T, s *sim.Server, tokens int) {
	t.Helper()
	st := s.Stats()
	if st.ResponsesCreated != 1 || st.TokensGenerated != int64(tokens) || st.Requests[sim.EndpointResponsesCreate] != 1 {
		t.Fatalf("stats: %d responses, %d tokens generated (want 1, %d), requests %v",
			st.ResponsesCreated, st.TokensGenerated, tokens, st.Requests)
	}
}

func TestSimStreamCompletes(t *testing.T) {
	const tokens = 200
	s := startSim(t, sim.Config{Tokens: tokens})
	p := simProvider(t, s)
	var rec recorder
	req := simRequest("undisturbed")
	if err := p.Stream(context.Background(), req, rec.emit); err != nil {
		t.Fatal(err)
	}
	checkStream(t, &rec)
	if rec.text() != want(req.Prompt, tokens) {
		t.Fatalf("output differs:\n%q\n%q", rec.text(), want(req.Prompt, tokens))
	}
	if u := rec.last().Usage; u == nil || u.OutputTokens != tokens {
		t.Fatalf("usage %+v", u)
	}
	if d := rec.diags(); len(d) != 0 {
		t.Fatalf("diagnostics on an undisturbed run: %v", d)
	}
	checkOneResponse(t, s, tokens)
}

// Event layout of a sim background response of T tokens without reasoning:
// 0 created, 1 queued, 2 in_progress, 3 output_item.added,
// 4 content_part.added, 5..4+T deltas, 5+T output_text.done,
// 6+T content_part.done, 7+T output_item.done, 8+T completed.
// A fault "after k events" acts once events 0..k-1 were written.
func TestSimDropsAnywhere(t *testing.T) {
	const tokens = 12
	total := 9 + tokens
	kinds := []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut}
	for _, tps := range []float64{0, 400} {
		for _, kind := range kinds {
			for k := 1; k < total; k++ {
				if tps > 0 && k%3 != 1 && k < total-4 { // paced: a sample plus the end
					continue
				}
				t.Run(fmt.Sprintf("tps%v/%s/after%d", tps, kind, k), func(t *testing.T) {
					s := startSim(t, sim.Config{Tokens: tokens, TokensPerSecond: tps, Faults: []sim.Fault{
						{Endpoint: sim.EndpointResponsesCreate, Kind: kind, AfterEvents: k},
						// The first re-attach breaks too, a few events in.
						{Endpoint: sim.EndpointResponsesStream, Requests: []int{1}, Kind: kinds[k%3], AfterEvents: 2},
					}})
					p := simProvider(t, s)
					var rec recorder
					req := simRequest("drop test")
					resumes, err := drive(context.Background(), p, req, &rec)
					if err != nil {
						t.Fatalf("after %d resumes: %v\n%s", resumes, err, rec.kinds())
					}
					checkStream(t, &rec)
					if got := rec.text(); got != want(req.Prompt, tokens) {
						t.Fatalf("output differs:\n got %q\nwant %q", got, want(req.Prompt, tokens))
					}
					checkOneResponse(t, s, tokens)
					if st := s.Stats(); st.Faults[string(kind)] < 1 || resumes < 1 {
						t.Fatalf("fault did not act: %v, %d resumes", st.Faults, resumes)
					}
					for _, d := range rec.diags() {
						if d != diagnostics.Reattached.Name {
							t.Fatalf("unexpected diagnostic %s", d)
						}
					}
				})
			}
		}
	}
}

// A drop before response.created leaves nothing to resume: the error is a
// disconnect and no KindRef was emitted (the executor retries from scratch).
func TestSimDropBeforeCreated(t *testing.T) {
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset} {
		s := startSim(t, sim.Config{Tokens: 5, Faults: []sim.Fault{{Endpoint: sim.EndpointResponsesCreate, Kind: kind}}})
		p := simProvider(t, s)
		var rec recorder
		err := p.Stream(context.Background(), simRequest("x"), rec.emit)
		if diagnostics.Classify(err).Class != diagnostics.ClassDisconnect || len(rec.events()) != 0 {
			t.Fatalf("%s: err %v, events %s", kind, err, rec.kinds())
		}
	}
}

// Reasoning silence longer than the idle window, with keepalive comments
// every 100 ms: the keepalives do not hold the stream, the adapter polls, and
// re-attaches when the output moves.
func TestSimSilencePolls(t *testing.T) {
	t.Parallel() // mostly waiting out silence
	const tokens = 30
	pol := ciPolicy()
	silence := pol.PollAfter.D() + time.Second
	s := startSim(t, sim.Config{Tokens: tokens, TokensPerSecond: 500, Silence: silence, Keepalive: 100 * time.Millisecond})
	p := simProvider(t, s)
	var rec recorder
	req := simRequest("silent thinker")
	start := time.Now()
	if err := p.Stream(context.Background(), req, rec.emit); err != nil {
		t.Fatalf("%v\n%s", err, rec.kinds())
	}
	el := time.Since(start)
	checkStream(t, &rec)
	if rec.text() != want(req.Prompt, tokens) {
		t.Fatalf("output differs")
	}
	d := strings.Join(rec.diags(), " ")
	if d != "polling_started status_checked reattached" {
		t.Fatalf("diagnostics %q", d)
	}
	st := s.Stats()
	if st.Requests[sim.EndpointResponsesGet] < 2 || st.Requests[sim.EndpointResponsesStream] != 1 {
		t.Fatalf("requests %v", st.Requests)
	}
	checkOneResponse(t, s, tokens)
	// Polling began one idle window after the last event, though keepalives kept coming.
	var pollAt, lastBefore time.Time
	for _, ev := range rec.events() {
		if ev.Kind == provider.KindDiagnostic && ev.Diag.Code == diagnostics.PollingStarted {
			pollAt = ev.Time
			break
		}
		lastBefore = ev.Time
	}
	if gap := pollAt.Sub(lastBefore); gap < pol.PollAfter.D() || gap > pol.PollAfter.D()+2*time.Second {
		t.Fatalf("polling started %v after the last event", gap)
	}
	t.Logf("completed in %v", el)
}

// A connection that goes silent (the generator goes on): polling sees the
// output grow at once and re-attaches.
func TestSimSilenceFaultPolls(t *testing.T) {
	t.Parallel() // mostly waiting out silence
	const tokens = 40
	s := startSim(t, sim.Config{Tokens: tokens, TokensPerSecond: 200, Keepalive: 100 * time.Millisecond, Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultSilence, AfterEvents: 8, Duration: 10 * time.Second},
	}})
	p := simProvider(t, s)
	var rec recorder
	req := simRequest("silent link")
	start := time.Now()
	if err := p.Stream(context.Background(), req, rec.emit); err != nil {
		t.Fatalf("%v\n%s", err, rec.kinds())
	}
	if el := time.Since(start); el > 7*time.Second { // the silence lasts 10 s
		t.Fatalf("took %v: the silent connection was held", el)
	}
	checkStream(t, &rec)
	if rec.text() != want(req.Prompt, tokens) {
		t.Fatalf("output differs")
	}
	if d := strings.Join(rec.diags(), " "); d != "polling_started status_checked reattached" {
		t.Fatalf("diagnostics %q", d)
	}
	checkOneResponse(t, s, tokens)
}

// A response left queued: ErrStuck after StuckAfter (counted from the last
// event that showed it queued), then Cancel works, twice.
func TestSimStuckQueued(t *testing.T) {
	t.Parallel() // mostly waiting out silence
	s := startSim(t, sim.Config{Tokens: 10, Keepalive: 100 * time.Millisecond, Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultQueued},
	}})
	p := simProvider(t, s)
	var rec recorder
	req := simRequest("stuck")
	start := time.Now()
	err := p.Stream(context.Background(), req, rec.emit)
	el := time.Since(start)
	if !errors.Is(err, diagnostics.ErrStuck) || diagnostics.Classify(err).Class != diagnostics.ClassStuck {
		t.Fatalf("err %v\n%s", err, rec.kinds())
	}
	pol := req.Policy
	if el < pol.PollAfter.D() || el > pol.PollAfter.D()+pol.StuckAfter.D()+2*time.Second {
		t.Fatalf("stuck declared after %v", el)
	}
	if d := strings.Join(rec.diags(), " "); d != "polling_started status_checked" {
		t.Fatalf("diagnostics %q", d)
	}
	ref := rec.cursor().Ref
	for range 2 {
		if err := p.Cancel(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
	}
	st, err := p.Check(context.Background(), ref)
	if err != nil || st.State != provider.StateCancelled {
		t.Fatalf("after cancel: %+v %v", st, err)
	}
	// Resuming the cancelled response is a classified error, not a hang.
	err = p.Resume(context.Background(), req, rec.cursor(), rec.emit)
	if c := diagnostics.Classify(err).Class; c != diagnostics.ClassDeterministic && c != diagnostics.ClassDisconnect {
		t.Fatalf("resume of a cancelled response: %v", err)
	}
	if s.Stats().TokensGenerated != 0 {
		t.Fatal("a queued response generated tokens")
	}
}

func TestSimCheck(t *testing.T) {
	const tokens = 50
	s := startSim(t, sim.Config{Tokens: tokens, Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultCut, AfterEvents: tokens + 6},
	}})
	p := simProvider(t, s)
	var rec recorder
	req := simRequest("check me")
	req.ReasoningEffort = "low"
	err := p.Stream(context.Background(), req, rec.emit)
	if diagnostics.Classify(err).Class != diagnostics.ClassDisconnect {
		t.Fatalf("err %v", err)
	}
	ref := rec.cursor().Ref
	var st provider.Status
	deadline := time.Now().Add(5 * time.Second)
	for st.State != provider.StateCompleted && time.Now().Before(deadline) {
		if st, err = p.Check(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
	}
	if st.State != provider.StateCompleted || st.Output != want(req.Prompt, tokens) || st.Usage == nil || st.Usage.ReasoningTokens == 0 {
		t.Fatalf("status %+v", st)
	}
	// The same output, byte for byte, as the stream delivers.
	if err := p.Resume(context.Background(), req, rec.cursor(), rec.emit); err != nil {
		t.Fatal(err)
	}
	if rec.text() != st.Output {
		t.Fatalf("streamed %q, checked %q", rec.text(), st.Output)
	}
	var reasoning strings.Builder
	for _, ev := range rec.events() {
		if ev.Kind == provider.KindReasoning {
			reasoning.WriteString(ev.Text)
		}
	}
	if reasoning.String() != strings.Join(sim.ReasoningText("sim", req.Prompt, simSeed, "low"), "") {
		t.Fatalf("reasoning %q", reasoning.String())
	}
	if _, err := p.Check(context.Background(), "resp_missing"); diagnostics.Classify(err).Status != 404 {
		t.Fatalf("missing: %v", err)
	}
}

func TestSimHTTPErrors(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 5, Faults: []sim.Fault{
		{Endpoint: sim.EndpointResponsesCreate, Requests: []int{1}, Kind: sim.FaultStatus, Status: 401},
		{Endpoint: sim.EndpointResponsesCreate, Requests: []int{2}, Kind: sim.FaultStatus, Status: 429, RetryAfter: "3"},
		{Endpoint: sim.EndpointResponsesCreate, Requests: []int{3}, Kind: sim.FaultStatus, Status: 503},
	}})
	p := simProvider(t, s)
	for _, tt := range []struct {
		class diagnostics.Class
		code  int
		after time.Duration
	}{
		{diagnostics.ClassDeterministic, 401, 0},
		{diagnostics.ClassRateLimited, 429, 3 * time.Second},
		{diagnostics.ClassDisconnect, 503, 0},
	} {
		var rec recorder
		err := p.Stream(context.Background(), simRequest("x"), rec.emit)
		var de *diagnostics.Error
		if !errors.As(err, &de) || de.Class != tt.class || de.Status != tt.code || de.RetryAfter != tt.after || len(rec.events()) != 0 {
			t.Fatalf("%d: %#v %v", tt.code, de, err)
		}
	}
	if s.Stats().ResponsesCreated != 0 {
		t.Fatal("a refused request created a response")
	}
}

func TestSimOutage(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 5})
	p := simProvider(t, s)
	if err := s.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := p.Stream(context.Background(), simRequest("x"), func(provider.Event) error { return nil })
	if diagnostics.Classify(err).Class != diagnostics.ClassConnect {
		t.Fatalf("stream: %v", err)
	}
	err = p.Resume(context.Background(), simRequest("x"), provider.Cursor{Ref: "resp_x", Seq: 3}, func(provider.Event) error { return nil })
	if diagnostics.Classify(err).Class != diagnostics.ClassConnect {
		t.Fatalf("resume: %v", err)
	}
	if _, err := p.Check(context.Background(), "resp_x"); diagnostics.Classify(err).Class != diagnostics.ClassConnect {
		t.Fatalf("check: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("an outage did not fail fast")
	}
}

// Abort: the context ends the stream at once, and Cancel stops the response.
func TestSimAbortAndCancel(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 1000, TokensPerSecond: 100})
	p := simProvider(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var rec recorder
	n := 0
	err := p.Stream(ctx, simRequest("abort"), func(ev provider.Event) error {
		if ev.Kind == provider.KindDelta {
			if n++; n == 5 {
				cancel()
			}
		}
		return rec.emit(ev)
	})
	if diagnostics.Classify(err).Class != diagnostics.ClassCanceled {
		t.Fatalf("err %v", err)
	}
	ref := rec.cursor().Ref
	if err := p.Cancel(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	st, err := p.Check(context.Background(), ref)
	if err != nil || st.State != provider.StateCancelled {
		t.Fatalf("%+v %v", st, err)
	}
	generated := s.Stats().TokensGenerated
	time.Sleep(100 * time.Millisecond)
	if s.Stats().TokensGenerated != generated || generated >= 1000 {
		t.Fatalf("still generating after cancel: %d", s.Stats().TokensGenerated)
	}
}

// A long, paced response broken many times, on the create stream and on
// most re-attaches, by every kind of drop: byte-identical output, one
// response, no token generated twice.
func TestSimLongResponseManyDrops(t *testing.T) {
	const tokens = 800
	faults := []sim.Fault{{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultCut, AfterEvents: 1}}
	kinds := []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut}
	for i := 1; i <= 12; i++ {
		faults = append(faults, sim.Fault{Endpoint: sim.EndpointResponsesStream, Requests: []int{i}, Kind: kinds[i%3], AfterEvents: 23 * i % 120})
	}
	s := startSim(t, sim.Config{Tokens: tokens, TokensPerSecond: 2000, Faults: faults})
	p := simProvider(t, s)
	var rec recorder
	req := simRequest("a long answer")
	req.ReasoningEffort = "medium"
	resumes, err := drive(context.Background(), p, req, &rec)
	if err != nil {
		t.Fatalf("after %d resumes: %v", resumes, err)
	}
	checkStream(t, &rec)
	if rec.text() != want(req.Prompt, tokens) {
		t.Fatal("output differs")
	}
	checkOneResponse(t, s, tokens)
	t.Logf("diagnostics: %v", rec.diags())
	if resumes != 13 {
		t.Fatalf("%d resumes, want 13 (faults %v)", resumes, s.Stats().Faults)
	}
}
