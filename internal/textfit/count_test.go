package textfit

import "testing"

func TestCount(t *testing.T) {
	cases := []struct {
		n    int
		noun string
		want string
	}{
		{1, "node", "1 node"}, {0, "node", "0 nodes"}, {2, "node", "2 nodes"},
		{1, "retry", "1 retry"}, {3, "retry", "3 retries"}, {2, "delay", "2 delays"},
		{2, "thread mismatch", "2 thread mismatches"}, {1, "attempt", "1 attempt"}, {4, "byte", "4 bytes"},
		{2, "process", "2 processes"},
	}
	for _, c := range cases {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
