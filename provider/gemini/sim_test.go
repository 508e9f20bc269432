package gemini

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Recovery scenarios over real sockets against the simulator (127.0.0.1),
// with the real adapter: every drop is a real cut, reset or close.

const simSeed = 42

func ciPolicy() profile.Profile { return profile.Builtins()["ci"] }

func startSim(t *testing.T, cfg sim.Config) *sim.Server {
	t.Helper()
	cfg.Seed = simSeed
	return simtest.Start(t, cfg)
}

func simProvider(t *testing.T, s *sim.Server) *Provider {
	t.Helper()
	p, err := New(Config{BaseURL: "http://" + s.Addr(), APIKey: "sim-key"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(); p.hc.CloseIdleConnections() })
	return p
}

func simRequest(prompt string) provider.Request {
	return provider.Request{Node: "n", Model: "sim", System: "be brief", Prompt: prompt, Policy: ciPolicy()}
}

func want(prompt string, tokens int) string {
	return strings.Join(sim.Text("sim", prompt, simSeed, tokens), "")
}

// recorder collects emitted events; safe for the race detector.
type recorder struct {
	mu  sync.Mutex
	evs []provider.Event
}

func (r *recorder) emit(ev provider.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	return nil
}

func (r *recorder) events() []provider.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]provider.Event(nil), r.evs...)
}

func (r *recorder) text(k provider.Kind) string {
	var b strings.Builder
	for _, ev := range r.events() {
		switch ev.Kind {
		case provider.KindReset:
			b.Reset()
		case k:
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r *recorder) kinds() string {
	var ks []string
	for _, ev := range r.events() {
		k := string(ev.Kind)
		if ev.Kind == provider.KindDiagnostic {
			k += ":" + ev.Diag.Code.Name
		}
		ks = append(ks, fmt.Sprintf("%s@%d", k, ev.Seq))
	}
	return strings.Join(ks, " ")
}

func (r *recorder) diags() []string {
	var out []string
	for _, ev := range r.events() {
		if ev.Kind == provider.KindDiagnostic {
			out = append(out, ev.Diag.Code.Name+": "+ev.Diag.Message)
		}
	}
	return out
}

// cursor is where the recorded stream stands, as the journal would have it.
func (r *recorder) cursor() provider.Cursor {
	cur := provider.Cursor{Seq: -1}
	for _, ev := range r.events() {
		if ev.Kind == provider.KindRef {
			cur.Ref = ev.Ref
		}
		if ev.Seq > cur.Seq {
			cur.Seq = ev.Seq
		}
	}
	return cur
}

// journaled is cursor with the last mark recorded, as `noderun resume`
// reads both from the journal.
func (r *recorder) journaled() provider.Cursor {
	cur := r.cursor()
	for _, ev := range r.events() {
		if ev.Kind == provider.KindMark && ev.Mark != nil && ev.Mark.Seq <= cur.Seq {
			m := *ev.Mark
			cur.Mark = &m
		}
	}
	return cur
}

// drive stands in for the executor's recovery loop: Stream, then Resume from
// the cursor after every disconnect. resumeWith, if set, gives the provider
// of each re-attach (a fresh one plays a new process).
func drive(ctx context.Context, p *Provider, req provider.Request, rec *recorder, resumeWith func() *Provider) (resumes int, err error) {
	err = p.Stream(ctx, req, rec.emit)
	for ; err != nil && resumes < 20; resumes++ {
		if c := diagnostics.Classify(err).Class; c != diagnostics.ClassDisconnect {
			return resumes, err
		}
		cur := rec.cursor()
		if cur.Ref == "" {
			return resumes, fmt.Errorf("no interaction id to resume: %w", err)
		}
		rp := p
		if resumeWith != nil {
			rp = resumeWith()
		}
		err = rp.Resume(ctx, req, cur, rec.emit)
	}
	return resumes, err
}

// checkStream: KindRef first, strictly increasing Seq, KindDone last.
func checkStream(t *testing.T, rec *recorder) {
	t.Helper()
	evs := rec.events()
	if len(evs) == 0 || evs[0].Kind != provider.KindRef || evs[0].Ref == "" {
		t.Fatalf("first event is not KindRef: %s", rec.kinds())
	}
	last := int64(-1)
	for i, ev := range evs {
		if ev.Seq == -1 {
			continue
		}
		if ev.Seq <= last {
			t.Fatalf("event %d (%s) seq %d after %d: %s", i, ev.Kind, ev.Seq, last, rec.kinds())
		}
		last = ev.Seq
	}
	if evs[len(evs)-1].Kind != provider.KindDone {
		t.Fatalf("last event is not KindDone: %s", rec.kinds())
	}
}

func TestStreamCompletes(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 40})
	p := simProvider(t, s)
	rec := &recorder{}
	if err := p.Stream(t.Context(), simRequest("hello"), rec.emit); err != nil {
		t.Fatal(err, rec.kinds())
	}
	checkStream(t, rec)
	if got, w := rec.text(provider.KindDelta), want("hello", 40); got != w {
		t.Fatalf("output %q, want %q", got, w)
	}
	st := s.Stats()
	if st.InteractionsCreated != 1 || st.TokensGenerated != 40 {
		t.Fatalf("stats: %d interactions, %d tokens", st.InteractionsCreated, st.TokensGenerated)
	}
	done := rec.events()[len(rec.events())-1]
	if done.Usage == nil || done.Usage.OutputTokens != 40 {
		t.Fatalf("usage %+v", done.Usage)
	}
}

// TestDropsReattachByEventID: three drops of different kinds at different
// points (the create stream, then two resumed streams) end in the same
// output, one interaction and no token generated twice; each re-attach
// resumes after the last event_id seen.
func TestDropsReattachByEventID(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 60, TokensPerSecond: 2000})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultCut, AfterEvents: 7, Times: 1})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsStream, Kind: sim.FaultReset, AfterEvents: 15, Times: 1})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsStream, Kind: sim.FaultClose, AfterEvents: 20, Times: 1})
	p := simProvider(t, s)
	rec := &recorder{}
	resumes, err := drive(t.Context(), p, simRequest("drops"), rec, nil)
	if err != nil {
		t.Fatal(err, rec.kinds())
	}
	checkStream(t, rec)
	if resumes != 3 {
		t.Fatalf("%d resumes, want 3", resumes)
	}
	if got, w := rec.text(provider.KindDelta), want("drops", 60); got != w {
		t.Fatalf("output %q\nwant %q", got, w)
	}
	st := s.Stats()
	if st.InteractionsCreated != 1 || st.TokensGenerated != 60 {
		t.Fatalf("stats: %d interactions, %d tokens generated (want 1, 60)", st.InteractionsCreated, st.TokensGenerated)
	}
	n := 0
	for _, d := range rec.diags() {
		if strings.HasPrefix(d, diagnostics.Reattached.Name) {
			n++
			if !strings.Contains(d, "event_id") {
				t.Errorf("re-attach without last_event_id: %s", d)
			}
		}
	}
	if n != 3 {
		t.Fatalf("%d re-attach diagnostics, want 3: %v", n, rec.diags())
	}
}

// TestReattachFromAnotherProcess: a provider that never saw the
// interaction (a resumed run, another worker) has no event_id; it streams
// from the start and drops the events up to the cursor.
func TestReattachFromAnotherProcess(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 50, TokensPerSecond: 2000})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultReset, AfterEvents: 12, Times: 1})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsStream, Kind: sim.FaultCut, AfterEvents: 30, Times: 1})
	p := simProvider(t, s)
	rec := &recorder{}
	resumes, err := drive(t.Context(), p, simRequest("elsewhere"), rec, func() *Provider { return simProvider(t, s) })
	if err != nil {
		t.Fatal(err, rec.kinds())
	}
	checkStream(t, rec)
	if resumes != 2 {
		t.Fatalf("%d resumes", resumes)
	}
	if got, w := rec.text(provider.KindDelta), want("elsewhere", 50); got != w {
		t.Fatalf("output %q\nwant %q", got, w)
	}
	if st := s.Stats(); st.InteractionsCreated != 1 || st.TokensGenerated != 50 {
		t.Fatalf("stats: %+v", st)
	}
	for _, d := range rec.diags() {
		if strings.HasPrefix(d, diagnostics.Reattached.Name) && !strings.Contains(d, "from the start") {
			t.Errorf("a fresh provider re-attached with an event_id it cannot know: %s", d)
		}
	}
}

// TestReattachAfterAJournaledMark: a process that never saw the interaction
// but has the journal's mark (an event_id the first process handed it)
// re-attaches after that event, not from the start; the output is the same.
func TestReattachAfterAJournaledMark(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 50, TokensPerSecond: 2000})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultCut, AfterEvents: 30, Times: 1})
	rec := &recorder{}
	req := simRequest("marked")
	err := simProvider(t, s).Stream(t.Context(), req, rec.emit)
	if diagnostics.Classify(err).Class != diagnostics.ClassDisconnect {
		t.Fatalf("stream: %v, want a disconnect", err)
	}
	cur := rec.journaled()
	if cur.Mark == nil || cur.Mark.Token == "" || cur.Mark.Seq > cur.Seq {
		t.Fatalf("no mark at or before the cursor: %+v", cur)
	}
	if err := simProvider(t, s).Resume(t.Context(), req, cur, rec.emit); err != nil {
		t.Fatal(err)
	}
	checkStream(t, rec)
	if got, w := rec.text(provider.KindDelta), want("marked", 50); got != w {
		t.Fatalf("output %q\nwant %q", got, w)
	}
	from := fmt.Sprintf("from event %d (event_id %s)", cur.Mark.Seq, cur.Mark.Token)
	if d := rec.diags(); len(d) == 0 || !strings.Contains(strings.Join(d, "\n"), from) {
		t.Errorf("the re-attach did not go on after the mark (%s):\n%s", from, strings.Join(d, "\n"))
	}
	if st := s.Stats(); st.InteractionsCreated != 1 || st.TokensGenerated != 50 {
		t.Fatalf("stats: %+v", st)
	}
}

// TestThoughtsAreReasoning: thought summaries are KindReasoning, never
// output; the thought signature is progress.
func TestThoughtsAreReasoning(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 20})
	p := simProvider(t, s)
	req := simRequest("think")
	req.ReasoningEffort = "high"
	rec := &recorder{}
	if err := p.Stream(t.Context(), req, rec.emit); err != nil {
		t.Fatal(err)
	}
	checkStream(t, rec)
	thoughts := strings.Join(sim.ReasoningText("sim", "think", simSeed, "high"), "")
	if got := rec.text(provider.KindReasoning); got != thoughts || got == "" {
		t.Fatalf("reasoning %q, want %q", got, thoughts)
	}
	if got := rec.text(provider.KindDelta); got != want("think", 20) {
		t.Fatalf("output %q", got)
	}
	st, err := p.Check(t.Context(), rec.cursor().Ref)
	if err != nil || st.State != provider.StateCompleted || st.Output != want("think", 20) {
		t.Fatalf("check: %+v %v", st, err)
	}
}

// TestSilencePolls: a silence past the idle window lets the stream go and
// polls the status (in progress is alive), then re-attaches.
func TestSilencePolls(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 10})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultSilence, AfterEvents: 5, Duration: 1500 * time.Millisecond, Times: 1})
	p := simProvider(t, s)
	rec := &recorder{}
	if _, err := drive(t.Context(), p, simRequest("quiet"), rec, nil); err != nil {
		t.Fatal(err, rec.kinds())
	}
	checkStream(t, rec)
	if got := rec.text(provider.KindDelta); got != want("quiet", 10) {
		t.Fatalf("output %q", got)
	}
	joined := strings.Join(rec.diags(), "\n")
	if !strings.Contains(joined, diagnostics.PollingStarted.Name) || !strings.Contains(joined, diagnostics.Reattached.Name) {
		t.Fatalf("no polling then re-attach: %s", joined)
	}
	if st := s.Stats(); st.Requests[sim.EndpointInteractionsGet] == 0 {
		t.Fatalf("no status poll: %v", st.Requests)
	}
}

// TestHTTPErrorsClassified: 401/403/400/404 deterministic, 429 rate limited
// with its Retry-After, 500 server error, 503 a disconnect.
func TestHTTPErrorsClassified(t *testing.T) {
	for _, tc := range []struct {
		status int
		class  diagnostics.Class
	}{
		{400, diagnostics.ClassDeterministic}, {401, diagnostics.ClassDeterministic}, {403, diagnostics.ClassDeterministic},
		{404, diagnostics.ClassDeterministic}, {429, diagnostics.ClassRateLimited}, {500, diagnostics.ClassServer},
		{503, diagnostics.ClassDisconnect},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			s := startSim(t, sim.Config{Tokens: 5})
			f := sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultStatus, Status: tc.status, Times: 1}
			if tc.status == 429 {
				f.RetryAfter = "7"
			}
			s.AddFault(f)
			p := simProvider(t, s)
			err := p.Stream(t.Context(), simRequest("x"), (&recorder{}).emit)
			ce := diagnostics.Classify(err)
			if ce.Class != tc.class || ce.Status != tc.status {
				t.Fatalf("class %s status %d, want %s %d: %v", ce.Class, ce.Status, tc.class, tc.status, err)
			}
			if tc.status == 429 && ce.RetryAfter != 7*time.Second {
				t.Fatalf("retry after %s", ce.RetryAfter)
			}
			if s.Stats().InteractionsCreated != 0 {
				t.Fatal("a refused create created an interaction")
			}
		})
	}
}

// TestCancel: a cancelled interaction is checked cancelled, and a stream
// that sees it ends deterministically after a status check.
func TestCancel(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 1000, TokensPerSecond: 50})
	p := simProvider(t, s)
	ctx, stop := context.WithCancel(t.Context())
	rec := &recorder{}
	errc := make(chan error, 1)
	go func() { errc <- p.Stream(ctx, simRequest("long"), rec.emit) }()
	var ref string
	for ref == "" {
		time.Sleep(10 * time.Millisecond)
		ref = rec.cursor().Ref
	}
	if err := p.Cancel(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if err := p.Cancel(t.Context(), ref); err != nil {
		t.Fatalf("cancel is not idempotent: %v", err)
	}
	st, err := p.Check(t.Context(), ref)
	if err != nil || st.State != provider.StateCancelled {
		t.Fatalf("check after cancel: %+v %v", st, err)
	}
	err = <-errc
	stop()
	if err == nil {
		t.Fatal("a cancelled interaction streamed to completion")
	}
	if err := p.Cancel(t.Context(), "v1_nope"); diagnostics.Classify(err).Class != diagnostics.ClassDeterministic {
		t.Fatalf("cancel of an unknown interaction: %v", err)
	}
}

// TestAgentRequest: a provider agent is sent instead of the model.
func TestAgentRequest(t *testing.T) {
	p, err := New(Config{Agent: "deep-research-pro-preview-12-2025"})
	if err != nil {
		t.Fatal(err)
	}
	b := p.body(provider.Request{Model: "gemini-3-pro", Prompt: "x"})
	if b.Agent != "deep-research-pro-preview-12-2025" || b.Model != "" || !b.Background || !b.Stream {
		t.Fatalf("%+v", b)
	}
	p2, _ := New(Config{})
	b = p2.body(provider.Request{Model: "gemini-3-pro", Agent: "a1", Prompt: "x"})
	if b.Agent != "a1" || b.Model != "" {
		t.Fatalf("node agent: %+v", b)
	}
	b = p2.body(provider.Request{Model: "gemini-3-pro", Prompt: "x"})
	if b.Model != "gemini-3-pro" || b.Agent != "" {
		t.Fatalf("model: %+v", b)
	}
	if p.base != DefaultBaseURL+"/v1beta" {
		t.Fatal(p.base)
	}
}

// Issue 43: after a crash the journal's cursor can be behind its newest mark:
// progress events (a thought signature, a step's stop) carry event_ids and
// advance the stream, but only data events are journaled with their
// ordinal, and a mark is journaled after the data before it. A process
// resuming from the journal goes on after the newest mark whatever the
// cursor (nothing between them was data), not from the first event.
func TestReattachAfterAMarkPastTheCursor(t *testing.T) {
	for after := 3; after <= 40; after++ {
		s := startSim(t, sim.Config{Tokens: 30, TokensPerSecond: 3000})
		s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultCut, AfterEvents: after, Times: 1})
		rec := &recorder{}
		req := simRequest("marked")
		req.ReasoningEffort = "low"
		err := simProvider(t, s).Stream(t.Context(), req, rec.emit)
		if diagnostics.Classify(err).Class != diagnostics.ClassDisconnect {
			t.Fatalf("stream: %v, want a disconnect", err)
		}
		// As the journal has it: the cursor is the last data event's
		// ordinal, the mark the newest journaled.
		cur := provider.Cursor{Seq: -1}
		for _, ev := range rec.events() {
			switch ev.Kind {
			case provider.KindRef:
				cur.Ref = ev.Ref
			case provider.KindDelta, provider.KindReasoning:
				cur.Seq = max(cur.Seq, ev.Seq)
			case provider.KindMark:
				m := *ev.Mark
				cur.Mark = &m
			}
		}
		if cur.Ref == "" || cur.Mark == nil || cur.Mark.Seq <= cur.Seq {
			continue // not the case this test is about
		}
		if err := simProvider(t, s).Resume(t.Context(), req, cur, rec.emit); err != nil {
			t.Fatal(err)
		}
		if got, w := rec.text(provider.KindDelta), want("marked", 30); got != w {
			t.Fatalf("cut after %d events: output %q\nwant %q", after, got, w)
		}
		from := fmt.Sprintf("from event %d (event_id %s)", cur.Mark.Seq, cur.Mark.Token)
		if d := rec.diags(); !strings.Contains(strings.Join(d, "\n"), from) {
			t.Fatalf("cut after %d events: the re-attach did not go on after the mark past the cursor %d (%s):\n%s", after, cur.Seq, from, strings.Join(d, "\n"))
		}
		return
	}
	t.Fatal("no cut left the journal's mark past its cursor: this test tests nothing")
}

// A base URL ending in an API version is used as is (the @google/genai SDK
// addresses v1 by default); any other gets /v1beta, the reference's. Over a
// real socket, a base ending in /v1 sends every request below /v1.
func TestBaseURLVersion(t *testing.T) {
	for base, want := range map[string]string{
		"https://g.example":           "https://g.example/v1beta",
		"https://g.example/":          "https://g.example/v1beta",
		"https://g.example/v1":        "https://g.example/v1",
		"https://g.example/v1alpha/":  "https://g.example/v1alpha",
		"https://g.example/v1beta1":   "https://g.example/v1beta1",
		"https://g.example/proxy":     "https://g.example/proxy/v1beta",
		"https://g.example/proxy/v1":  "https://g.example/proxy/v1",
		"https://g.example/version1":  "https://g.example/version1/v1beta",
		"https://g.example/v1/gemini": "https://g.example/v1/gemini/v1beta",
	} {
		p, err := New(Config{BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		if p.base != want {
			t.Errorf("base %q: requests below %q, want %q", base, p.base, want)
		}
		_ = p.Close()
	}

	s := startSim(t, sim.Config{Tokens: 30, TokensPerSecond: 2000})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointInteractionsCreate, Kind: sim.FaultCut, AfterEvents: 6, Times: 1})
	target, err := url.Parse("http://" + s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		paths []string
	)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	p, err := New(Config{BaseURL: front.URL + "/v1", APIKey: "sim-key"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rec := &recorder{}
	if _, err := drive(t.Context(), p, simRequest("v1"), rec, nil); err != nil {
		t.Fatal(err, rec.kinds())
	}
	if got, w := rec.text(provider.KindDelta), want("v1", 30); got != w {
		t.Fatalf("output %q, want %q", got, w)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) < 2 {
		t.Fatalf("paths %v: want the create and a re-attach", paths)
	}
	for _, path := range paths {
		if !strings.Contains(path, " /v1/interactions") {
			t.Errorf("request %s, not below /v1", path)
		}
	}
}
