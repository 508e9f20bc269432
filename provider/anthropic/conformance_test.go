package anthropic

import (
	"strings"
	"testing"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/providertest"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// Issue 44: the Messages adapter keeps the adapter contract (providertest)
// against the simulator, cut for real, without prefill and with it.
func TestConformance(t *testing.T) {
	for _, form := range []provider.Continuation{provider.ContinueNone, provider.ContinuePrefill} {
		t.Run(string(form), func(t *testing.T) {
			s := simtest.Start(t, sim.Config{Seed: 5, Tokens: 48})
			req := provider.Request{Node: "n", Model: "claude-sonnet-4-5", Prompt: "conformance"}
			providertest.Test(t, providertest.Config{
				New:     func() provider.Provider { return New(Config{BaseURL: s.BaseURL(), APIKey: "k", Continuation: form}) },
				Request: req,
				Want:    strings.Join(sim.Text(req.Model, req.Prompt, 5, 48), ""),
				CutNext: func(after int) { s.AddFault(sim.Fault{Kind: sim.FaultCut, AfterEvents: after, Times: 1}) },
			})
		})
	}
}
