package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// BenchmarkLoadNodeOf: the account of one node that settled, as a Temporal
// worker and the telemetry read it when the node ends, for a node that
// streamed 20 chunks and one that streamed 300 (a 10 s answer), in a run
// of 50 nodes, and one of 20 chunks in a run of 3,000 (a wide run's worker
// accounts for each of its nodes: the cost of one must not grow with the
// run's width).
func BenchmarkLoadNodeOf(b *testing.B) {
	for _, c := range []struct{ chunks, nodes int }{{20, 50}, {300, 50}, {20, 3000}} {
		chunks, nodes := c.chunks, c.nodes
		b.Run(fmt.Sprintf("chunks=%d/nodes=%d", chunks, nodes), func(b *testing.B) {
			ctx := context.Background()
			j := testkit.TempJournal(b, "bench.db")
			ids := make([]string, nodes)
			for i := range ids {
				ids[i] = fmt.Sprint("node", i)
			}
			check := testkit.Check(b)
			check(j.CreateRun(ctx, journal.Run{ID: "run", Graph: "bench"}))
			check(j.SetNodesPending(ctx, "run", ids))
			for _, id := range ids {
				check(j.StartNode(ctx, "run", id, ""))
				n, err := j.BeginAttempt(ctx, "run", id, journal.ModeStart, "sim")
				check(err)
				for i := range chunks {
					check(j.Append(journal.Event{RunID: "run", NodeID: id, Attempt: n, Kind: journal.KindDelta, ProviderSeq: int64(i),
						Payload: []byte(`{"text":" the quick brown fox jumps over"}`)}))
				}
				check(j.RecordUsage("run", id, n, journal.Usage{Model: "sim", OutputTokens: chunks}))
				check(j.EndAttempt(ctx, "run", id, n, journal.AttemptEnd{Outcome: journal.OutcomeOK, Cursor: int64(chunks)}))
				check(j.CompleteNode(ctx, "run", id, "output"))
			}
			check(j.Flush(ctx))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				nd, err := ledger.LoadNodeOf(ctx, j, nil, "run", ids[i%nodes])
				check(err)
				if na := ledger.AccountNode(nd, nil); na.Tokens.Generated != chunks {
					b.Fatalf("%d tokens generated, want %d", na.Tokens.Generated, chunks)
				}
			}
		})
	}
}
