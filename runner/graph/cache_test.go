package graph

import (
	"strings"
	"testing"
	"time"
)

// CachePolicy: on by default for API nodes without side effects; a harness
// node or one with side effects only by its own cache: true; the graph's
// cache and cache_ttl are the defaults of the rest.
func TestCachePolicy(t *testing.T) {
	src := `name: c
cache_ttl: 2h
providers:
  api: {kind: sim}
  agent: {kind: harness}
nodes:
  - {id: plain, provider: api, prompt: p}
  - {id: off, provider: api, prompt: p, cache: false}
  - {id: unsafe, provider: api, prompt: p, side_effects: unsafe}
  - {id: unsafe_in, provider: api, prompt: p, side_effects: unsafe, cache: true, cache_ttl: 5m}
  - {id: idem, provider: api, prompt: p, side_effects: idempotent}
  - {id: agent, provider: agent, prompt: p}
  - {id: agent_in, provider: agent, prompt: p, cache: true}
`
	want := map[string]struct {
		on  bool
		ttl time.Duration
	}{"plain": {true, 2 * time.Hour}, "off": {false, 2 * time.Hour}, "unsafe": {false, 2 * time.Hour}, "unsafe_in": {true, 5 * time.Minute},
		"idem": {false, 2 * time.Hour}, "agent": {false, 2 * time.Hour}, "agent_in": {true, 2 * time.Hour}}
	for _, graphCache := range []string{"", "cache: false\n"} {
		g, err := Parse("c.yaml", []byte(strings.Replace(src, "cache_ttl: 2h\n", "cache_ttl: 2h\n"+graphCache, 1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range g.Nodes {
			on, ttl := g.CachePolicy(n)
			w := want[n.ID]
			if graphCache != "" && n.ID == "plain" {
				w.on = false // the graph's default turned it off
			}
			if on != w.on || ttl != w.ttl {
				t.Errorf("%q: node %s: CachePolicy = %v, %s; want %v, %s", graphCache, n.ID, on, ttl, w.on, w.ttl)
			}
		}
		// Build keeps the fields (Source is what a resume parses again).
		b, err := Build(g, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if on, ttl := b.CachePolicy(b.Node("unsafe_in")); !on || ttl != 5*time.Minute || (b.Cache == nil) != (g.Cache == nil) {
			t.Errorf("Build lost the cache fields:\n%s", b.Source)
		}
	}
}

func TestCacheTTLRejects(t *testing.T) {
	for src, want := range map[string]string{
		"name: c\ncache_ttl: soon\nproviders: {api: {kind: sim}}\nnodes: [{id: a, prompt: p}]\n":         `c.yaml:2: cache_ttl must be a duration like 30m, 24h or 168h, not "soon"`,
		"name: c\nproviders: {api: {kind: sim}}\nnodes:\n  - {id: a, prompt: p,\n     cache_ttl: -1h}\n": `c.yaml:5: node "a": cache_ttl must be > 0`,
		"name: c\nproviders: {api: {kind: sim}}\nnodes:\n  - {id: a, prompt: p, cache: yes please}\n":    `c.yaml:4: node "a": cache must be true or false`,
	} {
		_, err := Parse("c.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}
