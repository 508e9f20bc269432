package runner

import (
	"fmt"

	"github.com/noderun/noderun/diagnostics"
)

// NodeError is why a node failed: its class, the decision that ended it, and
// what was tried, in words an operator can act on.
type NodeError struct {
	Node   string
	Class  diagnostics.Class
	Code   diagnostics.Code
	Reason string
	Tried  string
	Err    error
	// Running names the response left running at the provider by an
	// interruption, which `noderun resume` re-attaches to.
	Running string
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("node %q failed [%s %s]: %v; %s (tried: %s)", e.Node, e.Code.ID, e.Code.Name, e.Err, e.Reason, e.Tried)
}

func (e *NodeError) Unwrap() error { return e.Err }
