package gemini

import (
	"testing"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/providertest"
	"github.com/noderun/noderun/provider/sim"
)

// Issue 44: the Interactions adapter keeps the adapter contract
// (providertest) against the simulator, cut for real: re-attach by event
// id from another adapter's cursor and mark, status, cancel.
func TestConformance(t *testing.T) {
	s := startSim(t, sim.Config{Tokens: 48, TokensPerSecond: 400})
	req := simRequest("conformance")
	providertest.Test(t, providertest.Config{
		New: func() provider.Provider {
			p, err := New(Config{BaseURL: "http://" + s.Addr(), APIKey: "sim-key"})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: req,
		Want:    want(req.Prompt, 48),
		CutNext: func(after int) { s.AddFault(sim.Fault{Kind: sim.FaultCut, AfterEvents: after, Times: 1}) },
	})
}
