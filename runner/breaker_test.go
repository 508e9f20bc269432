package runner

import (
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	b := newBreaker(3, 10*time.Second)
	b.now = func() time.Time { return now }
	step := func(what string, wantAllow bool, connectFailed bool) {
		t.Helper()
		ok, _ := b.allow()
		if ok != wantAllow {
			t.Fatalf("%s: allow = %v, want %v", what, ok, wantAllow)
		}
		if ok {
			b.record(connectFailed)
		}
	}
	step("1st failure", true, true)
	step("success resets", true, false)
	step("failure 1", true, true)
	step("failure 2", true, true)
	step("failure 3 opens", true, true)
	step("open: fail fast", false, false)
	now = now.Add(9 * time.Second)
	step("still open", false, false)
	now = now.Add(2 * time.Second)
	ok, _ := b.allow() // the probe
	if !ok {
		t.Fatal("no probe after the cooldown")
	}
	if ok2, _ := b.allow(); ok2 {
		t.Fatal("a second attempt went through while the probe is in flight")
	}
	b.record(true) // probe failed: open again at once
	step("re-opened by the failed probe", false, false)
	now = now.Add(11 * time.Second)
	step("probe succeeds", true, false)
	step("closed", true, true)
	step("closed, one failure is not enough", true, true)
}

func TestBreakerOff(t *testing.T) {
	var b *breaker
	if ok, _ := b.allow(); !ok {
		t.Fatal("nil breaker refused")
	}
	b2 := newBreaker(0, time.Second)
	for i := 0; i < 10; i++ {
		b2.record(true)
	}
	if ok, _ := b2.allow(); !ok {
		t.Fatal("threshold 0 must mean off")
	}
}
