package provider

import (
	"context"
	"net/http"
	"strconv"
)

// NodeHeader names the graph node an HTTP request is for. Adapters send it
// on every request so that the simulator can aim a fault at one node's
// requests whatever the scheduling (and a gateway's log can tell nodes
// apart); real providers ignore it. The simulator reads the same name.
const NodeHeader = "X-Noderun-Node"

// AttemptHeader numbers the node's attempt a request belongs to (1-based),
// so that a server's counts can be set against each attempt's (the
// simulator's Stats.Nodes[...].Generations).
const AttemptHeader = "X-Noderun-Attempt"

type nodeKey struct{}

type attemptKey struct{}

// WithAttempt returns ctx carrying the node's attempt number.
func WithAttempt(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

// AttemptOf is the attempt number ctx carries, 0 when none.
func AttemptOf(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// WithNode returns ctx carrying the node that work done under it is for.
func WithNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, nodeKey{}, node)
}

// NodeOf is the node ctx carries, "" when none.
func NodeOf(ctx context.Context) string {
	n, _ := ctx.Value(nodeKey{}).(string)
	return n
}

// MarkNode sets NodeHeader (and AttemptHeader) on r from its context, if
// it carries a node (an attempt).
func MarkNode(r *http.Request) {
	if n := NodeOf(r.Context()); n != "" {
		r.Header.Set(NodeHeader, n)
	}
	if n := AttemptOf(r.Context()); n > 0 {
		r.Header.Set(AttemptHeader, strconv.Itoa(n))
	}
}

// ResponseObserver is told the status and headers of every HTTP response an
// adapter receives for work done under a context that carries it: the
// runner learns a provider's rate limits from them (package ratelimit)
// without each adapter knowing about pacing. It must return quickly and
// must not keep h.
type ResponseObserver func(status int, h http.Header)

type observerKey struct{}

// WithResponseObserver returns ctx carrying f (see ResponseObserver).
func WithResponseObserver(ctx context.Context, f ResponseObserver) context.Context {
	return context.WithValue(ctx, observerKey{}, f)
}

// Send sends r with c the way every adapter sends: marked with its node
// (MarkNode), and its response shown to the context's ResponseObserver.
func Send(c *http.Client, r *http.Request) (*http.Response, error) {
	MarkNode(r)
	resp, err := c.Do(r)
	if resp != nil {
		if f, ok := r.Context().Value(observerKey{}).(ResponseObserver); ok && f != nil {
			f(resp.StatusCode, resp.Header)
		}
	}
	return resp, err
}
