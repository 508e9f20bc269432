package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkFoldRatio is issue 45's "a compacted journal at every chunk size":
// a finished run of 100 nodes × 2,000 tokens (3 to 9 bytes each), journaled
// as the runner journals them (the nodes' rows interleaved, a token every
// 20 ms) in rows of 1 to 64 tokens, chat rows (no provider seq) and
// Responses rows (a provider seq a token); then Fold and Vacuum, as
// `noderun compact` does. It reports the journal's bytes on disk over its
// outputs' bytes (`folded-ratio`; issue 45 asks ≤ 1.3), as the run left it
// (`unfolded-ratio`) and the fold index's bytes per row (`idx-B/row`).
func BenchmarkFoldRatio(b *testing.B) {
	for _, kind := range []string{"chat", "responses"} {
		for _, per := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("%s/tokens-per-row=%d", kind, per), func(b *testing.B) {
				for range b.N {
					un, f, idx := foldRatio(b, kind == "responses", per)
					b.ReportMetric(un, "unfolded-ratio")
					b.ReportMetric(f, "folded-ratio")
					b.ReportMetric(idx, "idx-B/row")
				}
			})
		}
	}
}

func foldRatio(b *testing.B, seqs bool, per int) (unfolded, folded, idxPerRow float64) {
	const nodes, tokens = 100, 2000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "fold.db")
	j, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	if err := j.CreateRun(ctx, Run{ID: "run", Graph: "fold", Status: RunRunning}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%03d", i)
	}
	if err := j.SetNodesPending(ctx, "run", ids); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(45, uint64(per)))
	words := strings.Fields("socket stream gateway token reasoning journal cursor resume heartbeat worker provider budget")
	outs := make([]strings.Builder, nodes)
	atts := make([]int, nodes)
	for i, id := range ids {
		if atts[i], err = j.BeginAttempt(ctx, "run", id, ModeStart, "p"); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for r := 0; r < tokens/per; r++ {
		for i, id := range ids {
			var row strings.Builder
			for range per {
				w := words[rng.IntN(len(words))]
				row.WriteString(w[:min(len(w), 2+rng.IntN(7))] + " ") // 3 to 9 bytes a token
			}
			outs[i].WriteString(row.String())
			ps := int64(-1)
			if seqs {
				ps = int64((r+1)*per - 1)
			}
			at := start.Add(time.Duration(r*per)*20*time.Millisecond + time.Duration(rng.IntN(1000))*time.Microsecond)
			if err := j.Append(Event{RunID: "run", NodeID: id, Attempt: atts[i], Kind: KindDelta, ProviderSeq: ps,
				Time: at, Chunks: per, Payload: []byte(row.String())}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var out int64
	for i, id := range ids {
		if err := j.EndAttempt(ctx, "run", id, atts[i], AttemptEnd{Outcome: OutcomeOK, Cursor: -1}); err != nil {
			b.Fatal(err)
		}
		if err := j.CompleteNode(ctx, "run", id, outs[i].String()); err != nil {
			b.Fatal(err)
		}
		out += int64(outs[i].Len())
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	unfolded = float64(onDisk(path)) / float64(out)
	if j, err = Open(ctx, path); err != nil {
		b.Fatal(err)
	}
	st, err := j.Fold(ctx, "run")
	if err != nil {
		b.Fatal(err)
	}
	var idx int64
	if err := j.rdb.QueryRowContext(ctx, `SELECT COALESCE(SUM(length(idx)), 0) FROM folds`).Scan(&idx); err != nil {
		b.Fatal(err)
	}
	if err := j.Vacuum(ctx); err != nil {
		b.Fatal(err)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	return unfolded, float64(onDisk(path)) / float64(out), float64(idx) / float64(st.Rows)
}

func onDisk(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if st, err := os.Stat(path + suffix); err == nil {
			n += st.Size()
		}
	}
	return n
}
