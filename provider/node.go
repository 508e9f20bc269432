package provider

import (
	"context"
	"net/http"
)

// NodeHeader names the graph node an HTTP request is for. Adapters send it
// on every request so that the simulator can aim a fault at one node's
// requests whatever the scheduling (and a gateway's log can tell nodes
// apart); real providers ignore it. The simulator reads the same name.
const NodeHeader = "X-Noderun-Node"

type nodeKey struct{}

// WithNode returns ctx carrying the node that work done under it is for.
func WithNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, nodeKey{}, node)
}

// NodeOf is the node ctx carries, "" when none.
func NodeOf(ctx context.Context) string {
	n, _ := ctx.Value(nodeKey{}).(string)
	return n
}

// MarkNode sets NodeHeader on r from its context, if it carries a node.
func MarkNode(r *http.Request) {
	if n := NodeOf(r.Context()); n != "" {
		r.Header.Set(NodeHeader, n)
	}
}
