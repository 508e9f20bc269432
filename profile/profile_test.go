package profile

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestBackoffCeiling(t *testing.T) {
	b := Builtins()["default"].Backoff // 1s × 2, cap 30s
	cases := []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, 2 * time.Second}, {4, 16 * time.Second}, {5, 30 * time.Second}, {60, 30 * time.Second}, {10000, 30 * time.Second}}
	for _, c := range cases {
		if got := b.Ceiling(c.n); got != c.want {
			t.Errorf("Ceiling(%d) = %s, want %s", c.n, got, c.want)
		}
	}
	if got := (Backoff{}).Delay(3, rand.New(rand.NewPCG(1, 2))); got != 0 {
		t.Errorf("zero backoff delay = %s", got)
	}
}

// Full jitter: every delay lies in [0, ceiling], and the delays spread over
// the whole range rather than clustering at the ceiling.
func TestBackoffFullJitter(t *testing.T) {
	b := Backoff{Base: D(100 * time.Millisecond), Factor: 2, Cap: D(time.Second)}
	r := rand.New(rand.NewPCG(7, 7))
	for n := 0; n < 8; n++ {
		ceil := b.Ceiling(n)
		var low, high int
		for i := 0; i < 2000; i++ {
			d := b.Delay(n, r)
			if d < 0 || d > ceil {
				t.Fatalf("Delay(%d) = %s outside [0, %s]", n, d, ceil)
			}
			if d < ceil/4 {
				low++
			}
			if d > ceil*3/4 {
				high++
			}
		}
		if low < 300 || high < 300 {
			t.Errorf("n=%d: delays not spread over [0, %s]: %d low, %d high of 2000", n, ceil, low, high)
		}
	}
}

func TestBuiltinsValid(t *testing.T) {
	for name, p := range Builtins() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if d := Builtins()["default"]; d.Retries < 3 || d.Backoff.Base.D() != time.Second || d.Backoff.Factor != 2 || d.Backoff.Cap.D() != 30*time.Second {
		t.Errorf("default profile drifted from the documented 3 retries, 1s × 2 capped at 30s: %+v", d)
	}
}

func TestParse(t *testing.T) {
	set, err := Parse("p.yaml", []byte("ci:\n  retries: 1\nlong:\n  deadline: 2h\n  backoff: {base: 3s, factor: 3, cap: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ci := set["ci"]
	if ci.Retries != 1 || ci.Backoff != Builtins()["ci"].Backoff {
		t.Errorf("override of ci lost its other values: %+v", ci)
	}
	long := set["long"]
	if long.Deadline.D() != 2*time.Hour || long.Backoff.Base.D() != 3*time.Second || long.Retries != Builtins()["default"].Retries {
		t.Errorf("new profile not based on default: %+v", long)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"ci:\n  retires: 1\n":            "retires",
		"ci:\n  retries: -1\n":           "retries: want a whole number >= 0, got -1",
		"ci:\n  deadline: soon\n":        `deadline: want a duration like "90s", got "soon"`,
		"- a\n- b\n":                     "mapping",
		"x:\n  backoff: {factor: 0.5}\n": "factor",
	}
	for src, want := range cases {
		_, err := Parse("p.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "p.yaml") {
			t.Errorf("Parse(%q) error = %v, want it to name p.yaml and mention %q", src, err, want)
		}
	}
}

// Every bad field of every profile is reported, each with its line and reason,
// including values that would turn a safety bound off.
func TestParseReportsEveryProblem(t *testing.T) {
	src := "a:\n  retries: -1\n  deadline: 0s\n  poll_after: 0s\nb:\n  backoff: {base: 0s}\n  breaker: 0\n  retries: 50\n"
	_, err := Parse("p.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`p.yaml:2: profile "a": retries:`, `profile "a": deadline:`, `profile "a": poll_after:`,
		`p.yaml:6: profile "b": backoff.base: 0 would send every retry`, `profile "b": breaker: 0 (no circuit breaker) with 50 retries`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestValidateSafety(t *testing.T) {
	ok := Builtins()["default"]
	cases := []struct {
		name string
		edit func(*Profile)
		want string // "" = valid
	}{
		{"builtin", func(*Profile) {}, ""},
		{"zero base, no retries or reconnects", func(p *Profile) { p.Backoff.Base, p.Retries, p.Reconnects = 0, 0, 0 }, ""},
		{"zero base with retries", func(p *Profile) { p.Backoff.Base = 0 }, "backoff.base"},
		{"no breaker, few retries", func(p *Profile) { p.Breaker = 0 }, ""},
		{"no breaker, many retries", func(p *Profile) { p.Breaker, p.Retries = 0, MaxRetriesWithoutBreaker+1 }, "breaker: 0"},
		{"breaker, many retries", func(p *Profile) { p.Retries = 1000 }, ""},
		{"negative idle", func(p *Profile) { p.IdleTimeout = D(-time.Second) }, "idle_timeout"},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		err := p.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Validate() = %v, want %q", c.name, err, c.want)
		}
	}
	p := ok
	p.IdleTimeout = 0
	if p.CheckIdle(true) != nil || p.CheckIdle(false) == nil {
		t.Error("idle_timeout 0 is fine only for an adapter that polls")
	}
}

// Profiles files are user input: Parse never panics, and whatever it accepts
// validates.
func FuzzParse(f *testing.F) {
	f.Add([]byte("ci:\n  retries: 1\n"))
	f.Add([]byte("long:\n  deadline: 2h\n  backoff: {base: 3s, factor: 3, cap: 1m}\n  breaker: 2\n  breaker_cooldown: 1s\n"))
	f.Add([]byte("x: [1, 2]\n"))
	f.Add([]byte("a: &a {retries: 2}\nb: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for name, p := range set {
			if err := p.Validate(); err != nil {
				t.Fatalf("accepted profile %q does not validate: %v", name, err)
			}
		}
	})
}

// Durations are printed as people write them (issue 24), and read back.
func TestFormatDuration(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {5 * time.Millisecond, "5ms"}, {500 * time.Millisecond, "500ms"}, {1500 * time.Millisecond, "1.5s"},
		{time.Second, "1s"}, {60 * time.Second, "60s"}, {90 * time.Second, "90s"}, {2 * time.Minute, "2m"},
		{150 * time.Second, "2m30s"}, {10 * time.Minute, "10m"}, {time.Hour, "60m"}, {90 * time.Minute, "1h30m"},
		{2 * time.Hour, "2h"}, {2*time.Hour + 5*time.Second, "2h5s"}, {time.Hour + 500*time.Millisecond, "1h0.5s"},
		{-90 * time.Second, "-90s"}, {1500 * time.Microsecond, "1.5ms"},
	}
	for _, c := range cases {
		got := FormatDuration(c.d)
		if got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.d, got, c.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != c.d {
			t.Errorf("%q reads back as %v, %v; want %v", got, back, err, c.d)
		}
		if s := D(c.d).String(); s != got {
			t.Errorf("Duration(%v).String() = %q, want %q", c.d, s, got)
		}
	}
}

// An unknown profile's error lists the known ones as words, not a Go slice.
func TestUnknownProfileWording(t *testing.T) {
	_, err := Set(Builtins()).Get("x")
	if err == nil || err.Error() != `unknown profile "x" (known: ci, default, patient)` {
		t.Errorf("got %v", err)
	}
}

func TestSizes(t *testing.T) {
	cases := []struct {
		yaml string
		want Size
		err  string
	}{
		{"ci: {max_output_bytes: 64KiB}", 64 << 10, ""},
		{"ci: {max_output_bytes: 4096}", 4096, ""},
		{"ci: {max_output_bytes: 1.5MiB}", 3 << 19, ""},
		{"ci: {}", DefaultMaxOutputBytes, ""},
		{"ci: {max_output_bytes: -1}", 0, `max_output_bytes: want a size like 32MiB or a number of bytes, got "-1"`},
		{"ci: {max_output_bytes: lots}", 0, `max_output_bytes: want a size like 32MiB or a number of bytes, got "lots"`},
		{"ci: {max_output_bytes: [1]}", 0, "max_output_bytes: want a size like 32MiB or a number of bytes, got a list"},
	}
	for _, c := range cases {
		set, err := Parse("p.yaml", []byte(c.yaml))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error saying %q", c.yaml, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.yaml, err)
		case c.err == "" && set["ci"].OutputBound() != c.want:
			t.Errorf("%s: %v, want %v", c.yaml, set["ci"].OutputBound(), c.want)
		}
	}
	if s := Size(64 << 10).String(); s != "64KiB" {
		t.Errorf("String: %q", s)
	}
}
