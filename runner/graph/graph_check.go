package graph

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// crossCheck finds problems between nodes: duplicate ids, needs that name
// no node, and cycles.
func (p *graphParser) crossCheck(g *Graph) {
	first := map[string]*graphParsedNode{}
	var uniq []*graphParsedNode
	for _, pn := range p.nodes {
		id := pn.n.ID
		if id == "" {
			continue
		}
		if f, dup := first[id]; dup {
			p.reportAs(pn.scope, pn.n.Line, "id", ErrDuplicateNode, "duplicate node id %s (lines %d and %d)", graphQuote(id), f.n.Line, pn.n.Line)
			continue
		}
		first[id] = pn
		uniq = append(uniq, pn)
	}
	ids := make([]string, len(uniq))
	index := make(map[string]int, len(uniq))
	for i, pn := range uniq {
		ids[i] = pn.n.ID
		index[pn.n.ID] = i
	}
	edges := make([][]int, len(uniq))
	edgeLines := make([][]int, len(uniq))
	for _, pn := range p.nodes {
		for i, need := range pn.n.Needs {
			if _, ok := first[need]; !ok {
				p.reportAs(pn.scope, pn.needLines[i], "needs", ErrUnknownNode, "needs %s, which is not defined%s", graphQuote(need), graphSuggest(need, ids))
			}
		}
	}
	for i, pn := range uniq {
		for j, need := range pn.n.Needs {
			if k, ok := index[need]; ok {
				edges[i] = append(edges[i], k)
				edgeLines[i] = append(edgeLines[i], pn.needLines[j])
			}
		}
	}
	for _, c := range graphFindCycles(len(uniq), edges) {
		names := make([]string, 0, len(c.path))
		for _, i := range c.path {
			names = append(names, ids[i])
		}
		// The line of the first node's need that starts the cycle.
		line := uniq[c.path[0]].n.Line
		for j, k := range edges[c.path[0]] {
			if k == c.path[1] {
				line = edgeLines[c.path[0]][j]
				break
			}
		}
		msg := "cycle: " + strings.Join(names, " -> ") + " (each node needs the next"
		if len(c.others) > 0 {
			var more []string
			for _, i := range c.others {
				more = append(more, ids[i])
			}
			msg += "; also caught in it: " + strings.Join(more, ", ")
		}
		p.reportAs(graphScope{}, line, "needs", ErrCycle, "%s)", msg)
	}
}

type graphCycle struct {
	path   []int // start ... start
	others []int // other members of the same strongly connected component
}

// graphFindCycles reports each strongly connected component with more than
// one node once: as a shortest cycle through its first member (in file
// order), with the component's other members. Self-edges are not expected.
func graphFindCycles(n int, edges [][]int) []graphCycle {
	// Tarjan's algorithm, iterative.
	const unvisited = -1
	idx := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	comp := make([]int, n)
	for i := range idx {
		idx[i] = unvisited
		comp[i] = -1
	}
	var stack []int
	var comps [][]int
	next := 0
	type frame struct{ v, e int }
	for root := 0; root < n; root++ {
		if idx[root] != unvisited {
			continue
		}
		call := []frame{{root, 0}}
		idx[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			top := &call[len(call)-1]
			v := top.v
			if top.e < len(edges[v]) {
				w := edges[v][top.e]
				top.e++
				if idx[w] == unvisited {
					idx[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] && idx[w] < low[v] {
					low[v] = idx[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				if low[v] < low[u] {
					low[u] = low[v]
				}
			}
			if low[v] == idx[v] {
				var members []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = len(comps)
					members = append(members, w)
					if w == v {
						break
					}
				}
				comps = append(comps, members)
			}
		}
	}
	var out []graphCycle
	for ci, members := range comps {
		if len(members) < 2 {
			continue
		}
		sort.Ints(members)
		start := members[0]
		// BFS from start within the component back to start.
		prev := map[int]int{start: -1}
		queue := []int{start}
		var path []int
	search:
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, w := range edges[u] {
				if comp[w] != ci {
					continue
				}
				if w == start {
					for x := u; x != -1; x = prev[x] {
						path = append(path, x)
					}
					slices.Reverse(path)
					path = append(path, start)
					break search
				}
				if _, seen := prev[w]; !seen {
					prev[w] = u
					queue = append(queue, w)
				}
			}
		}
		onPath := map[int]bool{}
		for _, x := range path {
			onPath[x] = true
		}
		var others []int
		for _, m := range members {
			if !onPath[m] {
				others = append(others, m)
			}
		}
		out = append(out, graphCycle{path: path, others: others})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path[0] < out[j].path[0] })
	return out
}

// graphQuote quotes a value from the file for a message, shortened.
func graphQuote(s string) string {
	const max = 60
	r := []rune(s)
	if len(r) > max {
		return strconv.Quote(string(r[:max])) + "..."
	}
	return strconv.Quote(s)
}

// graphSuggest returns ` (did you mean "x"?)` when a candidate is close.
func graphSuggest(s string, candidates []string) string {
	if c := graphClosest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// graphClosest returns the candidate within a small edit distance of s, or "".
func graphClosest(s string, candidates []string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == s || len(c) > 64 {
			continue
		}
		if d := graphEditDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// graphEditDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours.
func graphEditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	rows := [3][]int{make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)}
	for j := range rows[1] {
		rows[1][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		pp, prev, cur := rows[0], rows[1], rows[2]
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		rows[0], rows[1], rows[2] = prev, cur, pp
	}
	return rows[1][len(rb)]
}
