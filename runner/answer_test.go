package runner

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// answer reads back exactly what was written, in pieces of every size
// across its block boundaries, and Reset empties it.
func TestAnswer(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, total := range []int{0, 1, 100, answerBlock - 1, answerBlock, answerBlock + 1, 3*answerBlock + 17} {
		var a answer
		var want strings.Builder
		for want.Len() < total {
			n := min(total-want.Len(), rnd.IntN(answerBlock/3)+1)
			if rnd.IntN(4) == 0 {
				n = min(n, 7)
			}
			s := strings.Repeat(string(rune('a'+rnd.IntN(26))), n)
			a.WriteString(s)
			want.WriteString(s)
			if a.Len() != want.Len() {
				t.Fatalf("Len %d, want %d", a.Len(), want.Len())
			}
		}
		if a.String() != want.String() {
			t.Fatalf("%d bytes: String differs", total)
		}
		for i, b := range a.blocks[:max(len(a.blocks)-1, 0)] {
			if len(b) != answerBlock {
				t.Fatalf("block %d of %d holds %d bytes, want a full block", i, len(a.blocks), len(b))
			}
		}
		a.Reset()
		if a.Len() != 0 || a.String() != "" {
			t.Fatal("Reset left something")
		}
	}
}
