package textfit

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// The one shortening rule. A line that does not fit loses its middle, never
// its ends: an error chain reads "what failed: where: …: why", so the first
// clause (what) and the last (the cause, such as "connection refused") stay.
// In order, a shortened line
//
//   - keeps whole, or drops whole, the words people search for (Pinned) and
//     diagnostic codes (NR101): they are never cut;
//   - drops whole ": "-separated clauses from the middle first, left to
//     right, keeping the first and the last and any clause holding a
//     pinned phrase or a code;
//   - then drops words from the middle, the cause's end kept first, then
//     the line's start;
//   - cuts only at spaces (a word is cut only when it alone is wider than
//     the room), and only where brackets and quotes are balanced, so no
//     "(side_effects: unsafe)" loses its "unsafe)";
//   - marks every gap with "…".

// Pinned are phrases a shortened line keeps whole or drops whole: the
// words users search for when a stream dies, and the mark that says why a
// node was not replayed.
var Pinned = []string{"stream disconnected before completion", "side_effects: unsafe"}

// maxAtoms bounds the work on a huge line: its middle goes first anyway.
const maxAtoms = 400

// atom is a word of a line, or a pinned phrase as one word.
type atom struct {
	s      string
	n      int  // runes
	pinned bool // a pinned phrase or a code
	gap    bool // "…", standing for atoms dropped before
	glued  bool // written without a space before it: a word after its opening bracket
}

// IsCode reports whether w is a diagnostic code (NR101), perhaps followed
// by punctuation.
func IsCode(w string) bool {
	w = strings.TrimRight(w, ".,;:)]")
	w = strings.TrimLeft(w, "([")
	if len(w) != 5 || !strings.HasPrefix(w, "NR") {
		return false
	}
	for _, c := range w[2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// atoms splits a line (white space already folded) into words, a pinned
// phrase being one.
func atoms(s string) []atom {
	words := strings.Fields(s)
	out := make([]atom, 0, len(words))
	for i := 0; i < len(words); i++ {
		a := atom{s: words[i]}
		for _, p := range Pinned {
			k := strings.Count(p, " ") + 1
			if i+k > len(words) {
				continue
			}
			j := strings.Join(words[i:i+k], " ")
			if rest, ok := strings.CutPrefix(j, p); ok && len(rest) <= 1 {
				a, i = atom{s: j, pinned: true}, i+k-1
				break
			}
		}
		a.gap = a.s == "…" || strings.HasPrefix(a.s, "…") && strings.TrimLeft(a.s, "…:") == ""
		// An opening bracket is an atom of its own, so that a gap may
		// follow it: "(… holder=pid 1961)" keeps the group's end.
		for len(a.s) > 1 && strings.ContainsRune("([{", rune(a.s[0])) {
			out = append(out, atom{s: a.s[:1], n: 1, glued: a.glued})
			a.s, a.glued = a.s[1:], true
		}
		a.pinned = a.pinned || IsCode(a.s)
		a.n = utf8.RuneCountInString(a.s)
		out = append(out, a)
	}
	if len(out) > maxAtoms {
		out = append(append(out[:maxAtoms/2:maxAtoms/2], atom{s: "…", n: 1, gap: true}), out[len(out)-maxAtoms/2:]...)
	}
	return out
}

// states returns, for each k in 0..len(as), what as[:k] leaves open: the
// stack of brackets and whether a quote is. Dropping as[i:j] keeps the line
// balanced exactly when states i and j are equal, so a gap may sit inside a
// bracket or a JSON body as long as it closes what it opens.
func states(as []atom) []string {
	st := make([]string, len(as)+1)
	var o opened
	for i, a := range as {
		for _, c := range a.s {
			o.add(c)
		}
		st[i+1] = o.String()
	}
	return st
}

// opened is what the text read so far leaves open: brackets, and a quote.
type opened struct {
	stack  []rune
	quoted bool
}

func (o *opened) add(c rune) {
	switch c {
	case '(', '[', '{':
		o.stack = append(o.stack, c)
	case ')', ']', '}':
		if len(o.stack) > 0 {
			o.stack = o.stack[:len(o.stack)-1]
		}
	case '"':
		o.quoted = !o.quoted
	}
}

func (o *opened) String() string {
	if o.quoted {
		return string(o.stack) + `"`
	}
	return string(o.stack)
}

// balanced reports, for each k, whether as[:k] leaves nothing open. A line
// unbalanced as a whole (a smiley, a stray quote) is not held to it.
func balanced(as []atom) []bool {
	st := states(as)
	ok := make([]bool, len(st))
	for i, x := range st {
		ok[i] = x == "" || st[len(st)-1] != ""
	}
	return ok
}

// clauses returns the indexes where each ": "-separated clause starts (a
// word ending in ":" at depth 0 ends one), plus len(as).
func clauses(as []atom, bal []bool) []int {
	starts := []int{0}
	for i, a := range as[:max(len(as)-1, 0)] {
		if strings.HasSuffix(a.s, ":") && bal[i+1] && !a.gap {
			starts = append(starts, i+1)
		}
	}
	return append(starts, len(as))
}

// render joins the kept atoms, "…" in each gap (one for a run of gaps):
// "…:" where the gap ends a clause. A gap stands apart, so that no word
// reads as cut.
func render(as []atom, keep []bool) (string, int) {
	var b strings.Builder
	put := func(s string, glued bool) {
		if b.Len() > 0 && !glued {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	for i := 0; i < len(as); {
		if keep[i] && !as[i].gap {
			put(as[i].s, as[i].glued && i > 0 && keep[i-1])
			i++
			continue
		}
		j := i // a run of dropped atoms (and gaps) is one marker
		for j < len(as) && (!keep[j] || as[j].gap) {
			j++
		}
		marker := "…"
		if strings.HasSuffix(as[j-1].s, ":") {
			marker = "…:"
		}
		put(marker, as[i].glued && i > 0 && keep[i-1] && !as[i-1].gap)
		i = j
	}
	return b.String(), utf8.RuneCountInString(b.String())
}

// Text shortens s to at most n columns by the one rule (above). Runs of
// white space become one space.
func Text(s string, n int) string {
	s, done := folded(s, n)
	if done {
		return s
	}
	as := atoms(s)
	bal := balanced(as)
	keep := all(len(as))
	// Whole clauses from the middle first.
	cl := clauses(as, bal)
	for c := 1; c+1 < len(cl)-1; c++ {
		if isPinned(as[cl[c]:cl[c+1]]) {
			continue
		}
		for i := cl[c]; i < cl[c+1]; i++ {
			keep[i] = false
		}
		if out, w := render(as, keep); w <= n {
			return out
		}
	}
	// Then words: pinned ones, the cause's end, the line's start.
	return pick(as, n, true, true)
}

func isPinned(as []atom) bool {
	for _, a := range as {
		if a.pinned {
			return true
		}
	}
	return false
}

// pick keeps what fits of as in n columns, in this order: the pinned
// atoms; the last clause's words from its end, in up to 3/5 of the room;
// the start's words, in up to half of it; then the end's and the start's
// words while they fit. The gap is then placed where what it drops closes
// what it opens (states). Nothing fitting, the line's start (or end) is cut
// by runes.
func pick(as []atom, n int, head, tail bool) string {
	keep := make([]bool, len(as))
	width := func() int { _, w := render(as, keep); return w }
	fits := func(i, limit int) bool {
		keep[i] = true
		if width() <= min(limit, n) {
			return true
		}
		keep[i] = false
		return false
	}
	for _, code := range []bool{true, false} { // codes first, then phrases
		for i, a := range as {
			if a.pinned && !a.gap && IsCode(a.s) == code {
				fits(i, n)
			}
		}
	}
	lo, hi := 0, len(as) // as[:lo] and as[hi:] are the kept ends
	growHead := func(limit int) {
		for ; lo < hi && (keep[lo] || fits(lo, limit)); lo++ {
		}
	}
	growTail := func(limit, floor int) {
		for ; hi > max(lo, floor) && (keep[hi-1] || fits(hi-1, limit)); hi-- {
		}
	}
	switch {
	case head && tail:
		if cl := clauses(as, balanced(as)); len(cl) > 2 {
			growTail(width()+n*3/5, cl[len(cl)-2])
		}
		growHead(width() + n/2)
		growTail(n, 0)
		growHead(n)
	case head:
		growHead(n)
	case tail:
		growTail(n, 0)
	}
	// The gap: as[lo:hi] less what is pinned, moved out to where it
	// closes what it opens, keeping the most of the ends.
	st := states(as)
	cum := make([]int, len(as)+1)
	for i, a := range as {
		cum[i+1] = cum[i] + a.n + 1
		if a.glued {
			cum[i+1]--
		}
	}
	// Of the gaps that close what they open and fit, the one nearest the
	// greedy split, then the one keeping most.
	type cand struct{ i, j, d, kept int }
	var cands []cand
	for i := 0; i <= len(as); i++ {
		for j := i; j <= len(as); j++ {
			if (!head && i != 0) || (!tail && j != len(as)) || st[i] != st[j] {
				continue
			}
			if kept := cum[i] + cum[len(as)] - cum[j]; kept > 0 && kept <= n+1 {
				cands = append(cands, cand{i, j, abs(cum[lo]-cum[i]) + abs(cum[hi]-cum[j]), kept})
			}
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(a.d-b.d, b.kept-a.kept) })
	grown := slices.Clone(keep)                               // the pinned atoms and the greedy ends
	for _, c := range append(cands, cand{i: 0, j: len(as)}) { // at worst, the pinned words alone
		copy(keep, grown)
		for i := range as {
			keep[i] = keep[i] || i < c.i || i >= c.j
		}
		for i := c.i; i < c.j; i++ {
			if keep[i] && (st[c.i] != st[i] || st[i+1] != st[c.j]) {
				keep[i] = false // a pinned word inside a dropped bracket goes with it
			}
			keep[i] = keep[i] && as[i].pinned
		}
		if width() <= n {
			break
		}
	}
	out, w := render(as, keep)
	if strings.Trim(out, "…: ") == "" || w > n {
		return cutRunes(joinAtoms(as), n, head)
	}
	return out
}

func joinAtoms(as []atom) string {
	out, _ := render(as, all(len(as)))
	return out
}

// all is n trues: every atom kept.
func all(n int) []bool {
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	return keep
}

// cutRunes is the last resort, for a line whose first word alone is wider
// than the room: its start (or its end) by runes.
func cutRunes(s string, n int, start bool) string {
	r := utf8.RuneCountInString(s)
	if r <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	if start {
		head, _ := splitRunes(s, n-1)
		return head + "…"
	}
	_, tail := splitRunes(s, r-(n-1))
	return "…" + tail
}

// CutEnd keeps the start of s in n columns by the one rule, for a line
// whose end is the least of it (a live line's last figures). Unlike Text it
// keeps the line's spacing: a live line's columns stay aligned.
func CutEnd(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 2 {
		return "…"
	}
	var inPinned [][2]int // byte ranges of pinned phrases: never cut inside
	for _, p := range Pinned {
		for off := 0; ; {
			k := strings.Index(s[off:], p)
			if k < 0 {
				break
			}
			inPinned = append(inPinned, [2]int{off + k, off + k + len(p)})
			off += k + len(p)
		}
	}
	end := states(atoms(s))
	want := end[len(end)-1]
	var o opened
	best, runes := -1, 0
	for i, c := range s {
		if c == ' ' && i > 0 && s[i-1] != ' ' && runes <= n-2 && (want != "" || o.String() == "") &&
			!slices.ContainsFunc(inPinned, func(r [2]int) bool { return r[0] < i && i < r[1] }) {
			best = i
		}
		o.add(c)
		runes++
	}
	if best <= 0 {
		return cutRunes(s, n, true)
	}
	return s[:best] + " …"
}

// CutStart keeps the end of s in n columns by the one rule.
func CutStart(s string, n int) string {
	s, done := folded(s, n)
	if done {
		return s
	}
	return pick(atoms(s), n, false, true)
}

// folded is s with its runs of white space made one space, and done when
// that fits n columns (or only "…" does).
func folded(s string, n int) (string, bool) {
	s = strings.Join(strings.Fields(s), " ")
	switch {
	case utf8.RuneCountInString(s) <= n:
		return s, true
	case n <= 1:
		return "…", true
	}
	return s, false
}

func abs(x int) int { return max(x, -x) }
