package provider

import (
	"strings"
	"testing"
)

// About four bytes a token, rounded up, whatever the bytes are.
func TestEstimateTokens(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"héllo", 2}, // six bytes
		{strings.Repeat("x", 4000), 1000},
		{strings.Repeat("x", 4001), 1001},
	} {
		if got := EstimateTokens(c.text); got != c.want {
			t.Errorf("EstimateTokens(%d bytes) = %d, want %d", len(c.text), got, c.want)
		}
	}
}
