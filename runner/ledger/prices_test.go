package ledger

import (
	"math"
	"testing"

	"github.com/noderun/noderun/journal"
)

// Cached input is priced apart where the provider counts it apart, and as
// input when the table does not say (never below the bill).
func TestCachedInputIsPriced(t *testing.T) {
	p, err := ParsePrices([]byte("claude:\n  input: 3\n  output: 15\n  cache_read: 0.3\n  cache_write: 3.75\nplain:\n  input: 3\n  output: 15\n"))
	if err != nil {
		t.Fatal(err)
	}
	u := journal.Usage{InputTokens: 1_000_000, CacheReadTokens: 2_000_000, CacheWriteTokens: 1_000_000}
	for _, c := range []struct {
		model string
		want  float64
	}{{"claude", 3 + 0.6 + 3.75 + 15}, {"plain", 3 + 6 + 3 + 15}} {
		if got := p[c.model].cost(u, 1_000_000); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: cost %v, want %v", c.model, got, c.want)
		}
	}
}
