package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// BenchmarkRecoveryCost measures what one drop costs a chat node, as the
// simulator counts it: a 120-token answer dropped at half way, recovered by
// a retry from scratch (continuation: none) or by continuing the delivered
// prefix. It reports the output tokens generated again per drop (the
// simulator's tokens_generated beyond the answer's length), the bytes of
// partial output re-sent as input per drop (NR108's resent_prefix_bytes),
// and the chat requests per drop.
func BenchmarkRecoveryCost(b *testing.B) {
	const tokens = 120
	for _, mode := range []struct{ name, form string }{{"retry", "none"}, {"continue", "prefix"}} {
		b.Run(mode.name, func(b *testing.B) {
			srv := simtest.Start(b, sim.Config{Seed: 1, Tokens: tokens})
			dir := b.TempDir()
			j := testkit.OpenJournal(b, filepath.Join(dir, "bench.db"))
			path := filepath.Join(dir, "g.yaml")
			src := fmt.Sprintf("name: bench\nprofile: ci\nproviders:\n  p: {kind: openai, base_url: %s, model: sim, continuation: %s}\nnodes:\n  - id: n\n    prompt: bench\n", srv.BaseURL(), mode.form)
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				b.Fatal(err)
			}
			g, err := LoadGraph(path)
			if err != nil {
				b.Fatal(err)
			}
			var resent float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Times: 1, Kind: sim.FaultClose, AfterEvents: 1 + tokens/2})
				res, err := Run(context.Background(), g, Options{Journal: j, Cache: noCache})
				if err != nil || res.Status != journal.RunCompleted {
					b.Fatalf("%v %+v", err, res)
				}
				resent += recoveredAttr(b, j, res.RunID, "resent_prefix_bytes")
			}
			b.StopTimer()
			st := srv.Stats()
			drops := float64(st.Faults[string(sim.FaultClose)])
			b.ReportMetric(float64(st.TokensGenerated-int64(tokens*b.N))/drops, "regenerated-tokens/drop")
			b.ReportMetric(resent/drops, "resent-prefix-bytes/drop")
			b.ReportMetric(float64(st.Requests[sim.EndpointChat])/drops, "requests/drop")
		})
	}
}

// recoveredAttr reads a numeric attribute of the node's NR108 (recovered).
func recoveredAttr(b *testing.B, j *journal.Journal, run, name string) float64 {
	const node = "n"
	evs, err := j.Events(context.Background(), run, journal.EventFilter{Node: node, Kinds: []string{"diagnostic"}, AfterSeq: -1})
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range evs {
		if e.Code != diagnostics.Recovered.ID {
			continue
		}
		var p struct {
			Attrs map[string]any `json:"attrs"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			b.Fatal(err)
		}
		v, _ := p.Attrs[name].(float64)
		return v
	}
	b.Fatalf("no NR108 for %s", node)
	return 0
}
