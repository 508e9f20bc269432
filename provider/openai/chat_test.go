package openai

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// collect streams one request and returns the output, the events and the error.
func collect(t *testing.T, p *Provider, req provider.Request) (string, []provider.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	var evs []provider.Event
	err := p.Stream(ctx, req, func(ev provider.Event) error {
		evs = append(evs, ev)
		if ev.Kind == provider.KindDelta {
			out.WriteString(ev.Text)
		}
		return nil
	})
	return out.String(), evs, err
}

var req = provider.Request{Model: "sim", System: "be brief", Prompt: "tell me about sockets"}

func TestStreamCompletesOnTerminalEvidence(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 50})
	out, evs, err := collect(t, New(Config{BaseURL: srv.BaseURL()}), req)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(sim.Text("sim", "tell me about sockets", 3, 50), "")
	if out != want {
		t.Errorf("output %q, want the simulator's text %q", out, want)
	}
	last := evs[len(evs)-1]
	if last.Kind != provider.KindDone || last.Usage == nil || last.Usage.OutputTokens != 50 {
		t.Errorf("last event %+v, want done with usage of 50 tokens", last)
	}
}

// Each way a stream can end early is a classified disconnect, never success.
func TestStreamEndingWithoutTerminalEvidenceIsADisconnect(t *testing.T) {
	for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut} {
		for _, after := range []int{0, 5, 51, 52} { // 51: after the finish_reason chunk; 52: after usage, before [DONE]
			srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 50, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: kind, AfterEvents: after}}})
			_, evs, err := collect(t, New(Config{BaseURL: srv.BaseURL()}), req)
			if err == nil {
				t.Fatalf("%s after %d: stream reported success", kind, after)
			}
			if c := diagnostics.Classify(err).Class; c != diagnostics.ClassDisconnect {
				t.Errorf("%s after %d: class %s (%v), want transport_disconnect", kind, after, c, err)
			}
			for _, ev := range evs {
				if ev.Kind == provider.KindDone {
					t.Errorf("%s after %d: done emitted without terminal evidence", kind, after)
				}
			}
			if kind == sim.FaultClose && !errors.Is(err, diagnostics.ErrDisconnected) {
				t.Errorf("clean close: %v does not wrap ErrDisconnected", err)
			}
		}
	}
}

// A delta is stamped with when its bytes arrived (the read of the body that
// brought them), not with the time of an earlier read: after each silence
// the stamps move on by at least the silence, and no stamp is later than the
// moment the delta was emitted.
func TestDeltasAreStampedOnArrival(t *testing.T) {
	const silence = 300 * time.Millisecond
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 12, Silence: silence, BurstTokens: 4})
	var stamps, seen []time.Time
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := New(Config{BaseURL: srv.BaseURL()}).Stream(ctx, req, func(ev provider.Event) error {
		if ev.Kind == provider.KindDelta {
			stamps, seen = append(stamps, ev.Time), append(seen, time.Now())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stamps) != 12 {
		t.Fatalf("%d deltas, want 12", len(stamps))
	}
	for i, at := range stamps {
		if at.Before(start) || at.After(seen[i]) {
			t.Errorf("delta %d stamped %v, outside [request sent, emitted] = [%v, %v]", i, at, start, seen[i])
		}
		// Tokens 4, 8 and 12 start a burst after a silence (the first one
		// after the reasoning silence before any output).
		if i > 0 && i%4 == 0 && at.Sub(stamps[i-1]) < silence*9/10 {
			t.Errorf("delta %d stamped %v after delta %d, across a silence of %v: stamped with an earlier read's time", i, at.Sub(stamps[i-1]), i-1, silence)
		}
	}
}

// A quiet reasoning model sends keepalive comments; thousands of them in one
// Recv must not trip go-openai's ErrTooManyEmptyStreamMessages.
func TestKeepaliveHeavyStream(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 20, Silence: 1500 * time.Millisecond, Keepalive: time.Millisecond})
	out, _, err := collect(t, New(Config{BaseURL: srv.BaseURL()}), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(sim.Text("sim", "tell me about sockets", 3, 20), ""); out != want {
		t.Errorf("output differs")
	}
}

func TestHTTPErrorsAreClassified(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		class      diagnostics.Class
		wait       time.Duration
	}{
		{401, "", diagnostics.ClassDeterministic, 0},
		{400, "", diagnostics.ClassDeterministic, 0},
		{404, "", diagnostics.ClassDeterministic, 0},
		{429, "7", diagnostics.ClassRateLimited, 7 * time.Second},
		{500, "", diagnostics.ClassServer, 0},
		{502, "", diagnostics.ClassDisconnect, 0},
		{503, "2", diagnostics.ClassDisconnect, 2 * time.Second},
		{504, "", diagnostics.ClassDisconnect, 0},
	}
	for _, c := range cases {
		srv := simtest.Start(t, sim.Config{Seed: 3, Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Kind: sim.FaultStatus, Status: c.status, RetryAfter: c.retryAfter}}})
		_, _, err := collect(t, New(Config{BaseURL: srv.BaseURL()}), req)
		ce := diagnostics.Classify(err)
		if ce.Class != c.class || ce.Status != c.status || ce.RetryAfter != c.wait {
			t.Errorf("HTTP %d: got %s/%d retry-after %s, want %s/%d %s (%v)", c.status, ce.Class, ce.Status, ce.RetryAfter, c.class, c.status, c.wait, err)
		}
	}
}

func TestOutageIsConnectFailed(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3})
	if err := srv.SetOutage(true); err != nil {
		t.Fatal(err)
	}
	_, _, err := collect(t, New(Config{BaseURL: srv.BaseURL()}), req)
	if c := diagnostics.Classify(err).Class; c != diagnostics.ClassConnect {
		t.Errorf("class %s (%v), want connect_failed", c, err)
	}
}

func TestDoneWatcher(t *testing.T) {
	cases := map[string]bool{
		"data: {}\n\ndata: [DONE]\n\n":     true,
		"data: {}\r\n\r\ndata:[DONE]\r\n":  true,
		"data: {\"x\":\"data: [DONE]\"}\n": false,
		"data: [DONE]":                     false, // cut before the line ended
		"data: [DONE]x\n":                  false,
	}
	for in, want := range cases {
		obs := &observation{}
		w := &doneWatcher{r: nopCloser{strings.NewReader(in)}, obs: obs}
		buf := make([]byte, 3) // tiny reads: the marker spans reads
		for {
			if _, err := w.Read(buf); err != nil {
				break
			}
		}
		if obs.sawDone() != want {
			t.Errorf("%q: sawDone %v, want %v", in, obs.sawDone(), want)
		}
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }
