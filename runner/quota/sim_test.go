package quota_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/quota"
)

// send posts one chat request to the simulator, admitted by p, and reads
// its answer to the end; it returns the HTTP status.
func send(t *testing.T, p *quota.Pacer, base string, order int) int {
	t.Helper()
	tk, _, err := p.Wait(context.Background(), quota.Request{Order: order, Input: 5})
	if err != nil {
		t.Error(err)
		return 0
	}
	body := fmt.Sprintf(`{"model":"sim","stream":true,"messages":[{"role":"user","content":"n%d"}]}`, order)
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		tk.Done(0)
		return 0
	}
	tk.Observe(resp.StatusCode, resp.Header)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	tk.Done(20)
	return resp.StatusCode
}

// A burst of requests, three times what the simulator's limit lets
// through at once, paced by the headers of its answers: only the first
// request goes before anything is known, and none is refused.
func TestPacerAgainstSimulator(t *testing.T) {
	t.Parallel() // each has a simulator of its own; both mostly wait out its windows
	srv := simtest.Start(t, sim.Config{Tokens: 20, Limits: &sim.Limits{RequestsPerWindow: 10, TokensPerWindow: 100000, Window: 2 * time.Second}})
	p := quota.NewPacer(quota.Limits{}, nil)
	var refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if send(t, p, srv.BaseURL(), i) == http.StatusTooManyRequests {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	// 10 at once, then 20 at 5 a second: 4 s at least.
	if el < 3900*time.Millisecond {
		t.Errorf("30 requests in %s: faster than the limit allows", el)
	}
	if n := refused.Load(); n != 0 || srv.Stats().RateLimited != 0 {
		t.Errorf("%d requests refused (simulator: %d)", n, srv.Stats().RateLimited)
	}
	t.Logf("30 requests in %s", el.Round(time.Millisecond))
}

// Two pacers that share an account without knowing of each other (two
// Temporal workers) meet its limit now and then; each 429 makes the one
// refused take a smaller share of the replenishment, so refusals stop.
func TestTwoPacersShareAnAccount(t *testing.T) {
	t.Parallel() // each has a simulator of its own; both mostly wait out its windows
	srv := simtest.Start(t, sim.Config{Tokens: 20, Limits: &sim.Limits{RequestsPerWindow: 10, TokensPerWindow: 100000, Window: 2 * time.Second}})
	pacers := []*quota.Pacer{quota.NewPacer(quota.Limits{}, nil), quota.NewPacer(quota.Limits{}, nil)}
	var refused [2]atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	const each = 30
	for w, p := range pacers {
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for send(t, p, srv.BaseURL(), i) == http.StatusTooManyRequests { // parked: the same request again
					refused[w].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	el := time.Since(start)
	floor := time.Duration(2*each-10) * 2 * time.Second / 10
	n := refused[0].Load() + refused[1].Load()
	t.Logf("2 x %d requests in %s (floor %s): %d refused (%d, %d)", each, el.Round(time.Millisecond), floor, n, refused[0].Load(), refused[1].Load())
	if n > 2*each/3 {
		t.Errorf("%d of %d requests refused: the pacers did not back off", n, 2*each)
	}
}
