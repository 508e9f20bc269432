package harness

import (
	"testing"
	"time"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/providertest"
	"github.com/noderun/noderun/provider/sim"
)

// Issue 44: the agent-CLI adapter keeps the adapter contract
// (providertest) with the real Codex CLI against the simulator, cut for
// real. Codex retries a dropped stream once by itself, so a cut is two
// drops in a row; its resume is a new turn on the same thread, answering
// the descriptor's continue prompt.
func TestConformance(t *testing.T) {
	t.Parallel()
	rig := newCodex(t)
	providertest.Test(t, providertest.Config{
		New:         func() provider.Provider { return rig.prov },
		Request:     codexReq,
		Want:        simText(codexReq.Prompt),
		WantResumed: simText(rig.prov.Descriptor().ContinuePrompt),
		CutNext: func(after int) {
			rig.sim.AddFault(sim.Fault{Endpoint: sim.EndpointResponsesCreate, Kind: sim.FaultClose, AfterEvents: after, Times: 2})
		},
		CutAfter: 2,
		Timeout:  90 * time.Second,
	})
}
