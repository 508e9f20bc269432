package quota

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// clock is a pacer's clock that a test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// openAI is an OpenAI answer's headers.
func openAI(limReq, remReq int, resetReq string, limTok, remTok int, resetTok string) http.Header {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", itoa(limReq))
	h.Set("x-ratelimit-remaining-requests", itoa(remReq))
	h.Set("x-ratelimit-reset-requests", resetReq)
	if limTok > 0 {
		h.Set("x-ratelimit-limit-tokens", itoa(limTok))
		h.Set("x-ratelimit-remaining-tokens", itoa(remTok))
		h.Set("x-ratelimit-reset-tokens", resetTok)
	}
	return h
}

func itoa(n int) string { return strconv.Itoa(n) }

// admitNow admits r if the pacer lets it go without waiting.
func admitNow(t *testing.T, p *Pacer, r Request) *Ticket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tk, waited, err := p.Wait(ctx, r)
	if err != nil || waited != 0 {
		t.Fatalf("request %d: waited %s, %v; want it admitted at once", r.Order, waited, err)
	}
	return tk
}

// mustWait reports whether r is held (its Wait does not return within a
// moment on the frozen clock).
func held(p *Pacer, r Request) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, _, err := p.Wait(ctx, r)
	return errors.Is(err, context.DeadlineExceeded)
}

// The first request probes: the rest wait for its headers, then go as far
// as they say, and no further until the budget replenishes.
func TestProbeThenBudget(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{}, clk.now)
	probe := admitNow(t, p, Request{Order: 0, Input: 10})
	if !held(p, Request{Order: 1}) {
		t.Fatal("a second request went before the probe's answer")
	}
	// 3 requests a minute are allowed, 2 left; the bucket is full again in 20 s: 1 per 20 s.
	probe.Observe(200, openAI(3, 2, "20s", 0, 0, ""))
	admitNow(t, p, Request{Order: 1})
	admitNow(t, p, Request{Order: 2})
	if !held(p, Request{Order: 3}) {
		t.Fatal("a request went past the budget")
	}
	clk.add(19 * time.Second)
	if !held(p, Request{Order: 3}) {
		t.Fatal("a request went before one had replenished")
	}
	clk.add(time.Second)
	admitNow(t, p, Request{Order: 3})
}

// Answers that come out of order never raise the budget: an older answer
// says more was left than is.
func TestOldAnswersDoNotRaiseTheBudget(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{}, clk.now)
	first := admitNow(t, p, Request{})
	first.Observe(200, openAI(10, 9, "6s", 0, 0, ""))
	var tks []*Ticket
	for i := range 9 {
		tks = append(tks, admitNow(t, p, Request{Order: i + 1}))
	}
	tks[8].Observe(200, openAI(10, 0, "60s", 0, 0, "")) // the newest first
	tks[0].Observe(200, openAI(10, 8, "12s", 0, 0, "")) // old news: 8 left then
	if !held(p, Request{Order: 10}) {
		t.Fatal("an old answer let a request past the budget")
	}
}

// A 429 holds every request of the account until its Retry-After; a parked
// request then goes first. One request may be in flight, so the second is
// admitted only after the first is done: which went first is the pacer's
// choice, not the order two goroutines happen to report in.
func TestA429HoldsEveryoneAndTheParkedGoFirst(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{Concurrency: 1}, clk.now)
	tk := admitNow(t, p, Request{})
	h := openAI(100, 0, "1s", 0, 0, "")
	h.Set("Retry-After", "3")
	tk.Observe(http.StatusTooManyRequests, h)
	tk.Done(0)
	if !held(p, Request{Order: 1}) {
		t.Fatal("a request went during the Retry-After")
	}
	type admitted struct {
		order int
		tk    *Ticket
	}
	got := make(chan admitted, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, r := range []Request{{Order: 1}, {Order: 2, Front: true}} { // the unparked one queues first, and is earlier in the graph
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tk, _, err := p.Wait(context.Background(), r); err == nil {
				got <- admitted{r.Order, tk}
			}
		}()
		for p.Waiting() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	clk.add(3 * time.Second)
	p.Observe(200, nil) // a nudge: the clock moved
	first := <-got
	if first.order != 2 {
		t.Errorf("request %d went first, want the parked one (2)", first.order)
	}
	if p.Waiting() != 1 {
		t.Errorf("%d requests wait while one is in flight, want 1", p.Waiting())
	}
	first.tk.Done(0)
	if second := <-got; second.order == first.order {
		t.Errorf("request %d went twice", second.order)
	}
}

// Waiting requests go in graph order, whatever order they came in.
func TestGraphOrder(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{RequestsPerMinute: 60}, clk.now) // one a second, 60 at once
	for i := range 60 {
		admitNow(t, p, Request{Order: 100 + i})
	}
	got := make(chan int, 5)
	var wg sync.WaitGroup
	for _, o := range []int{5, 3, 9, 1, 7} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := p.Wait(context.Background(), Request{Order: o}); err == nil {
				got <- o
			}
		}()
	}
	for p.Waiting() < 5 {
		time.Sleep(time.Millisecond)
	}
	want := []int{1, 3, 5, 7, 9}
	for i := range 5 {
		// A second refills one request: exactly one is admitted per
		// nudge, so the order they arrive in is the order they went.
		clk.add(time.Second)
		p.Observe(200, nil) // a nudge: the clock moved
		if o := <-got; o != want[i] {
			t.Fatalf("admitted %d as number %d, want graph order %v", o, i+1, want)
		}
	}
	wg.Wait()
}

// Declared limits bound the pace without any header; concurrency bounds
// what is in flight; a request larger than the whole token budget is refused.
func TestDeclaredLimits(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{TokensPerMinute: 1000, Concurrency: 2}, clk.now)
	a := admitNow(t, p, Request{Input: 100, MaxOutput: 300})
	admitNow(t, p, Request{Order: 1, Input: 100, MaxOutput: 300})
	if !held(p, Request{Order: 2, Input: 10, MaxOutput: 10}) {
		t.Fatal("a third request went with concurrency 2")
	}
	a.Done(300)
	admitNow(t, p, Request{Order: 2, Input: 100, MaxOutput: 100}) // 800 + 200 of 1000
	p.mu.Lock()
	p.declared.Concurrency = 0
	p.mu.Unlock()
	if !held(p, Request{Order: 3, Input: 10, MaxOutput: 10}) {
		t.Fatal("a request went past the declared tokens per minute")
	}
	_, _, err := p.Wait(context.Background(), Request{Input: 900, MaxOutput: 200})
	if !errors.Is(err, ErrOverLimit) {
		t.Fatalf("a request of 1,100 tokens against 1,000 a minute: %v, want ErrOverLimit", err)
	}
}

// An account whose answers carry no rate-limit headers is not paced, until
// a 429: then it is held for the Retry-After and what may be in flight is
// halved, to grow back by one per answer.
func TestNoHeadersThenA429(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{}, clk.now)
	probe := admitNow(t, p, Request{})
	probe.Observe(200, http.Header{})
	var tks []*Ticket
	for i := range 8 {
		tks = append(tks, admitNow(t, p, Request{Order: i + 1}))
	}
	h := http.Header{}
	h.Set("Retry-After", "1")
	tks[0].Observe(http.StatusTooManyRequests, h)
	clk.add(time.Second)
	if !held(p, Request{Order: 20}) {
		t.Fatal("with 9 in flight and a window of 4, a request went")
	}
	for _, tk := range tks[:6] {
		tk.Done(10)
	}
	probe.Done(10)
	admitNow(t, p, Request{Order: 20}) // 2 in flight now
}

// A canceled wait leaves the queue, and the next request goes in its turn.
func TestCanceledWaitLeavesTheQueue(t *testing.T) {
	clk := newClock()
	p := NewPacer(Limits{RequestsPerMinute: 1}, clk.now)
	admitNow(t, p, Request{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := p.Wait(ctx, Request{Order: 1}); done <- err }()
	for p.Waiting() < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v", err)
	}
	if p.Waiting() != 0 {
		t.Fatalf("%d waiting after the cancel", p.Waiting())
	}
	clk.add(time.Minute)
	admitNow(t, p, Request{Order: 2})
}

// A 429 without Retry-After holds the account until the reset of the
// limits its headers say are spent (OpenAI's and Anthropic's), not the
// second a bucket's refill would give; Hold does the same for a word the
// pacer cannot read (a body's retryDelay).
func TestA429WaitsForTheSpentLimitsReset(t *testing.T) {
	for name, h := range map[string]http.Header{
		"openai":    openAI(100, 0, "4s", 1000, 500, "1s"),
		"anthropic": {"Anthropic-Ratelimit-Output-Tokens-Limit": {"8000"}, "Anthropic-Ratelimit-Output-Tokens-Remaining": {"0"}, "Anthropic-Ratelimit-Output-Tokens-Reset": {"2026-01-01T00:00:04Z"}},
		"hold":      nil,
	} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			p := NewPacer(Limits{}, clk.now)
			tk := admitNow(t, p, Request{})
			if h == nil {
				tk.Observe(http.StatusTooManyRequests, http.Header{})
				p.Hold(clk.now().Add(4 * time.Second))
			} else {
				tk.Observe(http.StatusTooManyRequests, h)
			}
			tk.Done(0)
			for _, d := range []time.Duration{0, time.Second, 2 * time.Second, 990 * time.Millisecond} {
				clk.add(d)
				if !held(p, Request{}) {
					t.Fatalf("a request went %s before the reset", 4*time.Second-(clk.now().Sub(newClock().now())))
				}
			}
			clk.add(10 * time.Millisecond)
			p.Observe(200, nil) // a nudge: the clock moved
			admitNow(t, p, Request{})
		})
	}
}
