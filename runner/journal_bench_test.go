package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/benchstat"
	"github.com/noderun/noderun/journal"
)

// BenchmarkFoldedJournal runs a finished run of 100 nodes × 2,000 tokens
// (the simulator in its own process) and reports the journal's bytes on
// disk against the bytes of the outputs it holds: as the run left it
// (`unfolded-ratio`), and after `noderun compact` (journal.Fold, then
// Vacuum: `folded-ratio`, target <= 1.5), with what compacting took
// (`compact-ms`). Every node's output must still be in its delta events
// after the fold (`lost-bytes`, which must be 0).
func BenchmarkFoldedJournal(b *testing.B) {
	const nodes, tokens = 100, 2000
	base := startSimChild(b, tokens)
	var y strings.Builder
	fmt.Fprintf(&y, "name: fold\nproviders:\n  p: {kind: openai, base_url: %s, model: sim}\nnodes:\n", base)
	for i := range nodes {
		fmt.Fprintf(&y, "  - id: n%d\n    prompt: node %d\n", i, i)
	}
	g, err := ParseGraph(filepath.Join(b.TempDir(), "fold.yaml"), []byte(y.String()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var unfolded, folded, compactMS []float64
	var lost int64
	for range b.N {
		path := filepath.Join(b.TempDir(), "fold.db")
		j, err := journal.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(ctx, g, Options{Journal: j, Parallel: nodes, Cache: noCache})
		if err != nil || res.Status != journal.RunCompleted {
			b.Fatalf("%v %s", err, res.Status)
		}
		var out int64
		outputs := map[string]string{}
		for _, nr := range res.Nodes {
			out += int64(len(nr.Output))
			outputs[nr.ID] = nr.Output
		}
		if err := j.Close(); err != nil { // as a finished run leaves it: no WAL
			b.Fatal(err)
		}
		unfolded = append(unfolded, float64(diskBytes(path))/float64(out))

		t0 := time.Now()
		if j, err = journal.Open(ctx, path); err != nil {
			b.Fatal(err)
		}
		if _, err := j.Fold(ctx, res.RunID); err != nil {
			b.Fatal(err)
		}
		if err := j.Vacuum(ctx); err != nil {
			b.Fatal(err)
		}
		compactMS = append(compactMS, float64(time.Since(t0).Microseconds())/1000)
		evs, err := j.Events(ctx, res.RunID, journal.EventFilter{Kinds: []string{journal.KindDelta}})
		if err != nil {
			b.Fatal(err)
		}
		got := map[string]*strings.Builder{}
		for _, e := range evs {
			if got[e.NodeID] == nil {
				got[e.NodeID] = new(strings.Builder)
			}
			got[e.NodeID].Write(e.Payload)
		}
		for id, o := range outputs {
			if got[id] == nil || got[id].String() != o {
				lost += int64(len(o))
			}
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		folded = append(folded, float64(diskBytes(path))/float64(out))
	}
	b.ReportMetric(benchstat.Median(unfolded), "unfolded-ratio")
	b.ReportMetric(benchstat.Median(folded), "folded-ratio")
	b.ReportMetric(benchstat.Median(compactMS), "compact-ms")
	b.ReportMetric(float64(lost), "lost-bytes")
}

// diskBytes is a journal's size on disk: the file, its WAL and its index.
func diskBytes(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if st, err := os.Stat(path + suffix); err == nil {
			n += st.Size()
		}
	}
	return n
}
