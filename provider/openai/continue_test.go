package openai

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// continueFrom continues have and returns what Continue emitted: the text
// after have (after a reset, the whole output) and the diagnostics.
func continueFrom(t *testing.T, p *Provider, have string) (string, []diagnostics.Code, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := have
	var codes []diagnostics.Code
	err := p.Continue(ctx, req, have, func(ev provider.Event) error {
		switch ev.Kind {
		case provider.KindDelta:
			out += ev.Text
		case provider.KindReset:
			out = ""
		case provider.KindDiagnostic:
			codes = append(codes, ev.Diag.Code)
		}
		return nil
	})
	return out, codes, err
}

// Over real sockets, in each form, the continued output is byte-identical to
// the answer, wherever the delivered output was cut: on a token boundary,
// inside a word, or inside a multi-byte character (whose delivered bytes
// are kept and matched, not sent).
func TestContinueEachFormEveryCut(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40})
	full := strings.Join(sim.Text("sim", "tell me about sockets", 3, 40), "")
	var cuts []int
	for i := 10; i < len(full); i++ {
		if !utf8.RuneStart(full[i]) && len(cuts) < 3 { // inside a character
			cuts = append(cuts, i)
		}
	}
	_, first := utf8.DecodeRuneInString(full)
	cuts = append(cuts, first, len(full)/2, len(full)-1)
	for _, form := range []provider.Continuation{provider.ContinuePrefix, provider.ContinueFinalMessage, provider.ContinueAssistantLast} {
		p := New(Config{BaseURL: srv.BaseURL(), Continuation: form})
		if !p.Capabilities().Continue {
			t.Fatalf("%s: continuation not declared", form)
		}
		for _, cut := range cuts {
			out, codes, err := continueFrom(t, p, full[:cut])
			if err != nil {
				t.Fatalf("%s at %d: %v", form, cut, err)
			}
			if out != full {
				t.Fatalf("%s at %d: output differs\n got %q\nwant %q", form, cut, out, full)
			}
			if len(codes) != 1 || codes[0] != diagnostics.ContinueAccepted {
				t.Errorf("%s at %d: diagnostics %v, want one NR111", form, cut, codes)
			}
		}
	}
	if st := srv.Stats(); st.ContinuedRequests != int64(3*len(cuts)) {
		t.Errorf("continued_requests = %d, want %d", st.ContinuedRequests, 3*len(cuts))
	}
}

// A server that repeats the prefix: the repeat is stripped.
func TestContinueStripsARepeatedPrefix(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40, ContinuationEcho: true})
	full := strings.Join(sim.Text("sim", "tell me about sockets", 3, 40), "")
	out, codes, err := continueFrom(t, New(Config{BaseURL: srv.BaseURL(), Continuation: provider.ContinueFinalMessage}), full[:len(full)/3])
	if err != nil || out != full || len(codes) != 1 || codes[0] != diagnostics.ContinueAccepted {
		t.Fatalf("%v %v\n got %q\nwant %q", err, codes, out, full)
	}
}

// A server that does not know the form answers 400: the error says the form
// was rejected and the adapter stops declaring continuation.
func TestContinueRejectedForm(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 40, Continuation: []string{sim.FormAssistantLast}})
	for _, form := range []provider.Continuation{provider.ContinuePrefix, provider.ContinueFinalMessage} {
		p := New(Config{BaseURL: srv.BaseURL(), Continuation: form})
		_, _, err := continueFrom(t, p, "Some")
		if !errors.Is(err, provider.ErrContinueRejected) || diagnostics.Classify(err).Status != 400 {
			t.Fatalf("%s: %v, want a rejected continuation (400)", form, err)
		}
		if p.Capabilities().Continue {
			t.Errorf("%s: still declared after the server rejected it", form)
		}
	}
	// Once a form was accepted, a 400 is an ordinary deterministic error.
	ok := New(Config{BaseURL: srv.BaseURL(), Continuation: provider.ContinueAssistantLast})
	if _, _, err := continueFrom(t, ok, "Some"); err != nil {
		t.Fatal(err)
	}
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Kind: sim.FaultStatus, Status: 400, Times: 1})
	if _, _, err := continueFrom(t, ok, "Some"); err == nil || errors.Is(err, provider.ErrContinueRejected) || !ok.Capabilities().Continue {
		t.Errorf("400 after an accepted continuation: %v (continue declared: %v)", err, ok.Capabilities().Continue)
	}
}

// The continuation filter, on its own: text held back while ambiguous, a
// repeated prefix, the bytes of a cut character, a continuation that does
// not match them.
func TestContinuationFilter(t *testing.T) {
	cases := []struct {
		name, prefix, tail string
		chunks             []string
		want               string // the output after the prefix and tail, or after a reset
		reset              bool
		repeated           bool
	}{
		{"continuation only", "Hello", "", []string{" world", "!"}, " world!", false, false},
		{"prefix repeated in pieces", "Hello", "", []string{"Hel", "lo", " world"}, " world", false, true},
		{"starts like the prefix, then differs", "Hello", "", []string{"Hel", "p!"}, "Help!", false, false},
		// The server continues the whole-character prefix: the cut character
		// comes whole, and only its bytes not yet delivered are emitted.
		{"cut character completed", "caf", "\xc3", []string{"é au lait"}, "\xa9 au lait", false, false},
		{"repeated prefix then cut character", "caf", "\xc3", []string{"caf", "é!"}, "\xa9!", false, true},
		{"cut character not matched", "caf", "\xc3", []string{"e"}, "cafe", true, false},
		{"ends while ambiguous", "Hello", "", []string{"Hel"}, "Hel", false, false},
		{"empty prefix, cut character", "", "\xf0\x9f", []string{"🚀 go"}, "\x9a\x80 go", false, false},
	}
	for _, c := range cases {
		var out strings.Builder
		reset, repeated := false, false
		f := provider.NewContinueFilter(c.prefix, c.tail, func(ev provider.Event) error {
			switch ev.Kind {
			case provider.KindDelta:
				out.WriteString(ev.Text)
			case provider.KindReset:
				reset = true
				out.Reset()
			case provider.KindDiagnostic:
				for _, a := range ev.Diag.Attrs {
					if a.Key == "prefix_repeated" {
						repeated = a.Value.Bool()
					}
				}
			}
			return nil
		})
		for _, ch := range c.chunks {
			if err := f.Emit(provider.Event{Kind: provider.KindDelta, Text: ch, Seq: -1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Emit(provider.Event{Kind: provider.KindDone, Seq: -1}); err != nil {
			t.Fatal(err)
		}
		if out.String() != c.want || reset != c.reset || repeated != c.repeated {
			t.Errorf("%s: got %q reset %v repeated %v, want %q reset %v repeated %v", c.name, out.String(), reset, repeated, c.want, c.reset, c.repeated)
		}
	}
}

func TestSplitWhole(t *testing.T) {
	cases := []struct{ in, prefix, tail string }{
		{"", "", ""},
		{"abc", "abc", ""},
		{"caf\xc3", "caf", "\xc3"},
		{"café", "café", ""},
		{"go \xf0\x9f\x9a", "go ", "\xf0\x9f\x9a"},
		{"go 🚀", "go 🚀", ""},
		{"bad \xff", "bad \xff", ""},                   // invalid, not a cut
		{"x\x80\x80\x80\x80", "x\x80\x80\x80\x80", ""}, // stray continuation bytes
	}
	for _, c := range cases {
		if p, tl := provider.SplitWhole(c.in); p != c.prefix || tl != c.tail {
			t.Errorf("SplitWhole(%q) = %q, %q; want %q, %q", c.in, p, tl, c.prefix, c.tail)
		}
	}
}

// FuzzContinuation: whatever the answer, wherever the drop cut it (inside a
// character too), however the server splits its chunks and whether it
// repeats the prefix, the delivered bytes followed by what the filter emits
// are the answer, byte for byte.
func FuzzContinuation(f *testing.F) {
	f.Add("Café 🚀 naïve über", uint(4), uint(3), false)
	f.Add("Café 🚀 naïve über", uint(7), uint(1), true)
	f.Add("日本 — crème", uint(2), uint(5), true)
	f.Add("abc", uint(0), uint(0), false)
	f.Fuzz(func(t *testing.T, full string, cut, split uint, echo bool) {
		have := full[:cut%uint(len(full)+1)]
		prefix, tail := provider.SplitWhole(have)
		rest := full[len(prefix):]
		if !echo && prefix != "" && strings.HasPrefix(rest, prefix) {
			return // a continuation that repeats the whole prefix is taken for a repeat (docs/providers.md)
		}
		sent := rest
		if echo {
			sent = prefix + rest
		}
		at := split % uint(len(sent)+1)
		out := have
		c := provider.NewContinueFilter(prefix, tail, func(ev provider.Event) error {
			switch ev.Kind {
			case provider.KindDelta:
				out += ev.Text
			case provider.KindReset:
				out = ""
			}
			return nil
		})
		for _, chunk := range []string{sent[:at], sent[at:]} {
			if err := c.Emit(provider.Event{Kind: provider.KindDelta, Text: chunk, Seq: -1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Emit(provider.Event{Kind: provider.KindDone, Seq: -1}); err != nil {
			t.Fatal(err)
		}
		if out != full {
			t.Fatalf("have %q, sent %q: got %q, want %q", have, sent, out, full)
		}
	})
}
