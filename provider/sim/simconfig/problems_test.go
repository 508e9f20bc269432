package simconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config with several problems reports every one, each at its own line,
// in the file's words (field, what is wanted, what the file has), never in
// Go's (no "int64", no "cannot unmarshal").
func TestConfigReportsEveryProblem(t *testing.T) {
	cases := []struct {
		name, src string
		want      []ConfigError // Line, Field, Msg (a substring), Err
	}{
		{"top level", "seed: x\ntokens: -3\nsilence: soon\nkeepalive: -1s\ntokns: 5\ncontinuation: [prefix, sideways]\ncontinuation_echo: maybe\n", []ConfigError{
			{Line: 1, Field: "seed", Msg: `seed: want a whole number, got "x"`, Err: ErrInvalidValue},
			{Line: 2, Field: "tokens", Msg: "tokens: want a whole number >= 0, got -3", Err: ErrInvalidValue},
			{Line: 3, Field: "silence", Msg: `silence: want a duration like "1.5s", got "soon"`, Err: ErrInvalidValue},
			{Line: 4, Field: "keepalive", Msg: "keepalive: want a duration >= 0, got -1s", Err: ErrInvalidValue},
			{Line: 5, Field: "tokns", Msg: `unknown field "tokns" (want seed, tokens,`, Err: ErrUnknownField},
			{Line: 6, Field: "continuation", Msg: `continuation: want prefix, continue_final_message, assistant_last or none, got "sideways"`, Err: ErrInvalidValue},
			{Line: 7, Field: "continuation_echo", Msg: `continuation_echo: want true or false, got "maybe"`, Err: ErrInvalidValue},
		}},
		{"faults", "faults:\n  - kind: explode\n  - kind: status\n    status: 200\n    endpoint: nowhere\n  - kind: silence\n    after_events: -1\n  - kind: close\n    duration: 0s\n    times: lots\n  - kind: outage\n    duration: 2h\n", []ConfigError{
			{Line: 2, Field: "kind", Msg: `kind: want one of close, reset, cut, silence, status, queued, refuse, outage, error_event, got "explode"`, Err: ErrInvalidValue},
			{Line: 4, Field: "status", Msg: "status: want an HTTP status in 400-599 for kind status, got 200", Err: ErrInvalidValue},
			{Line: 5, Field: "endpoint", Msg: `endpoint: want one of chat,`, Err: ErrInvalidValue},
			{Line: 6, Field: "kind", Msg: "silence needs a duration > 0", Err: ErrInvalidValue},
			{Line: 7, Field: "after_events", Msg: "after_events: want a whole number >= 0, got -1", Err: ErrInvalidValue},
			{Line: 9, Field: "duration", Msg: "duration: want a duration > 0 (omit it instead), got 0s", Err: ErrInvalidValue},
			{Line: 10, Field: "times", Msg: `times: want a whole number >= 0, got "lots"`, Err: ErrInvalidValue},
			{Line: 12, Field: "duration", Msg: "duration: an outage lasts at most 1h, got 2h", Err: ErrInvalidValue},
		}},
		{"limits and duplicates", "limits:\n  requests_per_minute: -1\n  window: 0s\n  rpm: 3\nseed: 1\nseed: 2\n", []ConfigError{
			{Line: 2, Field: "requests_per_minute", Msg: "requests_per_minute: want a whole number >= 0, got -1", Err: ErrInvalidValue},
			{Line: 3, Field: "window", Msg: "window: want a duration > 0 (omit it instead), got 0s", Err: ErrInvalidValue},
			{Line: 4, Field: "rpm", Msg: `unknown limits field "rpm" (want requests_per_minute, tokens_per_minute, window)`, Err: ErrUnknownField},
			{Line: 6, Field: "seed", Msg: `duplicate field "seed"`, Err: ErrUnknownField},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.src))
			le, ok := errors.AsType[*ConfigErrors](err)
			if !ok {
				t.Fatalf("err = %v (%T), want *ConfigErrors", err, err)
			}
			l := le.Problems
			if len(l) != len(c.want) {
				t.Errorf("%d problems, want %d:\n%v", len(l), len(c.want), err)
			}
			for i, w := range c.want {
				if i >= len(l) {
					break
				}
				g := l[i]
				if g.Line != w.Line || g.Field != w.Field || !strings.Contains(g.Msg, w.Msg) || !errors.Is(g, w.Err) {
					t.Errorf("problem %d = line %d field %q %q (%v), want line %d field %q %q (%v)", i, g.Line, g.Field, g.Msg, g.Err, w.Line, w.Field, w.Msg, w.Err)
				}
				for _, goWord := range []string{"int64", "float64", "cannot unmarshal", "cannot read", "!!"} {
					if strings.Contains(g.Msg, goWord) {
						t.Errorf("problem %d speaks Go (%q): %s", i, goWord, g.Msg)
					}
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(l) {
				t.Errorf("Error() has %d lines for %d problems:\n%v", got, len(l), err)
			}
			if same := err; err != same { // comparable: callers compare errors
				t.Error("an error unequal to itself")
			}
			if !errors.Is(err, c.want[0].Err) {
				t.Error("errors.Is does not find the first sentinel through the list")
			}
		})
	}
}

// LoadConfig names the file on every problem, not only the first.
func TestLoadConfigNamesFileOnEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(path, []byte("tokens: -1\nsilence: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], path+":1: tokens:") || !strings.HasPrefix(lines[1], path+":2: silence:") {
		t.Fatalf("err =\n%v", err)
	}
}

// The lists the docs are made from are the decoder's.
func TestFieldListsAreTheDecoders(t *testing.T) {
	for _, k := range FaultKinds() {
		f := Fault{Kind: k, Status: 503, Duration: 1}
		for _, p := range f.problems() {
			if p.field == "kind" && strings.Contains(p.msg, "want one of") {
				t.Errorf("kind %q is listed but refused", k)
			}
		}
	}
	for _, e := range Endpoints() {
		if err := (Fault{Kind: FaultClose, Endpoint: e}).Validate(); err != nil {
			t.Errorf("endpoint %q is listed but refused: %v", e, err)
		}
	}
	for _, fields := range [][]string{ConfigFields(), LimitsFields(), FaultFields()} {
		for _, f := range fields {
			if strings.Contains(f, " ") || f == "" {
				t.Errorf("field %q", f)
			}
		}
	}
	// Every field the decoder knows decodes without an unknown-field error.
	for _, f := range ConfigFields() {
		_, err := ParseConfig([]byte(f + ": null\n"))
		if errors.Is(err, ErrUnknownField) {
			t.Errorf("config field %q is listed but unknown: %v", f, err)
		}
	}
}
