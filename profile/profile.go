// Package profile holds retry and reconnect policy as data: how many times a
// node may retry, how long to wait between tries, and when to give up.
package profile

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Profile is one named recovery policy. Zero durations mean "off" where noted.
type Profile struct {
	Name string `yaml:"-"`
	// Retries is the per-node budget of requests sent again from scratch.
	Retries int `yaml:"retries"`
	// Reconnects bounds re-attaches and thread resumes, which regenerate
	// nothing and so do not consume Retries.
	Reconnects int `yaml:"reconnects"`
	// Backoff is the delay before each recovery step.
	Backoff Backoff `yaml:"backoff"`
	// Deadline bounds one stretch of recovery: from the first failure after
	// the last healthy progress until the node streams again.
	Deadline Duration `yaml:"deadline"`
	// IdleTimeout: a stream with no event for this long is treated as dropped
	// (providers that cannot be checked) or switched to polling (those that can).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// PollAfter: a Responses stream silent this long is let go and its
	// status polled instead. Keep it below the idle timeouts of the gateways
	// in the path (nginx and ALB: 60s), so that no gateway ever cuts it.
	PollAfter Duration `yaml:"poll_after"`
	// PollInterval is how often a silent response's status is polled.
	PollInterval Duration `yaml:"poll_interval"`
	// StuckAfter: a response queued with no progress for this long is cancelled.
	StuckAfter Duration `yaml:"stuck_after"`
	// MaxRetryAfter caps how long a Retry-After may make a node wait.
	MaxRetryAfter Duration `yaml:"max_retry_after"`
	// Breaker opens a provider's circuit after this many consecutive
	// connection failures across all nodes (0 = no breaker) ...
	Breaker int `yaml:"breaker"`
	// ... and keeps it open this long before letting one probe through.
	BreakerCooldown Duration `yaml:"breaker_cooldown"`
	// MaxOutputBytes bounds a node's answer (its output and its reasoning,
	// as streamed in an attempt): past it the node fails with NR501
	// (limit_exceeded), its partial answer kept, and is not retried. A
	// node's or provider's max_output_bytes overrides it. 0: 32 MiB.
	MaxOutputBytes Size `yaml:"max_output_bytes"`
	// MaxEvents bounds the events of one attempt's stream, which a server
	// could send without end and without output. 0: 10,000,000.
	MaxEvents int `yaml:"max_events"`
}

// Defaults of the bounds a profile may leave at 0.
const (
	DefaultMaxOutputBytes Size = 32 << 20
	DefaultMaxEvents           = 10_000_000
)

// OutputBound is MaxOutputBytes, or its default.
func (p Profile) OutputBound() Size { return cmp.Or(p.MaxOutputBytes, DefaultMaxOutputBytes) }

// EventBound is MaxEvents, or its default.
func (p Profile) EventBound() int { return cmp.Or(p.MaxEvents, DefaultMaxEvents) }

// Backoff is an exponential backoff with full jitter.
type Backoff struct {
	Base   Duration `yaml:"base"`
	Factor float64  `yaml:"factor"`
	Cap    Duration `yaml:"cap"`
}

// Delay returns the wait before recovery step n (0-based): uniform in
// [0, min(cap, base*factor^n)]. Full jitter spreads reconnecting clients apart
// and does the least total work of the jitter schemes (AWS architecture blog).
func (b Backoff) Delay(n int, r *rand.Rand) time.Duration {
	ceil := b.Ceiling(n)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(ceil) + 1))
}

// Ceiling is the upper bound of Delay(n).
func (b Backoff) Ceiling(n int) time.Duration {
	f := b.Factor
	if f < 1 {
		f = 1
	}
	c := float64(b.Base.D()) * math.Pow(f, float64(n))
	if b.Cap.D() > 0 && c > float64(b.Cap.D()) {
		c = float64(b.Cap.D())
	}
	if c > math.MaxInt64/2 {
		c = math.MaxInt64 / 2
	}
	return time.Duration(c)
}

// MaxRetriesWithoutBreaker bounds the retry budget of a profile without a
// circuit breaker: past it, a provider that is down is hammered by every node.
const MaxRetriesWithoutBreaker = 10

// Validate reports every field of a profile that cannot work, or that
// would disable a safety bound, each with the reason; nil if there is none.
// Durations whose zero means nothing are refused at zero too (deadline,
// idle_timeout, poll_after, poll_interval; breaker_cooldown with a
// breaker); stuck_after 0 never cancels and max_retry_after 0 ignores
// Retry-After, so those take 0. No duration may be negative.
func (p Profile) Validate() error {
	var errs []error
	for _, pr := range p.problems() {
		errs = append(errs, fmt.Errorf("profile %q: %s: %s", p.Name, pr.field, pr.msg))
	}
	return errors.Join(errs...)
}

// problem is one problem of a profile: the field (as a profiles file names
// it) and what is wrong, in the file's words.
type problem struct{ field, msg string }

func (p Profile) problems() []problem {
	var out []problem
	bad := func(field, format string, args ...any) {
		out = append(out, problem{field, fmt.Sprintf(format, args...)})
	}
	if p.Retries < 0 {
		bad("retries", "want a whole number >= 0, got %d", p.Retries)
	}
	if p.Reconnects < 0 {
		bad("reconnects", "want a whole number >= 0, got %d", p.Reconnects)
	}
	for _, d := range []struct {
		field    string
		v        Duration
		positive bool // 0 means nothing: refused
		why      string
	}{
		{"backoff.base", p.Backoff.Base, false, ""},
		{"backoff.cap", p.Backoff.Cap, false, ""},
		{"deadline", p.Deadline, true, "recovery would give up at once"},
		{"idle_timeout", p.IdleTimeout, true, "0 would turn the idle watchdog off, and a stream that sends only keepalives would hang the run"},
		{"poll_after", p.PollAfter, true, "a silent stream would be let go at once"},
		{"poll_interval", p.PollInterval, true, "polling would never pause"},
		{"stuck_after", p.StuckAfter, false, ""},
		{"max_retry_after", p.MaxRetryAfter, false, ""},
		{"breaker_cooldown", p.BreakerCooldown, p.Breaker > 0, "an open circuit would never wait before its probe"},
	} {
		switch {
		case d.v < 0:
			bad(d.field, "want a duration >= 0, got %s", d.v)
		case d.v == 0 && d.positive:
			bad(d.field, "want a duration > 0, got 0s: %s", d.why)
		}
	}
	if p.Backoff.Base == 0 && (p.Retries > 0 || p.Reconnects > 0) {
		bad("backoff.base", "0 would send every retry and reconnect with no pause at all, hammering a provider that is down; use at least a few milliseconds")
	}
	if p.Backoff.Factor != 0 && !(p.Backoff.Factor >= 1) {
		bad("backoff.factor", "want a number >= 1, got %g", p.Backoff.Factor)
	}
	if p.MaxOutputBytes < 0 {
		bad("max_output_bytes", "want a size > 0 (omit it for %s), got %d", DefaultMaxOutputBytes, int64(p.MaxOutputBytes))
	}
	if p.MaxEvents < 0 {
		bad("max_events", "want a whole number > 0 (omit it for 10,000,000), got %d", p.MaxEvents)
	}
	if p.Breaker < 0 {
		bad("breaker", "want a whole number >= 0, got %d", p.Breaker)
	} else if p.Breaker == 0 && p.Retries > MaxRetriesWithoutBreaker {
		bad("breaker", "0 (no circuit breaker) with %d retries per node would hammer a provider that is down; keep a breaker, or at most %d retries",
			p.Retries, MaxRetriesWithoutBreaker)
	}
	return out
}

// yamlFields are the yaml tags of struct v's fields, in their order.
func yamlFields(v any) []string {
	t := reflect.TypeOf(v)
	var out []string
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

// CheckIdle reports a profile whose idle_timeout is 0 (no idle watchdog)
// used with an adapter that cannot poll through silence: a server that sends
// only keepalives would then hold the run forever.
func (p Profile) CheckIdle(polls bool) error {
	if p.IdleTimeout.D() == 0 && !polls {
		return fmt.Errorf("profile %q: idle_timeout: 0 turns off the idle watchdog, and a chat stream cannot be polled: a server that sends only keepalives would hang the run; set a window (default 90s)", p.Name)
	}
	return nil
}

// Builtins returns the built-in profiles, keyed by name. Each call returns
// fresh values, so callers may modify them. A graph picks one by name
// (`profile: ci`, runner.Options.Profile), and a profiles file may override
// any of their fields (Load). The built-ins and their values (the fields of
// Profile, durations as `noderun profiles` prints them):
//
//	ci: retries 3, reconnects 8, backoff {base 5ms, factor 2, cap 50ms}, deadline 5s, idle_timeout 2s, poll_after 1s, poll_interval 50ms, stuck_after 500ms, max_retry_after 2s, breaker 3, breaker_cooldown 500ms, max_output_bytes 32MiB, max_events 10000000
//	default: retries 3, reconnects 8, backoff {base 1s, factor 2, cap 30s}, deadline 10m, idle_timeout 90s, poll_after 30s, poll_interval 5s, stuck_after 2m, max_retry_after 2m, breaker 5, breaker_cooldown 5s, max_output_bytes 32MiB, max_events 10000000
//	patient: retries 5, reconnects 50, backoff {base 2s, factor 2, cap 60s}, deadline 60m, idle_timeout 10m, poll_after 45s, poll_interval 15s, stuck_after 10m, max_retry_after 10m, breaker 5, breaker_cooldown 15s, max_output_bytes 32MiB, max_events 10000000
//
// default is for interactive runs against real providers; ci keeps every
// wait short, for tests against the simulator; patient is for long
// reasoning and agent calls that may sit silent for many minutes.
func Builtins() map[string]Profile {
	return map[string]Profile{
		"default": {
			Name: "default", Retries: 3, Reconnects: 8,
			Backoff:  Backoff{Base: D(time.Second), Factor: 2, Cap: D(30 * time.Second)},
			Deadline: D(10 * time.Minute), IdleTimeout: D(90 * time.Second), PollAfter: D(30 * time.Second),
			PollInterval: D(5 * time.Second), StuckAfter: D(2 * time.Minute), MaxRetryAfter: D(2 * time.Minute),
			Breaker: 5, BreakerCooldown: D(5 * time.Second), MaxOutputBytes: DefaultMaxOutputBytes, MaxEvents: DefaultMaxEvents,
		},
		"ci": {
			Name: "ci", Retries: 3, Reconnects: 8,
			Backoff:  Backoff{Base: D(5 * time.Millisecond), Factor: 2, Cap: D(50 * time.Millisecond)},
			Deadline: D(5 * time.Second), IdleTimeout: D(2 * time.Second), PollAfter: D(time.Second),
			PollInterval: D(50 * time.Millisecond), StuckAfter: D(500 * time.Millisecond), MaxRetryAfter: D(2 * time.Second),
			Breaker: 3, BreakerCooldown: D(500 * time.Millisecond), MaxOutputBytes: DefaultMaxOutputBytes, MaxEvents: DefaultMaxEvents,
		},
		"patient": {
			Name: "patient", Retries: 5, Reconnects: 50,
			Backoff:  Backoff{Base: D(2 * time.Second), Factor: 2, Cap: D(60 * time.Second)},
			Deadline: D(60 * time.Minute), IdleTimeout: D(10 * time.Minute), PollAfter: D(45 * time.Second),
			PollInterval: D(15 * time.Second), StuckAfter: D(10 * time.Minute), MaxRetryAfter: D(10 * time.Minute),
			Breaker: 5, BreakerCooldown: D(15 * time.Second), MaxOutputBytes: DefaultMaxOutputBytes, MaxEvents: DefaultMaxEvents,
		},
	}
}

// Set is a collection of profiles: the built-ins plus any loaded from files.
type Set map[string]Profile

// Get returns the named profile or an error listing the known ones.
func (s Set) Get(name string) (Profile, error) {
	if p, ok := s[name]; ok {
		return p, nil
	}
	return Profile{}, fmt.Errorf("unknown profile %q (known: %s)", name, strings.Join(s.Names(), ", "))
}

// Names lists the profile names, sorted.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
