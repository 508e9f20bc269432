// Package conns bounds how many connections an adapter opens to one host at
// once. A wide graph starts thousands of streams together, and a breaker
// that closes lets every waiting node go again: dialed all at once, the
// connects overflow the server's listen backlog and time out (at 5,000
// nodes 38 dials did, each costing a retry). With at most MaxDials connects
// in flight per host the rest wait their turn, bounded only by their
// context, and each connect gets its whole dial timeout for itself.
package conns

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxDials is the default bound on concurrent connects per host:
// enough to open 10,000 streams on loopback in well under a second, few
// enough for any listen backlog (Linux: 4096 by default, 128 on old
// kernels).
const DefaultMaxDials = 32

// DialFunc is the signature of net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Limit returns dial bounded to n concurrent dials per address (n <= 0
// means DefaultMaxDials). Waiting for a turn ends with ctx.
func Limit(dial DialFunc, n int) DialFunc {
	if n <= 0 {
		n = DefaultMaxDials
	}
	var mu sync.Mutex
	slots := map[string]chan struct{}{} // by address: one per host a provider talks to
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		s, ok := slots[addr]
		if !ok {
			s = make(chan struct{}, n)
			slots[addr] = s
		}
		mu.Unlock()
		select {
		case s <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		defer func() { <-s }()
		return dial(ctx, network, addr)
	}
}

// MaxIdlePerHost is how many idle connections a transport keeps per host
// for reuse (HTTP keep-alive): a node's next request, a status check or a
// re-attach reuses one instead of dialing again.
const MaxIdlePerHost = 64

// Transport is the adapters' HTTP transport: http.DefaultTransport's
// settings, connects bounded by dialTimeout and, per host, by maxDials at
// once (Limit), reads paced by ReadGap (Paced) while PacedFrom requests or
// more are in flight (their waits ending on FineTick while fewer than
// CoarseFrom are), keep-alive reuse of up to MaxIdlePerHost idle
// connections per host, and response headers awaited at most headerTimeout
// (0: no bound).
func Transport(maxDials int, dialTimeout, headerTimeout time.Duration) http.RoundTripper {
	t := &counted{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	dial := Limit((&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext, maxDials)
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		pc := Paced(c, ReadGap).(*pacedConn)
		pc.inFlight = t.inFlight.Load
		return pc, nil
	}
	t.ResponseHeaderTimeout = headerTimeout
	t.MaxIdleConnsPerHost = MaxIdlePerHost
	t.MaxIdleConns = 0 // no bound across hosts beyond the per-host one
	return t
}

// counted is a transport that counts its requests in flight: from the
// request sent to its answer's body ended (read to its end or to an error)
// or closed, whichever comes first.
type counted struct {
	*http.Transport
	inFlight atomic.Int64
}

func (t *counted) RoundTrip(req *http.Request) (*http.Response, error) {
	t.inFlight.Add(1)
	resp, err := t.Transport.RoundTrip(req)
	if err != nil {
		t.inFlight.Add(-1)
		return resp, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, ended: sync.OnceFunc(func() { t.inFlight.Add(-1) })}
	return resp, nil
}

// countedBody is an answer's body that says once when it ended.
type countedBody struct {
	io.ReadCloser
	ended func()
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.ended()
	}
	return n, err
}

func (b *countedBody) Close() error {
	b.ended()
	return b.ReadCloser.Close()
}

// Owned is the HTTP client an adapter made for itself, if it made one (Own).
// Its Close closes that client's idle keep-alive connections, so that a
// program running one graph after another does not keep every run's
// connections, and the server's goroutines behind them, until they time out
// (90 s). A client the caller passed is not owned: it is the caller's to
// close. Close does not stop streams in flight; the client dials again if
// it is used after.
type Owned struct{ client *http.Client }

// Own returns c, or when c is nil the client mk makes, with what the adapter
// owns of it.
func Own(c *http.Client, mk func() *http.Client) (*http.Client, Owned) {
	if c != nil {
		return c, Owned{}
	}
	c = mk()
	return c, Owned{c}
}

// Close closes the idle connections of an owned client.
func (o Owned) Close() error {
	if o.client != nil {
		o.client.CloseIdleConnections()
	}
	return nil
}
