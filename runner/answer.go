package runner

import "strings"

// answerBlock is the size of the blocks a long answer is kept in.
const answerBlock = 256 << 10

// answer is a node's output as it streams in: strings.Builder's methods,
// but past its first block it grows by adding blocks, never by copying what
// it holds. A doubling buffer holding an answer near its bound (32 MiB by
// default) briefly holds it twice and a half while it copies, and leaves
// the old arrays to the collector: a hostile server that streams to the
// bound took a node's memory to several times the bound (issue 42). Here
// an answer costs its size, plus one copy when String assembles it (once,
// at the end, or for a continuation's prefix). The zero value is empty.
type answer struct {
	blocks [][]byte // every block but the last is full (answerBlock)
	n      int
}

// WriteString appends s.
func (a *answer) WriteString(s string) {
	a.n += len(s)
	for s != "" {
		k := len(a.blocks) - 1
		if k < 0 || len(a.blocks[k]) == answerBlock {
			a.blocks = append(a.blocks, nil)
			k++
		}
		b := a.blocks[k]
		take := min(len(s), answerBlock-len(b))
		if len(b)+take > cap(b) { // a short answer grows as a builder would, up to one block
			nb := make([]byte, len(b), min(answerBlock, max(2*cap(b), len(b)+take)))
			copy(nb, b)
			b = nb
		}
		a.blocks[k] = append(b, s[:take]...)
		s = s[take:]
	}
}

// Len is the answer's length in bytes.
func (a *answer) Len() int { return a.n }

// Reset empties the answer and lets its blocks go.
func (a *answer) Reset() { *a = answer{} }

// String is the answer so far: a copy.
func (a *answer) String() string {
	switch len(a.blocks) {
	case 0:
		return ""
	case 1:
		return string(a.blocks[0])
	}
	var b strings.Builder
	b.Grow(a.n)
	for _, blk := range a.blocks {
		b.Write(blk)
	}
	return b.String()
}
