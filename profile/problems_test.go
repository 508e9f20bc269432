package profile

import (
	"errors"
	"strings"
	"testing"
)

// A profiles file with several problems reports every one at the line of
// its field, in the file's words (field, what it takes, what it has),
// never Go's type names; each matches its sentinel with errors.Is.
func TestParseReportsEveryProblemAtItsLine(t *testing.T) {
	cases := []struct {
		name, src string
		want      []FieldError // Line, Profile, Field, Msg (a substring), Err
	}{
		{"types and ranges", "fast:\n  retries: many\n  reconnects: -2\n  deadline: 0s\n  idle_timeout: 0s\n  poll_after: soon\n  backoff:\n    base: -1s\n    factor: 0.5\n    cap: [1]\n  max_events: 0\n  max_output_bytes: 0\n", []FieldError{
			{Line: 2, Profile: "fast", Field: "retries", Msg: `retries: want a whole number >= 0, got "many"`, Err: ErrInvalidValue},
			{Line: 3, Profile: "fast", Field: "reconnects", Msg: "reconnects: want a whole number >= 0, got -2", Err: ErrInvalidValue},
			{Line: 4, Profile: "fast", Field: "deadline", Msg: "deadline: want a duration > 0, got 0s", Err: ErrInvalidValue},
			{Line: 5, Profile: "fast", Field: "idle_timeout", Msg: "idle_timeout: want a duration > 0, got 0s: 0 would turn the idle watchdog off", Err: ErrInvalidValue},
			{Line: 6, Profile: "fast", Field: "poll_after", Msg: `poll_after: want a duration like "90s", got "soon"`, Err: ErrInvalidValue},
			{Line: 8, Profile: "fast", Field: "backoff.base", Msg: "backoff.base: want a duration >= 0, got -1s", Err: ErrInvalidValue},
			{Line: 9, Profile: "fast", Field: "backoff.factor", Msg: "backoff.factor: want a number >= 1, got 0.5", Err: ErrInvalidValue},
			{Line: 10, Profile: "fast", Field: "backoff.cap", Msg: `backoff.cap: want a duration like "90s", got a list`, Err: ErrInvalidValue},
			{Line: 11, Profile: "fast", Field: "max_events", Msg: "max_events: want a whole number >= 1, got 0", Err: ErrInvalidValue},
			{Line: 12, Profile: "fast", Field: "max_output_bytes", Msg: "max_output_bytes: want a size > 0 (omit it for 32MiB), got 0", Err: ErrInvalidValue},
		}},
		{"unknown fields, two profiles", "ci:\n  retires: 1\n  backoff: {bse: 1s}\nslow:\n  breaker: 2\n  breaker_cooldown: 0s\n  stuck_after: -1m\n  colour: red\n", []FieldError{
			{Line: 2, Profile: "ci", Field: "retires", Msg: `unknown field "retires" (did you mean "retries"?)`, Err: ErrUnknownField},
			{Line: 3, Profile: "ci", Field: "backoff.bse", Msg: `unknown field "backoff.bse" (did you mean "base"?)`, Err: ErrUnknownField},
			{Line: 6, Profile: "slow", Field: "breaker_cooldown", Msg: "breaker_cooldown: want a duration > 0, got 0s", Err: ErrInvalidValue},
			{Line: 7, Profile: "slow", Field: "stuck_after", Msg: "stuck_after: want a duration >= 0, got -60s", Err: ErrInvalidValue},
			{Line: 8, Profile: "slow", Field: "colour", Msg: `unknown field "colour" (known: retries, reconnects, backoff,`, Err: ErrUnknownField},
		}},
		{"not a mapping, twice", "a: 5\nb:\n  retries: 1\nb:\n  retries: 2\n", []FieldError{
			{Line: 1, Profile: "a", Field: "", Msg: `want a mapping of fields, like {retries: 1}, got "5"`, Err: ErrInvalidValue},
			{Line: 4, Profile: "b", Field: "", Msg: `profile "b" is given twice`, Err: ErrUnknownField},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(c.src))
			if err == nil {
				t.Fatal("accepted")
			}
			var got []*FieldError
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				fe, ok := e.(*FieldError)
				if !ok {
					t.Fatalf("%T in the list: %v", e, e)
				}
				got = append(got, fe)
			}
			if len(got) != len(c.want) {
				t.Errorf("%d problems, want %d:\n%v", len(got), len(c.want), err)
			}
			for i, w := range c.want {
				if i >= len(got) {
					break
				}
				g := got[i]
				if g.Line != w.Line || g.Profile != w.Profile || g.Field != w.Field || !strings.Contains(g.Msg, w.Msg) || !errors.Is(g, w.Err) || g.File != "p.yaml" {
					t.Errorf("problem %d = %s (field %q, %v), want line %d profile %q field %q %q (%v)", i, g, g.Field, g.Err, w.Line, w.Profile, w.Field, w.Msg, w.Err)
				}
				for _, goWord := range []string{"int64", "float64", "cannot unmarshal", "!!", "time: "} {
					if strings.Contains(g.Msg, goWord) {
						t.Errorf("problem %d speaks Go (%q): %s", i, goWord, g.Msg)
					}
				}
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != len(got) {
				t.Errorf("Error() has %d lines for %d problems", lines, len(got))
			}
		})
	}
}

// Merge keys and aliases read as YAML means them, and a null profile
// overrides nothing.
func TestParseMergeAndAlias(t *testing.T) {
	set, err := Parse("p.yaml", []byte("base: &b {retries: 2, deadline: 3m}\nx:\n  <<: *b\n  retries: 4\ny: *b\nci:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if set["x"].Retries != 4 || set["x"].Deadline.D().Minutes() != 3 || set["y"].Retries != 2 || set["ci"] != Builtins()["ci"] {
		t.Errorf("x %+v y %+v", set["x"], set["y"])
	}
}

// Fields are the yaml tags of Profile: the decoder takes each.
func TestFieldsAreDecoded(t *testing.T) {
	def := Builtins()["default"]
	examples := map[string]string{"backoff": "{base: 1s, factor: 2, cap: 30s}", "max_output_bytes": "1MiB"}
	for _, f := range Fields() {
		v, ok := examples[f]
		if !ok {
			v = "7"
			if strings.Contains(f, "_after") || strings.Contains(f, "timeout") || strings.Contains(f, "deadline") || strings.Contains(f, "interval") || strings.Contains(f, "cooldown") {
				v = "7s"
			}
		}
		if _, err := Parse("p.yaml", []byte("default:\n  "+f+": "+v+"\n")); err != nil {
			t.Errorf("field %s: %v", f, err)
		}
	}
	if len(Fields()) != 13 || len(BackoffFields()) != 3 || def.Name != "default" {
		t.Errorf("fields %v %v", Fields(), BackoffFields())
	}
}
