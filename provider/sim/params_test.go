package sim

import (
	"testing"
	"time"
)

// The clock keeps a pace finer than a timer's resolution on average: at
// 20,000 tokens a second it pauses only once the schedule is a millisecond
// ahead, and the pauses add up to the stream's length at that pace. A
// silence is measured from the moment; a stream held up catches up by at
// most maxLag.
func TestClockKeepsThePaceOnAverage(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	for _, c := range []struct {
		name   string
		gap    time.Duration // the pace's gap between tokens
		tokens int
		send   time.Duration // how long sending a token takes
	}{
		{"20k tokens/s", 50 * time.Microsecond, 20000, 2 * time.Microsecond},
		{"5k tokens/s", 200 * time.Microsecond, 5000, 2 * time.Microsecond},
		{"1k tokens/s: a pause per token", time.Millisecond, 1000, 2 * time.Microsecond},
		{"50 tokens/s", 20 * time.Millisecond, 200, 100 * time.Microsecond},
		{"sending slower than the pace", 50 * time.Microsecond, 1000, 80 * time.Microsecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			var k clock
			now := t0
			k.silence(now, 0) // token 0, sent at once
			pauses := 0
			for i := 1; i < c.tokens; i++ {
				now = now.Add(c.send)
				w := k.gap(now, c.gap)
				if w != 0 {
					if w < minPause {
						t.Fatalf("token %d: a pause of %v, below the timer's resolution", i, w)
					}
					pauses++
					now = now.Add(w)
				}
			}
			now = now.Add(c.send)
			if c.gap >= minPause && pauses != c.tokens-1 {
				t.Errorf("%d pauses for %d tokens at a pace of %v; want one before each token after the first", pauses, c.tokens, c.gap)
			}
			want := time.Duration(c.tokens-1) * max(c.gap, c.send)
			if c.gap >= minPause {
				want += time.Duration(c.tokens-1) * c.send // each gap whole, after the send
			}
			// A token due within minPause is sent at once: the stream may end
			// that much early.
			if got := now.Sub(t0); got < want-minPause || got > want+minPause+c.send {
				t.Errorf("stream took %v; want %v (the pace) within a timer's resolution", got, want)
			}
			if c.gap < minPause && pauses > int(want/minPause)+1 {
				t.Errorf("%d pauses for %v of stream: more than one a millisecond", pauses, want)
			}
		})
	}
}

func TestClockSilenceIsFromTheMoment(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	var k clock
	k.silence(t0, 0)
	// The writer was held up 2 s (a slow reader): the schedule catches up
	// by maxLag at most, in a burst, then keeps the pace.
	now := t0.Add(2 * time.Second)
	burst := 0
	for k.gap(now, 100*time.Microsecond) == 0 {
		burst++
	}
	if want := int((maxLag+minPause)/(100*time.Microsecond)) - 1; burst != want {
		t.Errorf("caught up %d tokens at once; want %d (maxLag and a pause's worth, at 100 µs a token)", burst, want)
	}
	// A silence after the schedule ran ahead is still whole.
	if w := k.silence(now, 3*time.Second); w != 3*time.Second {
		t.Errorf("silence %v; want 3s", w)
	}
	// The tokens after it are paced from when it ended, not from the
	// schedule before it: no burst.
	now = now.Add(3 * time.Second)
	burst = 0
	for k.gap(now, 100*time.Microsecond) == 0 {
		burst++
	}
	if want := int(minPause/(100*time.Microsecond)) - 1; burst != want {
		t.Errorf("after the silence, %d tokens at once; want %d (a pause's worth)", burst, want)
	}
}
