package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
)

// ErrNodeTimeout is (wrapped in) the error of a node whose timeout passed.
var ErrNodeTimeout = errors.New("node timeout")

// nodeTimeout is the cause of a node context that its timeout ended.
type nodeTimeout struct{ d time.Duration }

func (e *nodeTimeout) Error() string {
	return fmt.Sprintf("the node's timeout (%s) passed", profile.FormatDuration(e.d))
}
func (e *nodeTimeout) Is(target error) bool { return target == ErrNodeTimeout }

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
