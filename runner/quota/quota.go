// Package quota paces the requests of a provider account (a base URL, key
// and model) to what its rate limits allow, so that a wide graph waits for
// its quota instead of meeting it as a storm of 429s.
//
// A Pacer learns the account's request and token budgets from the
// rate-limit headers of every response (package ratelimit), and from the
// limits a graph declares. A request that would exceed what is left waits
// for the budget to replenish, in the order of its node in the graph. A 429
// blocks every request to the account until its Retry-After; on an account
// whose responses carry no rate-limit headers it also halves how many
// requests may be in flight, which then grows back by one per round trip
// (additive increase, multiplicative decrease, as TCP does).
//
// The budgets are token buckets, as OpenAI and Anthropic document theirs:
// a capacity replenished continuously. A response's headers say what was
// left when the server took its request in. Requests reach the server, and
// answers come back, in any order, so the pacer keeps the lowest level any
// answer showed (replenished since at the pace the resets tell: it is the
// latest state the server showed), and takes off it what it sent whose
// answer has not come. Some of those the server may have counted already,
// so the pace errs on the slow side while answers are on their way, and is
// exact once they are all in.
package quota

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/noderun/noderun/provider/ratelimit"
)

// Limits are an account's limits as a graph declares them (`limits:` on a
// provider); zero fields are not declared. The declared limits bound the
// pace on top of what the provider's headers say: a graph may use less
// than the account's quota.
type Limits struct {
	RequestsPerMinute int
	TokensPerMinute   int
	// Concurrency bounds the requests in flight at once.
	Concurrency int
}

// ErrOverLimit is the error of a request that needs more tokens than the
// account's whole per-minute budget: no wait lets it through.
var ErrOverLimit = errors.New("the request needs more tokens than the provider's tokens-per-minute limit")

// Request is what a node asks the pacer for.
type Request struct {
	// Order is the node's place in the graph: waiting requests go in this
	// order.
	Order int
	// Input is the request's input tokens (an estimate); MaxOutput its
	// bound on output tokens, 0 when it sets none (the pacer then counts
	// the output its account's requests have had on average).
	Input, MaxOutput int
	// Front puts the request before every request that is not: a node
	// parked by a 429 had its turn already.
	Front bool
	// OnWait is called from Wait's goroutine when the request has to wait,
	// with how long until the budget it waits for has replenished (0 when
	// not known: the first answer has not come), and once more when that
	// becomes known.
	OnWait func(resetsIn time.Duration)
}

// Pacer paces one account. Its methods are safe for concurrent use.
type Pacer struct {
	now      func() time.Time
	declared Limits

	mu     sync.Mutex
	own    [2]bucket // the declared limits, kept by our own count: requests, tokens
	srv    [2]bucket // the provider's level, learnt from its headers: requests, tokens
	mode   mode
	probe  *Ticket   // the first request, whose answer tells the limits
	block  time.Time // nothing is sent before this (a 429's Retry-After)
	flight int       // requests admitted and not yet ended
	window float64   // AIMD bound on flight after a 429 without headers (0: none)
	// unheard sums what the requests sent and not answered yet were
	// charged (requests, tokens).
	unheard [2]float64
	outAvg  float64 // output tokens per request, learnt; 0: not yet
	queue   waiters
}

type mode uint8

const (
	modeUnknown   mode = iota // nothing learnt: the first request probes
	modeProbing               // the probe is in flight; the rest wait for its headers
	modeLimited               // the headers told the limits
	modeUnlimited             // the answers carry no rate-limit headers
)

// NewPacer returns a pacer for an account with the declared limits (zero:
// none), reading the clock with now (nil: time.Now).
func NewPacer(declared Limits, now func() time.Time) *Pacer {
	if now == nil {
		now = time.Now
	}
	p := &Pacer{now: now, declared: declared}
	if declared != (Limits{}) {
		// The graph says how to pace: no probe. The headers, when they
		// come, may only slow it down.
		p.mode = modeUnlimited
	}
	t := now()
	p.own[0].declare(float64(declared.RequestsPerMinute), t)
	p.own[1].declare(float64(declared.TokensPerMinute), t)
	return p
}

// Ticket is one admitted request. Observe each response it gets, then Done.
type Ticket struct {
	p     *Pacer
	cost  [2]float64
	input int
	heard bool // its answer came (or it ended without one)
	done  bool
}

// Wait blocks until the account's budget lets r's request be sent, in
// graph order, or ctx ends. It returns the admitted request's ticket and
// how long it waited.
func (p *Pacer) Wait(ctx context.Context, r Request) (*Ticket, time.Duration, error) {
	start := p.now()
	p.mu.Lock()
	cost := p.costLocked(r)
	if err := p.overLimitLocked(r); err != nil {
		p.mu.Unlock()
		return nil, 0, err
	}
	if len(p.queue) == 0 && p.delayLocked(cost, start) == 0 {
		t := p.admitLocked(cost, r.Input)
		p.mu.Unlock()
		return t, 0, nil
	}
	w := &waiter{order: r.Order, front: r.Front, ready: make(chan struct{}, 1)}
	heap.Push(&p.queue, w)
	p.notifyHeadLocked()
	p.mu.Unlock()

	told, toldUnknown := false, false
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		var wake <-chan time.Time
		if p.queue[0] == w {
			now := p.now()
			cost = p.costLocked(r) // what was learnt meanwhile
			d := p.delayLocked(cost, now)
			if d == 0 {
				heap.Pop(&p.queue)
				t := p.admitLocked(cost, r.Input)
				p.notifyHeadLocked()
				p.mu.Unlock()
				return t, p.now().Sub(start), nil
			}
			if d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				wake = timer.C
			}
		}
		resets := p.resetsInLocked(p.now())
		p.mu.Unlock()
		if r.OnWait != nil && (!told || (toldUnknown && resets > 0)) {
			told, toldUnknown = true, resets == 0
			r.OnWait(resets)
		}
		select {
		case <-wake:
		case <-w.ready:
		case <-ctx.Done():
			p.mu.Lock()
			heap.Remove(&p.queue, w.index)
			p.notifyHeadLocked()
			p.mu.Unlock()
			return nil, p.now().Sub(start), context.Cause(ctx)
		}
	}
}

// Observe takes in a response the account gave outside any ticket (a
// status check): its headers say what is left.
func (p *Pacer) Observe(status int, h http.Header) { p.observe(nil, status, h) }

// Observe takes in a response to t's request.
func (t *Ticket) Observe(status int, h http.Header) { t.p.observe(t, status, h) }

// Done ends t's request: it no longer counts as in flight, and output, the
// output tokens it produced (0 when it produced none or is unknown), teaches
// the pacer what a request costs.
func (t *Ticket) Done(output int) {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	p.flight--
	p.hearLocked(t)
	if output > 0 {
		if p.outAvg == 0 {
			p.outAvg = float64(output)
		} else {
			p.outAvg += (float64(output) - p.outAvg) / 8 // a moving average over ~8 requests
		}
	}
	if p.mode == modeProbing && p.probe == t {
		p.mode, p.probe = modeUnlimited, nil // it ended without a header: nothing to learn
	}
	p.notifyHeadLocked()
}

func (p *Pacer) observe(t *Ticket, status int, h http.Header) {
	now := p.now()
	snap, ok := ratelimit.Parse(h, now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if t != nil {
		p.hearLocked(t)
	}
	if ok {
		tokens := tokenWindow(snap)
		if p.mode != modeLimited && tokens.Known() && t != nil && t == p.probe && p.outAvg == 0 && status < 400 {
			// The first request of the account met a full bucket: what it
			// was charged beyond its input is what a request's output costs
			// (a refused one was charged nothing: its level says nothing).
			if charged := float64(tokens.Limit - tokens.Remaining); charged > float64(t.input) {
				p.outAvg = charged - float64(t.input)
			}
		}
		p.mode, p.probe = modeLimited, nil
		p.srv[0].sync(snap.Requests, now)
		p.srv[1].sync(tokens, now)
	} else if p.mode == modeProbing && t != nil && t == p.probe {
		p.mode, p.probe = modeUnlimited, nil
	}
	switch {
	case status == http.StatusTooManyRequests:
		ra := snap.RetryAfter
		if ra <= 0 {
			// A limit the answer says is spent comes back at its reset
			// (x-ratelimit-reset-*, anthropic-ratelimit-*-reset): sooner
			// earns another 429. Else what the buckets say, and a second.
			ra = spentReset(snap)
		}
		if ra <= 0 {
			ra = max(p.srv[0].refillIn(1+p.unheard[0], now), p.srv[1].refillIn(1+p.unheard[1], now), time.Second)
		}
		p.block = later(p.block, now.Add(ra))
		if !snap.Requests.Known() && !tokenWindow(snap).Known() { // no budget to pace by: fewer requests in flight
			p.window = math.Max(1, float64(p.flight)/2)
		} else if t != nil {
			// Refused though the budget seemed to allow it: something
			// else spends this account's quota (another worker, another
			// program). Take a smaller share of what replenishes.
			p.setShare(max(minShare, p.share()*0.7))
		}
	case status < 400:
		if p.window > 0 {
			p.window += 1 / p.window
		}
		if t != nil && p.share() < 1 {
			p.setShare(min(1, p.share()+shareGrowth)) // grows back slowly: an answer at a time
		}
	}
	p.notifyHeadLocked()
}

// spentReset is the latest reset of the limits a 429's headers say are
// spent (nothing remaining), 0 if none says so.
func spentReset(s ratelimit.Snapshot) time.Duration {
	var d time.Duration
	for _, w := range []ratelimit.Window{s.Requests, s.Tokens, s.InputTokens, s.OutputTokens} {
		if w.Known() && w.Remaining == 0 {
			d = max(d, w.Reset)
		}
	}
	return d
}

// Hold keeps every request of the account back until until: a provider
// said when to come back where the pacer cannot read it (Gemini's
// RetryInfo.retryDelay is in a 429's body; an adapter reads it into
// diagnostics.Error.RetryAfter).
func (p *Pacer) Hold(until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.block = later(p.block, until)
	p.notifyHeadLocked()
}

// minShare and shareGrowth bound how far 429s that pacing did not foresee
// slow the pace (to a fifth of what replenishes), and how fast it grows
// back (by a full share over 400 answers).
const (
	minShare    = 0.2
	shareGrowth = 1.0 / 400
)

// share is the part of the provider's replenishment this pacer counts on.
func (p *Pacer) share() float64 {
	if p.srv[0].scale == 0 {
		return 1
	}
	return p.srv[0].scale
}

func (p *Pacer) setShare(f float64) { p.srv[0].scale, p.srv[1].scale = f, f }

// Waiting reports how many requests wait for the budget now.
func (p *Pacer) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// Learnt says what the provider's headers told of its limits: requests and
// tokens per window, 0 when not told.
func (p *Pacer) Learnt() (requests, tokens int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.srv[0].limit), int64(p.srv[1].limit)
}

// costLocked is what r's request spends of each budget.
func (p *Pacer) costLocked(r Request) [2]float64 {
	out := float64(r.MaxOutput)
	if out == 0 {
		out = p.outAvg
	}
	tok := float64(r.Input) + out
	// A request larger than a whole bucket waits for a full one (the
	// estimate may be high); one that cannot fit is refused in Wait.
	for _, b := range []*bucket{&p.own[1], &p.srv[1]} {
		if b.limit > 0 && tok > b.limit {
			tok = b.limit
		}
	}
	return [2]float64{1, tok}
}

// overLimitLocked refuses a request that no budget can ever take: its input
// and its output bound alone exceed a tokens-per-minute limit.
func (p *Pacer) overLimitLocked(r Request) error {
	need := float64(r.Input + r.MaxOutput)
	for _, b := range []*bucket{&p.own[1], &p.srv[1]} {
		if b.limit > 0 && need > b.limit {
			return fmt.Errorf("%w: ~%d tokens (input and max_output_tokens), limit %d per minute", ErrOverLimit, int(need), int(b.limit))
		}
	}
	return nil
}

// delayLocked is how long a request of cost must wait now: 0 to go, -1 to
// wait for an answer or a release (no clock can tell).
func (p *Pacer) delayLocked(cost [2]float64, now time.Time) time.Duration {
	if p.mode == modeProbing {
		return -1 // the probe's headers say how much to send
	}
	if c := p.concurrency(); c > 0 && p.flight >= c {
		return -1
	}
	var d time.Duration
	if now.Before(p.block) {
		d = p.block.Sub(now)
	}
	for i := range 2 {
		d = max(d, p.own[i].refillIn(cost[i], now), p.srv[i].refillIn(cost[i]+p.unheard[i], now))
	}
	return d
}

// concurrency is the bound on requests in flight, 0 for none.
func (p *Pacer) concurrency() int {
	c := p.declared.Concurrency
	if p.window > 0 && (c == 0 || int(p.window) < c) {
		c = int(p.window)
	}
	return c
}

func (p *Pacer) admitLocked(cost [2]float64, input int) *Ticket {
	now := p.now()
	for i := range 2 {
		p.own[i].take(cost[i], now)
		p.unheard[i] += cost[i] // the server's level goes down when its answer shows it
	}
	t := &Ticket{p: p, cost: cost, input: input}
	p.flight++
	if p.mode == modeUnknown {
		p.mode, p.probe = modeProbing, t
	}
	return t
}

// resetsInLocked is how long until the budgets that hold requests back are
// full again, or the block ends.
func (p *Pacer) resetsInLocked(now time.Time) time.Duration {
	var d time.Duration
	if now.Before(p.block) {
		d = p.block.Sub(now)
	}
	for i := range 2 {
		d = max(d, p.own[i].fullIn(now), p.srv[i].fullIn(now))
	}
	return d
}

// hearLocked takes t off the requests not answered yet.
func (p *Pacer) hearLocked(t *Ticket) {
	if !t.heard {
		t.heard = true
		p.unheard[0] -= t.cost[0]
		p.unheard[1] -= t.cost[1]
	}
}

// notifyHeadLocked wakes the first waiter to look again.
func (p *Pacer) notifyHeadLocked() {
	if len(p.queue) > 0 {
		select {
		case p.queue[0].ready <- struct{}{}:
		default:
		}
	}
}

// tokenWindow is the token budget that binds: the total one where the
// provider states it, else the tighter of input and output.
func tokenWindow(s ratelimit.Snapshot) ratelimit.Window {
	if s.Tokens.Known() {
		return s.Tokens
	}
	w := s.InputTokens
	if !w.Known() || (s.OutputTokens.Known() && s.OutputTokens.Remaining < w.Remaining) {
		w = s.OutputTokens
	}
	return w
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// bucket is a token bucket: limit units, replenished at rate a second.
type bucket struct {
	limit float64 // 0: no limit known
	avail float64
	rate  float64 // per second
	// scale is the part of rate this pacer counts on (0: all of it): less
	// when something else spends the same budget.
	scale float64
	used  float64 // the most an answer said was used: what rate was learnt from
	at    time.Time
}

func (b *bucket) declare(perMinute float64, now time.Time) {
	if perMinute > 0 {
		*b = bucket{limit: perMinute, avail: perMinute, rate: perMinute / 60, at: now}
	}
}

func (b *bucket) refill(now time.Time) {
	if b.limit == 0 {
		return
	}
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.avail = math.Min(b.limit, b.avail+b.pace()*dt)
	}
	b.at = now
}

// refillIn is how long until the bucket holds n.
func (b *bucket) refillIn(n float64, now time.Time) time.Duration {
	if b.limit == 0 {
		return 0
	}
	b.refill(now)
	if b.avail >= n {
		return 0
	}
	if b.rate <= 0 {
		return time.Second // nothing learnt of its pace: look again soon
	}
	return time.Duration(math.Ceil((n - b.avail) / b.pace() * float64(time.Second)))
}

// pace is the rate the bucket replenishes at, for this pacer.
func (b *bucket) pace() float64 {
	if b.scale > 0 {
		return b.rate * b.scale
	}
	return b.rate
}

func (b *bucket) fullIn(now time.Time) time.Duration { return b.refillIn(b.limit, now) }

func (b *bucket) take(n float64, now time.Time) {
	if b.limit == 0 {
		return
	}
	b.refill(now)
	b.avail -= n
}

// sync learns the limit and its pace from what a response said, and the
// level it showed: the lowest level shown is the latest state of the
// server, so the bucket only ever goes down to it (the first answer sets
// it), and replenishes from there.
func (b *bucket) sync(w ratelimit.Window, now time.Time) {
	if !w.Known() {
		return
	}
	b.limit = float64(w.Limit)
	// The pace is what was used over how long it takes to replenish. The
	// remaining count is whole (a floor), so the answer with the most
	// used tells it best.
	if used := float64(w.Limit - w.Remaining); used > 0 && w.Reset > 0 && used >= b.used {
		b.rate, b.used = used/w.Reset.Seconds(), used
	} else if b.rate == 0 {
		b.rate = b.limit / 60 // a per-minute limit, until a reset says otherwise
	}
	// What is left, to a fraction: a bucket full again in Reset holds
	// limit - rate*Reset (the floor would lose up to one request a cycle).
	level := float64(w.Remaining)
	if w.Reset > 0 {
		level = max(level, b.limit-b.rate*w.Reset.Seconds())
	}
	b.refill(now)
	if b.at.IsZero() || level < b.avail {
		b.avail = level
	}
	b.at = now
}

// waiter is a request waiting in the queue.
type waiter struct {
	order int
	front bool
	index int
	ready chan struct{}
}

// waiters is a heap: front ones first, then by graph order.
type waiters []*waiter

func (q waiters) Len() int { return len(q) }
func (q waiters) Less(i, j int) bool {
	if q[i].front != q[j].front {
		return q[i].front
	}
	return q[i].order < q[j].order
}
func (q waiters) Swap(i, j int) { q[i], q[j] = q[j], q[i]; q[i].index = i; q[j].index = j }
func (q *waiters) Push(x any)   { w := x.(*waiter); w.index = len(*q); *q = append(*q, w) }
func (q *waiters) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return w
}
