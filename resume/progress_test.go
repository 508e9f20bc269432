package resume

import (
	"testing"
	"time"
)

// The high-water rule: only an attempt that gets further than every earlier
// attempt of the node counts as progress.
func TestGroundHighWaterRule(t *testing.T) {
	type step struct {
		restart bool  // a retry from scratch begins before this step
		n       int64 // units received
		want    bool  // new ground?
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first attempt: every byte is new ground", []step{{n: 1, want: true}, {n: 300, want: true}}},
		{"first attempt: an event without text is not", []step{{n: 0, want: false}}},
		{"flapping upstream: each retry cut at the same 300 bytes", []step{
			{n: 300, want: true},
			{restart: true, n: 100, want: false}, {n: 200, want: false},
			{restart: true, n: 300, want: false},
			{restart: true, n: 299, want: false},
		}},
		{"a retry that gets one byte further is progress", []step{
			{n: 300, want: true},
			{restart: true, n: 300, want: false}, {n: 1, want: true},
		}},
		{"the mark is the best attempt, not the last", []step{
			{n: 500, want: true},
			{restart: true, n: 100, want: false},
			{restart: true, n: 400, want: false}, {n: 100, want: false}, {n: 1, want: true},
		}},
		{"re-attach continues the attempt: its data is new ground", []step{
			{n: 200, want: true}, {n: 0, want: true}, {n: 50, want: true},
		}},
	}
	for _, c := range cases {
		var g Ground
		for i, s := range c.steps {
			if s.restart {
				g.Restart()
			}
			if got := g.Advance(s.n); got != s.want {
				t.Errorf("%s: step %d (+%d): new ground = %v, want %v", c.name, i, s.n, got, s.want)
			}
		}
	}
}

func TestIdleHold(t *testing.T) {
	const s = time.Second
	cases := []struct {
		name      string
		cut, hold time.Duration
		want      time.Duration
		learnt    bool
	}{
		{"2 s nginx under the default 30 s poll_after", 2 * s, 30 * s, s, true},
		{"5 s gateway", 5 * s, 30 * s, 2500 * time.Millisecond, true},
		{"Cloudflare's ~100 s: poll_after is already below half", 100 * s, 30 * s, 30 * s, false},
		{"60 s ALB: exactly half is not sooner", 60 * s, 30 * s, 30 * s, false},
		{"a blip of a busy stream is no idle cut", 300 * time.Millisecond, 30 * s, 30 * s, false},
		{"just at the floor", s, 30 * s, s / 2, true},
		{"a second, shorter cut lowers it again", 1500 * time.Millisecond, s, 750 * time.Millisecond, true},
		{"a longer cut after learning changes nothing", 4 * s, s, s, false},
		{"no hold yet", 3 * s, 0, 1500 * time.Millisecond, true},
	}
	for _, c := range cases {
		got, learnt := IdleHold(c.cut, c.hold)
		if got != c.want || learnt != c.learnt {
			t.Errorf("%s: IdleHold(%s, %s) = %s, %v; want %s, %v", c.name, c.cut, c.hold, got, learnt, c.want, c.learnt)
		}
	}
}
