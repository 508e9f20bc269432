package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

type result struct {
	out, reasoning string
	raws           []string
	usage          *provider.Usage
	err            error
}

func run(t *testing.T, f func(context.Context, provider.Emit) error) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r result
	var out, rs strings.Builder
	r.err = f(ctx, func(ev provider.Event) error {
		switch ev.Kind {
		case provider.KindDelta:
			out.WriteString(ev.Text)
		case provider.KindReasoning:
			rs.WriteString(ev.Text)
		case provider.KindRaw:
			r.raws = append(r.raws, string(ev.Raw))
		case provider.KindReset:
			out.Reset()
		case provider.KindDone:
			r.usage = ev.Usage
		}
		return nil
	})
	r.out, r.reasoning = out.String(), rs.String()
	return r
}

func stream(t *testing.T, p *Provider, req provider.Request) result {
	return run(t, func(ctx context.Context, emit provider.Emit) error { return p.Stream(ctx, req, emit) })
}

var req = provider.Request{Model: "claude-sonnet-4-5", System: "be brief", Prompt: "tell me about sockets"}

func want(model string, n int) string { return strings.Join(sim.Text(model, req.Prompt, 3, n), "") }

func TestStreamTextThinkingUsage(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	p := New(Config{BaseURL: srv.BaseURL(), APIKey: "k"})
	think := req
	think.ReasoningEffort = "low"
	r := stream(t, p, think)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.out != want(req.Model, 40) {
		t.Errorf("output %q, want the simulator's text", r.out)
	}
	if r.reasoning == "" || strings.Contains(r.out, r.reasoning) {
		t.Errorf("reasoning %q: want thinking apart from the output", r.reasoning)
	}
	if len(r.raws) != 1 || !strings.Contains(r.raws[0], `"signature":"sim-signature-`) {
		t.Errorf("raw events %q, want the thinking block's signature", r.raws)
	}
	u := r.usage
	if u == nil || u.OutputTokens != 40+sim.ThinkingTokens || u.ReasoningTokens == 0 || u.CacheWriteTokens == 0 || u.CacheReadTokens != 0 {
		t.Fatalf("usage %+v, want output with thinking, reasoning estimated, the system prompt written to the cache", u)
	}
	// the same system prompt again is read from the cache
	if r := stream(t, p, req); r.err != nil || r.usage.CacheReadTokens != u.CacheWriteTokens || r.usage.CacheWriteTokens != 0 {
		t.Fatalf("second request: usage %+v err %v, want the prompt read from the cache", r.usage, r.err)
	}
}

// The headers a real API needs, sent on every request.
func TestHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		if r.URL.Path != "/v1/messages" {
			t.Errorf("path %s", r.URL.Path)
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`))
	}))
	defer ts.Close()
	r := stream(t, New(Config{BaseURL: ts.URL, APIKey: "secret"}), req)
	h := <-got
	if h.Get("x-api-key") != "secret" || h.Get("anthropic-version") != Version || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
	if ce := diagnostics.Classify(r.err); ce.Class != diagnostics.ClassDeterministic || ce.Status != 400 || !strings.Contains(r.err.Error(), "invalid_request_error: bad") {
		t.Errorf("error %v, want a deterministic 400 naming the error type", r.err)
	}
}

// Every early end is a classified disconnect: never success without message_stop.
func TestEarlyEndIsADisconnect(t *testing.T) {
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut} {
		for _, after := range []int{0, 1, 5, 44} { // 44: after message_delta, before message_stop
			srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40, Faults: []sim.Fault{{Endpoint: sim.EndpointMessages, Kind: kind, AfterEvents: after}}})
			r := stream(t, New(Config{BaseURL: srv.BaseURL()}), req)
			if c := diagnostics.Classify(r.err).Class; r.err == nil || c != diagnostics.ClassDisconnect {
				t.Errorf("%s after %d: err %v (class %s), want a disconnect", kind, after, r.err, c)
			}
		}
	}
}

func TestErrorsClassified(t *testing.T) {
	for _, c := range []struct {
		fault  sim.Fault
		class  diagnostics.Class
		status int
		ra     time.Duration
	}{
		{sim.Fault{Kind: sim.FaultErrorEvent, Status: 529, AfterEvents: 5}, diagnostics.ClassServer, 529, 0},
		{sim.Fault{Kind: sim.FaultErrorEvent, Status: 500, AfterEvents: 5}, diagnostics.ClassServer, 500, 0},
		{sim.Fault{Kind: sim.FaultErrorEvent, Status: 400, AfterEvents: 5}, diagnostics.ClassDeterministic, 400, 0},
		{sim.Fault{Kind: sim.FaultStatus, Status: 529}, diagnostics.ClassServer, 529, 0},
		{sim.Fault{Kind: sim.FaultStatus, Status: 429, RetryAfter: "7"}, diagnostics.ClassRateLimited, 429, 7 * time.Second},
		{sim.Fault{Kind: sim.FaultStatus, Status: 401}, diagnostics.ClassDeterministic, 401, 0},
		{sim.Fault{Kind: sim.FaultStatus, Status: 403}, diagnostics.ClassDeterministic, 403, 0},
		{sim.Fault{Kind: sim.FaultStatus, Status: 404}, diagnostics.ClassDeterministic, 404, 0},
	} {
		srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40, Faults: []sim.Fault{c.fault}})
		r := stream(t, New(Config{BaseURL: srv.BaseURL()}), req)
		ce := diagnostics.Classify(r.err)
		if ce.Class != c.class || ce.Status != c.status || ce.RetryAfter != c.ra {
			t.Errorf("%s %d: got %v (class %s, status %d, retry-after %s)", c.fault.Kind, c.fault.Status, r.err, ce.Class, ce.Status, ce.RetryAfter)
		}
		if ce.Class.Transient() != (c.class != diagnostics.ClassDeterministic) {
			t.Errorf("%s %d: transient %v", c.fault.Kind, c.fault.Status, ce.Class.Transient())
		}
	}
}

func TestRateLimitResetHeaders(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("anthropic-ratelimit-tokens-remaining", "0")
	h.Set("anthropic-ratelimit-tokens-reset", now.Add(12*time.Second).Format(time.RFC3339))
	h.Set("anthropic-ratelimit-requests-remaining", "5")
	h.Set("anthropic-ratelimit-requests-reset", now.Add(time.Hour).Format(time.RFC3339))
	if d := rateLimitReset(h, now); d != 12*time.Second {
		t.Errorf("wait %s, want 12s (the spent limit's reset)", d)
	}
}

// A drop continued by prefill: nothing delivered comes again, the output is
// the uninterrupted one, byte for byte, whatever the cut point (trailing
// whitespace and characters cut short included).
func TestContinueByPrefill(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	full := want(req.Model, 40)
	p := New(Config{BaseURL: srv.BaseURL(), Continuation: provider.ContinuePrefill})
	if !p.Capabilities().Continue || !p.CanContinue(req) {
		t.Fatal("prefill not declared")
	}
	think := req
	think.ReasoningEffort = "high"
	if p.CanContinue(think) {
		t.Error("a request with extended thinking cannot be prefilled")
	}
	for at := 1; at < len(full); at++ { // every cut point: after a space, inside a word, inside a character
		before := srv.Stats().TokensGenerated
		have := full[:at]
		r := run(t, func(ctx context.Context, emit provider.Emit) error { return p.Continue(ctx, req, have, emit) })
		if r.err != nil {
			t.Fatalf("at %d: %v", at, r.err)
		}
		if have+r.out != full {
			t.Errorf("at %d: continued to %q, want %q", at, have+r.out, full)
		}
		if gen := srv.Stats().TokensGenerated - before; gen > 40 || at > len(full)/3 && gen >= 40 {
			t.Errorf("at %d: %d tokens generated, want only the rest", at, gen)
		}
	}
}

// A model that takes no prefill answers 400: the error says the form was
// rejected, and continuation is off for the adapter's life.
func TestPrefillRejected(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	p := New(Config{BaseURL: srv.BaseURL(), Continuation: provider.ContinuePrefill})
	r46 := req
	r46.Model = "claude-opus-4-6"
	r := run(t, func(ctx context.Context, emit provider.Emit) error { return p.Continue(ctx, r46, "Some", emit) })
	if !errors.Is(r.err, provider.ErrContinueRejected) || diagnostics.Classify(r.err).Status != 400 {
		t.Fatalf("err %v, want a rejected continuation (400)", r.err)
	}
	if !strings.Contains(r.err.Error(), "Prefilling assistant messages is not supported for this model") {
		t.Errorf("err %v does not quote the API's message", r.err)
	}
	if p.Capabilities().Continue {
		t.Error("continuation still declared after a rejection")
	}
}
