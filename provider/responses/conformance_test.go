package responses

import (
	"strings"
	"testing"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/providertest"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 44: the Responses adapter keeps the adapter contract
// (providertest) against the simulator, cut for real: resume by id and
// cursor, status, cancel.
func TestConformance(t *testing.T) {
	s := simtest.Start(t, sim.Config{Seed: 5, Tokens: 48, TokensPerSecond: 400})
	req := provider.Request{Node: "n", Model: "sim", Prompt: "conformance"}
	providertest.Test(t, providertest.Config{
		New: func() provider.Provider {
			p, err := New(Config{BaseURL: s.BaseURL(), APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: req,
		Want:    strings.Join(sim.Text("sim", req.Prompt, 5, 48), ""),
		CutNext: func(after int) { s.AddFault(sim.Fault{Kind: sim.FaultCut, AfterEvents: after, Times: 1}) },
	})
}
