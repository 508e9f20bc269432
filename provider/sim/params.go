package sim

import (
	"fmt"
	"strconv"
	"time"
)

// Metadata keys that override the server's Config for one request.
const (
	MetaTokens          = "sim_tokens"
	MetaTokensPerSecond = "sim_tokens_per_second"
	MetaSilence         = "sim_silence"
	MetaBurstTokens     = "sim_burst_tokens"
	MetaKeepalive       = "sim_keepalive"
)

// maxTokensLimit bounds one response so a typo cannot eat the machine.
const maxTokensLimit = 1 << 18

// params is how one request is generated: its length, pace and silences.
type params struct {
	tokens    int  // tokens to produce
	cut       bool // the request's max cut the natural length
	tps       float64
	silence   time.Duration
	burst     int
	keepalive time.Duration
	clock     *clock // the stream's schedule; one per request
}

// params resolves a request's params from the Config, the request's max
// tokens (0 = none) and its metadata.
func (s *Server) params(max int, md map[string]any) (params, error) {
	p := params{
		tps:       s.cfg.TokensPerSecond,
		silence:   s.cfg.Silence,
		burst:     s.cfg.BurstTokens,
		keepalive: s.cfg.Keepalive,
		clock:     new(clock),
	}
	// The natural length is the model's, not the request's: a max below it
	// cuts the text, as the real API does (finish_reason "length",
	// response.incomplete).
	natural := s.cfg.Tokens
	if v, ok := md[MetaTokens]; ok {
		n, err := metaInt(MetaTokens, v)
		if err != nil {
			return p, err
		}
		natural = n
	}
	if v, ok := md[MetaTokensPerSecond]; ok {
		f, err := metaFloat(MetaTokensPerSecond, v)
		if err != nil {
			return p, err
		}
		p.tps = f
	}
	if v, ok := md[MetaBurstTokens]; ok {
		n, err := metaInt(MetaBurstTokens, v)
		if err != nil {
			return p, err
		}
		p.burst = n
	}
	for _, k := range []string{MetaSilence, MetaKeepalive} {
		v, ok := md[k]
		if !ok {
			continue
		}
		d, err := metaDuration(k, v)
		if err != nil {
			return p, err
		}
		if k == MetaSilence {
			p.silence = d
		} else {
			p.keepalive = d
		}
	}
	if natural > maxTokensLimit {
		return p, fmt.Errorf("%s: at most %d tokens", MetaTokens, maxTokensLimit)
	}
	p.tokens = natural
	if max > 0 && max < natural {
		p.tokens, p.cut = max, true
	}
	return p, nil
}

// wait is how long to pause before output token i; the caller pauses that
// long and sends the token. The first token waits for the reasoning silence
// (unless reasoning already paid it), the first token of each burst waits
// for the silence again, every other token for the pace.
func (p params) wait(i int, silenced bool) time.Duration {
	switch {
	case i == 0 && !silenced && p.silence > 0:
		return p.clock.silence(time.Now(), p.silence)
	case i > 0 && p.burst > 0 && i%p.burst == 0 && p.silence > 0:
		return p.clock.silence(time.Now(), p.silence)
	case i > 0 && p.tps > 0:
		return p.clock.gap(time.Now(), time.Duration(float64(time.Second)/p.tps))
	}
	p.clock.silence(time.Now(), 0)
	return 0
}

// A clock paces a stream's tokens. A timer cannot sleep less than about a
// millisecond (the runtime's poller waits whole milliseconds), so a sleep
// of 50 µs per token paced a stream asked for 20,000 tokens a second at
// 1,000 at most. A pace finer than a millisecond a token is kept by a
// schedule instead, on average: a token due within the timer's resolution
// is sent at once, and a pause is taken once the schedule is a millisecond
// or more ahead. A coarser pace is a sleep per token, as before: each gap
// whole, as a model's tokens come, and late (never bunched) when the
// machine is loaded, which the tests that interrupt a stream midway count on.
type clock struct {
	due time.Time // when the last token was (or is to be) sent
}

const (
	// minPause is the shortest pause taken: a timer's resolution.
	minPause = time.Millisecond
	// maxLag bounds how far behind its schedule a stream catches up, in a
	// burst, after a writer held it up (a slow reader, a fault): a silence
	// is never eaten, and a burst is at most 50 ms of tokens.
	maxLag = 50 * time.Millisecond
)

// silence is the pause before a token that comes d after now (d may be 0):
// a silence is measured from the moment, not from the schedule.
func (c *clock) silence(now time.Time, d time.Duration) time.Duration {
	c.due = now.Add(d)
	return d
}

// gap is the pause before a token due d after the last one.
func (c *clock) gap(now time.Time, d time.Duration) time.Duration {
	if d >= minPause {
		c.due = now.Add(d)
		return d
	}
	if c.due.Before(now.Add(-maxLag)) {
		c.due = now.Add(-maxLag)
	}
	c.due = c.due.Add(d)
	if w := c.due.Sub(now); w >= minPause {
		return w
	}
	return 0
}

func metaInt(k string, v any) (int, error) {
	var n int64
	var err error
	switch x := v.(type) {
	case string:
		n, err = strconv.ParseInt(x, 10, 64)
	case float64:
		n = int64(x)
		if float64(n) != x {
			err = fmt.Errorf("not an integer")
		}
	default:
		err = fmt.Errorf("want a number")
	}
	if err != nil || n < 0 || n > maxTokensLimit {
		return 0, fmt.Errorf("metadata %s: want an integer in [0, %d], got %v", k, maxTokensLimit, v)
	}
	return int(n), nil
}

func metaFloat(k string, v any) (float64, error) {
	var f float64
	var err error
	switch x := v.(type) {
	case string:
		f, err = strconv.ParseFloat(x, 64)
	case float64:
		f = x
	default:
		err = fmt.Errorf("want a number")
	}
	if err != nil || f < 0 || f != f || f > 1e9 {
		return 0, fmt.Errorf("metadata %s: want a number >= 0, got %v", k, v)
	}
	return f, nil
}

// metaDuration reads a Go duration string ("1.5s") or a number of seconds.
func metaDuration(k string, v any) (time.Duration, error) {
	var d time.Duration
	var err error
	switch x := v.(type) {
	case string:
		d, err = time.ParseDuration(x)
	case float64:
		if x > 1e6 {
			err = fmt.Errorf("too long")
		}
		d = time.Duration(x * float64(time.Second))
	default:
		err = fmt.Errorf("want a duration")
	}
	if err != nil || d < 0 || d > 24*time.Hour {
		return 0, fmt.Errorf("metadata %s: want a duration like \"1.5s\" (at most 24h), got %v", k, v)
	}
	return d, nil
}
