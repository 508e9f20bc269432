package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/resume"
)

// progressLog collects what Options.OnProgress is told.
type progressLog struct {
	mu sync.Mutex
	ps []Progress
}

func (l *progressLog) add(p Progress) { l.mu.Lock(); l.ps = append(l.ps, p); l.mu.Unlock() }

func (l *progressLog) all() []Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ps)
}

// states are the reports that are states (not data, not diagnostics).
func states(ps []Progress) []Progress {
	return slices.DeleteFunc(slices.Clone(ps), func(p Progress) bool {
		return p.State == ProgressData || p.State == ProgressDiagnostic
	})
}

func stateNames(ps []Progress) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.State.String())
	}
	return out
}

// Which states end a node, and their names.
func TestProgressStates(t *testing.T) {
	for _, c := range []struct {
		s     ProgressState
		name  string
		final bool
	}{
		{ProgressStreaming, "streaming", false},
		{ProgressRecovering, "recovering", false},
		{ProgressData, "data", false},
		{ProgressDiagnostic, "diagnostic", false},
		{ProgressDone, "done", true},
		{ProgressFailed, "failed", true},
		{ProgressSkipped, "skipped", true},
		{ProgressInterrupted, "interrupted", true},
		{ProgressAttention, "attention", true},
		{ProgressWaiting, "waiting", false},
		{0, "", false},
		{ProgressWaiting + 1, "ProgressState(11)", false},
	} {
		if c.s.String() != c.name || c.s.Final() != c.final {
			t.Errorf("%d: %q final %v, want %q final %v", c.s, c.s.String(), c.s.Final(), c.name, c.final)
		}
	}
}

// The step each decision reports, as data: its code (and so its means), its
// delay, its place in the budget it spends, the fault's class; and its line.
func TestRecoveryStepReport(t *testing.T) {
	prof := profile.Profile{Reconnects: 8}
	const class = diagnostics.ClassDisconnect
	for _, c := range []struct {
		name             string
		d                resume.Decision
		resumes, retries int // taken in a row, left (of 3)
		delay            time.Duration
		means            diagnostics.Means
		n, of            int
		line             string
	}{
		{"first reconnect", resume.Decision{Action: resume.ActResume, Code: diagnostics.ReconnectScheduled}, 0, 3, 1300 * time.Millisecond,
			diagnostics.ByReconnect, 1, 8, "reconnecting 1/8 in 1.3s (transport_disconnect)"},
		{"third reconnect in a row", resume.Decision{Action: resume.ActResume, Code: diagnostics.ReconnectScheduled}, 2, 1, 5 * time.Millisecond,
			diagnostics.ByReconnect, 3, 8, "reconnecting 3/8 in 5ms (transport_disconnect)"},
		{"continue", resume.Decision{Action: resume.ActContinue, Code: diagnostics.ContinueScheduled}, 1, 3, 574 * time.Millisecond,
			diagnostics.ByContinue, 2, 8, "continuing from byte 235, 2/8 in 574ms (transport_disconnect)"},
		{"first retry", resume.Decision{Action: resume.ActRetry, Code: diagnostics.RetryStarted}, 4, 3, 0,
			diagnostics.ByRetry, 1, 3, "retrying 1/3 in 0s (transport_disconnect)"},
		{"last retry, after a failed resume", resume.Decision{Action: resume.ActRetry, Code: diagnostics.FellBackToRetry}, 8, 1, 2 * time.Second,
			diagnostics.ByRetry, 3, 3, "retrying 3/3 in 2s (transport_disconnect)"},
		{"retry after a rejected continue", resume.Decision{Action: resume.ActRetry, Code: diagnostics.ContinueRejected}, 0, 2, time.Millisecond,
			diagnostics.ByRetry, 2, 3, "retrying 2/3 in 1ms (transport_disconnect)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := &nodeExec{prof: prof, total: 3, retries: c.retries, resumes: c.resumes}
			s := x.step(c.d, class, c.delay)
			want := RecoveryStep{Code: c.d.Code, Class: class, Delay: c.delay, N: c.n, Of: c.of}
			if s != want || s.Code.Means != c.means {
				t.Errorf("step %+v, want %+v by %s", s, want, c.means)
			}
			if got := s.line(235); got != c.line {
				t.Errorf("line %q, want %q", got, c.line)
			}
		})
	}
}

// A step travels in a Temporal heartbeat as JSON, its code by ID; a code
// this build does not know keeps its ID and does not lose the cursor.
func TestRecoveryStepJSON(t *testing.T) {
	s := RecoveryStep{Code: diagnostics.ContinueScheduled, Class: diagnostics.ClassServer, Delay: 1500 * time.Millisecond, N: 2, Of: 8}
	b, err := json.Marshal(NodeCursor{Ref: "resp_1", Seq: 7, Step: s.line(10), Recovery: &s})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"recovery":{"code":"NR110","class":"server_error","delay":1500000000,"n":2,"of":8}`) {
		t.Errorf("cursor JSON %s", b)
	}
	var c NodeCursor
	if err := json.Unmarshal(b, &c); err != nil || c.Recovery == nil || *c.Recovery != s {
		t.Fatalf("decoded %+v, %v; want %+v", c.Recovery, err, s)
	}
	if err := json.Unmarshal([]byte(`{"seq":3,"recovery":{"code":"NR999","n":1,"of":2}}`), &c); err != nil ||
		c.Seq != 3 || c.Recovery.Code.ID != "NR999" || c.Recovery.N != 1 {
		t.Errorf("an unknown code: %+v %+v, %v", c, c.Recovery, err)
	}
	b, _ = json.Marshal(NodeCursor{Seq: -1})
	if strings.Contains(string(b), "recovery") {
		t.Errorf("a healthy cursor carries a step: %s", b)
	}
}

// A retried node reports its states with their attempts, the retry as data,
// every diagnostic with its code, and its figures as they grow: throttled,
// and complete when it ends.
func TestOnProgress(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	const tokens = 1000
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: tokens, TokensPerSecond: 5000,
		Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultReset, AfterEvents: 300}}})
	g := chatGraph(t, srv.BaseURL(), "a")
	var log progressLog
	start := time.Now()
	res, err := Run(context.Background(), g, Options{Journal: openJournal(t), OnProgress: log.add})
	took := time.Since(start)
	if err != nil || res.Status != journal.RunCompleted {
		t.Fatalf("run: %v %v", res, err)
	}
	out := res.Nodes[0].Output
	got := log.all()
	var diags []string
	for i, p := range got {
		if p.Node != "a" {
			t.Errorf("progress for node %q", p.Node)
		}
		if i > 0 && p.Time.Before(got[i-1].Time) {
			t.Errorf("report %d at %s, before the one before it", i, p.Time)
		}
		if p.State == ProgressDiagnostic {
			if p.Code.ID == "" || p.Text == "" {
				t.Errorf("a diagnostic without code or message: %+v", p)
			}
			diags = append(diags, p.Code.String())
		}
	}
	st := states(got)
	var attempts []int
	for _, p := range st {
		attempts = append(attempts, p.Attempt)
	}
	if want := []string{"streaming", "recovering", "streaming", "done"}; !slices.Equal(stateNames(st), want) {
		t.Fatalf("states %v, want %v", stateNames(st), want)
	}
	if want := []int{1, 1, 2, 2}; !slices.Equal(attempts, want) {
		t.Errorf("attempts %v, want %v", attempts, want)
	}
	step := st[1].Step
	if step.Code != diagnostics.RetryStarted || step.Code.Means != diagnostics.ByRetry || step.N != 1 || step.Of != 3 ||
		step.Class != diagnostics.ClassDisconnect || step.Delay > 50*time.Millisecond || !strings.HasPrefix(st[1].Text, "retrying 1/3 in ") {
		t.Errorf("the retry reported as %+v %q", step, st[1].Text)
	}
	if st[1].Bytes == 0 || st[1].Bytes >= len(out) {
		t.Errorf("the retry reported %d bytes streamed of %d", st[1].Bytes, len(out))
	}
	for _, c := range []diagnostics.Code{diagnostics.DisconnectDetected, diagnostics.RetryStarted, diagnostics.Recovered} {
		if !slices.Contains(diags, c.String()) {
			t.Errorf("diagnostics %v lack %s", diags, c)
		}
	}
	if done := st[3]; done.Bytes != len(out) || done.Tokens < tokens/2 || done.LastData.IsZero() || done.Text != fmt.Sprintf("done (%d bytes)", len(out)) {
		t.Errorf("done reported %d bytes of %d, %d tokens, last data %s: %q", done.Bytes, len(out), done.Tokens, done.LastData, done.Text)
	}
	// Data reports come at most every dataEvery of the stream's own time,
	// but for the last of an attempt, which completes its figures.
	var data []Progress
	for i, p := range got {
		if p.State != ProgressData {
			continue
		}
		last := !slices.ContainsFunc(got[i+1:], func(q Progress) bool { return q.State == ProgressData && q.Attempt == p.Attempt })
		if n := len(data); n > 0 && data[n-1].Attempt == p.Attempt && !last {
			if gap := p.LastData.Sub(data[n-1].LastData); gap < dataEvery {
				t.Errorf("data reports %s apart", gap)
			}
			if p.Bytes < data[n-1].Bytes || p.Tokens < data[n-1].Tokens {
				t.Errorf("figures went down: %d bytes %d tokens after %d, %d", p.Bytes, p.Tokens, data[n-1].Bytes, data[n-1].Tokens)
			}
		}
		data = append(data, p)
	}
	// one a dataEvery, and a first and a last one per attempt
	if most := int(took/dataEvery) + 2*2; len(data) == 0 || len(data) > most {
		t.Errorf("%d data reports in %s, want 1 to %d", len(data), took, most)
	}
}

// A continued chat answer is one attempt: the continue is reported as a
// recovery step (its code, its place in the reconnect budget, the byte it
// continues from), and the node ends once, done.
func TestOnProgressContinue(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens})
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Times: 1, Kind: sim.FaultClose, AfterEvents: 1 + contTokens/2})
	var log progressLog
	res, err := Run(context.Background(), contGraph(t, srv.BaseURL(), "prefix", "c", ""), Options{Journal: openJournal(t), OnProgress: log.add})
	if err != nil || res.Status != journal.RunCompleted {
		t.Fatalf("run: %v %v", res, err)
	}
	st := states(log.all())
	if want := []string{"streaming", "recovering", "done"}; !slices.Equal(stateNames(st), want) {
		t.Fatalf("states %v, want %v", stateNames(st), want)
	}
	rec := st[1]
	if s := rec.Step; s.Code != diagnostics.ContinueScheduled || s.Code.Means != diagnostics.ByContinue || s.N != 1 || s.Of != 8 ||
		s.Class != diagnostics.ClassDisconnect || rec.Attempt != 1 {
		t.Errorf("the continue reported as %+v (attempt %d)", s, rec.Attempt)
	}
	if want := fmt.Sprintf("continuing from byte %d, 1/8 in ", rec.Bytes); rec.Bytes == 0 || !strings.HasPrefix(rec.Text, want) {
		t.Errorf("the continue from byte %d says %q", rec.Bytes, rec.Text)
	}
	if done := st[2]; done.Attempt != 1 || done.Bytes != len(res.Nodes[0].Output) {
		t.Errorf("done: attempt %d, %d bytes of %d", done.Attempt, done.Bytes, len(res.Nodes[0].Output))
	}
}

// A silent Responses stream that the adapter polls reports each poll that
// finds the work alive at once, while the time of its last data stands.
func TestOnProgressPolls(t *testing.T) {
	testkit.ParallelIfShort(t) // serial under -race: see ParallelIfShort
	silence := ciProfile().IdleTimeout.D() + time.Second
	srv := simtest.Start(t, sim.Config{Seed: respSeed, Tokens: 50, TokensPerSecond: 2000, Silence: silence, Keepalive: 200 * time.Millisecond})
	var log progressLog
	res, err := Run(context.Background(), responsesGraph(t, srv.BaseURL(), ""), Options{Journal: openJournal(t), OnProgress: log.add})
	if err != nil || res.Status != journal.RunCompleted {
		t.Fatalf("run: %v %v", res, err)
	}
	var polls []Progress
	var prev time.Time
	for _, p := range log.all() {
		if p.State == ProgressData && !p.LastPoll.Equal(prev) {
			polls = append(polls, p)
			prev = p.LastPoll
		}
	}
	if len(polls) < 2 {
		t.Fatalf("%d poll reports over a silence of %s", len(polls), silence)
	}
	for _, p := range polls {
		if lag := p.Time.Sub(p.LastPoll); lag < 0 || lag >= dataEvery {
			t.Errorf("a poll reported %s after it", lag)
		}
		if !p.LastData.Equal(polls[0].LastData) {
			t.Errorf("data during the silence: last data %s, then %s", polls[0].LastData, p.LastData)
		}
	}
}

// With a progress callback, a chunk still costs no allocation of the
// runner's own, and the callback is called a few times, not per chunk.
func TestChunkPathWithProgressDoesNotAllocatePerChunk(t *testing.T) {
	const n = 100_000
	var reports atomic.Int64
	run := chunkRun(t, n, func(Progress) { reports.Add(1) })
	run()
	if r := reports.Load(); r > n/100 {
		t.Errorf("%d progress reports for %d chunks", r, n)
	}
	if allocs := testing.AllocsPerRun(3, run); allocs > n/20 {
		t.Errorf("a %d-chunk stream through Run with OnProgress allocated %.0f times: one allocation or more a chunk", n, allocs)
	}
}

// BenchmarkChunkPathWithProgress is BenchmarkChunkPath with a callback set.
func BenchmarkChunkPathWithProgress(b *testing.B) {
	var reports atomic.Int64
	benchChunks(b, func(Progress) { reports.Add(1) })
}
