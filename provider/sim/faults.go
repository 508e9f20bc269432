package sim

import (
	"slices"
	"sync"
)

// NodeHeader is the request header that names the graph node a request is
// for; noderun's adapters set it. Clients that cannot set headers may put
// the node in the request's metadata under NodeMetadata instead.
// AttemptHeader numbers the node's attempt a request belongs to
// (Stats.Nodes[...].Generations are counted by it).
const (
	NodeHeader    = "X-Noderun-Node"
	NodeMetadata  = "noderun_node"
	AttemptHeader = "X-Noderun-Attempt"
)

// interactionEndpoints answer errors in Google's shape (writeGeminiError).
var interactionEndpoints = []string{EndpointInteractionsCreate, EndpointInteractionsGet, EndpointInteractionsStream, EndpointInteractionsCancel}

// faultSet holds the scripted faults and how often each was used.
type faultSet struct {
	mu     sync.Mutex
	faults []*armed
}

type armed struct {
	Fault
	used int
}

func (fs *faultSet) add(f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.Requests = slices.Clone(f.Requests)
	fs.faults = append(fs.faults, &armed{Fault: f})
}

// call is what a fault is matched against: one request.
type call struct {
	endpoint   string
	n          int64  // the request's number on its endpoint, over the server's life (since a reset)
	node       string // the graph node it is for, "" when the client did not say
	nodeN      int64  // the node's request number on this endpoint, 0 without a node
	attempt    int    // the node's attempt (AttemptHeader), 0 when the client did not say
	responseID string
}

// match returns the fault for c, and spends one of its uses; nil when none
// applies. It is the one place where faults are matched to requests: every
// endpoint calls it with the call it is answering.
func (fs *faultSet) match(c call) *Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, a := range fs.faults {
		n := c.n
		if a.Node != "" {
			n = c.nodeN
		}
		switch {
		case a.Kind == FaultRefuse,
			a.Kind == FaultQueued && c.endpoint != EndpointResponsesCreate,
			a.Kind == FaultErrorEvent && c.endpoint != EndpointMessages,
			a.Endpoint != "" && a.Endpoint != c.endpoint,
			a.Node != "" && a.Node != c.node,
			a.ResponseID != "" && a.ResponseID != c.responseID,
			!a.take(n):
			continue
		}
		f := a.Fault
		return &f
	}
	return nil
}

// reset drops every fault.
func (fs *faultSet) reset() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = nil
}

// refuse reports whether connection n is to be refused, spending a use.
func (fs *faultSet) refuse(n int64) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, a := range fs.faults {
		if a.Kind == FaultRefuse && a.take(n) {
			return true
		}
	}
	return false
}

// take spends a use if number n is one of the fault's and uses are left.
func (a *armed) take(n int64) bool {
	if len(a.Requests) > 0 && !slices.Contains(a.Requests, int(n)) {
		return false
	}
	if a.Times > 0 && a.used >= a.Times {
		return false
	}
	a.used++
	return true
}
