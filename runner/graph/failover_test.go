package graph

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// graphProv is a graph file with the given providers (the lines after
// "providers:", the first on line 3) and nodes (after "nodes:").
func graphProv(providers, nodes string) string {
	return "name: t\nproviders:\n" + providers + "nodes:\n" + nodes
}

// Two sim providers, p and q; the first node is on line 6.
const graphPQ = "  p: {kind: sim}\n  q: {kind: sim}\n"

// Every problem of `limits`, `fallback` and `fallback_continue` is one
// problem, at its line, naming the provider or node and the key or name.
func TestParseLimitsAndFallbackRejects(t *testing.T) {
	node := "  - {id: a, prompt: x}\n"
	cases := []struct {
		name string
		src  string
		line int
		want string
	}{
		// provider limits
		{"zero requests_per_minute", graphProv("  p: {kind: sim, limits: {requests_per_minute: 0}}\n", node), 3,
			`provider "p": limits: requests_per_minute must be > 0 (omit it to leave it to the provider's headers), got 0`},
		{"negative tokens_per_minute", graphProv("  p:\n    kind: sim\n    limits:\n      requests_per_minute: 10\n      tokens_per_minute: -5\n", node), 7,
			`provider "p": limits: tokens_per_minute must be > 0 (omit it to leave it to the provider's headers), got -5`},
		{"zero concurrency", graphProv("  p: {kind: harness, limits: {concurrency: 0}}\n", node), 3, `provider "p": limits: concurrency must be > 0`},
		{"concurrency not a number", graphProv("  p: {kind: sim, limits: {concurrency: lots}}\n", node), 3, `provider "p": limits: concurrency must be a whole number`},
		{"fractional limit", graphProv("  p: {kind: sim, limits: {requests_per_minute: 1.5}}\n", node), 3, `limits: requests_per_minute must be a whole number`},
		{"huge limit", graphProv("  p: {kind: sim, limits: {tokens_per_minute: 99999999999999999999}}\n", node), 3, `limits: tokens_per_minute is out of range`},
		{"unknown limit", graphProv("  p: {kind: sim, limits: {rpm: 5}}\n", node), 3,
			`provider "p": limits: unknown field "rpm" (known fields: requests_per_minute, tokens_per_minute, concurrency)`},
		{"misspelt limit", graphProv("  p: {kind: sim, limits: {requests_per_minut: 5}}\n", node), 3,
			`provider "p": limits: unknown field "requests_per_minut" (did you mean "requests_per_minute"?)`},
		{"duplicate limit", graphProv("  p:\n    kind: sim\n    limits:\n      concurrency: 2\n      concurrency: 3\n", node), 7,
			`provider "p": limits: field "concurrency" appears twice (first at line 6)`},
		{"empty limits", graphProv("  p: {kind: sim, limits: {}}\n", node), 3,
			`provider "p": limits declares no limit: set requests_per_minute, tokens_per_minute or concurrency, or omit limits`},
		{"null limits", graphProv("  p:\n    kind: openai\n    model: m\n    limits:\n", node), 6, `provider "p": limits declares no limit`},
		{"limits not a mapping", graphProv("  p: {kind: sim, limits: 500}\n", node), 3, `provider "p": limits must be a mapping, like {requests_per_minute: 500}`},

		// provider fallback
		{"unknown provider fallback", graphProv("  p: {kind: sim, fallback: [bakup]}\n  backup: {kind: sim}\n", "  - {id: a, provider: p, prompt: x}\n"), 3,
			`provider "p": fallback: unknown provider "bakup" (defined: backup, p) (did you mean "backup"?)`},
		{"provider falls back to itself", graphProv("  p: {kind: sim, fallback: [q, p]}\n  q: {kind: sim}\n", "  - {id: a, provider: p, prompt: x}\n"), 3,
			`provider "p": fallback: "p" is this provider itself`},
		{"provider fallback twice", graphProv("  p:\n    kind: sim\n    fallback:\n      - q\n      - q\n  q: {kind: sim}\n", "  - {id: a, provider: p, prompt: x}\n"), 7,
			`provider "p": fallback names "q" more than once`},
		{"harness to model API", graphProv("  h: {kind: harness, fallback: [q]}\n  q: {kind: openai, model: m}\n", "  - {id: a, provider: h, prompt: x}\n"), 3,
			`provider "h": fallback: provider "q" is kind openai and provider "h" kind harness: a node cannot move between an agent harness and a model API`},
		{"model API to harness", graphProv("  p: {kind: anthropic, model: m, fallback: [h]}\n  h: {kind: harness}\n", "  - {id: a, provider: p, prompt: x}\n"), 3,
			`provider "p": fallback: provider "h" is kind harness and provider "p" kind anthropic: a node cannot move between an agent harness and a model API`},
		{"null provider fallback", graphProv("  p:\n    kind: sim\n    fallback:\n", node), 5,
			`provider "p": fallback is empty (list the providers a node of this one moves to, like [backup], or omit it)`},
		{"provider fallback not a list", graphProv("  p: {kind: sim, fallback: backup}\n", node), 3, `provider "p": fallback must be a list, like [a, b]`},
		{"provider fallback entry not a string", graphProv("  p:\n    kind: sim\n    fallback:\n      - [q]\n  q: {kind: sim}\n", "  - {id: a, provider: p, prompt: x}\n"), 6,
			`provider "p": fallback: every entry must be a string`},

		// node fallback
		{"fallback without a model", graphProv("  p: {kind: openai, model: m, fallback: [q]}\n  q: {kind: anthropic}\n", "  - {id: a, provider: p, prompt: x}\n"), 3,
			`provider "p": fallback: provider "q" has no model: a node that moves to it sends the fallback's model (set model on "q")`},
		{"unknown node fallback", graphProv(graphPQ, "  - {id: a, provider: p, fallback: [r], prompt: x}\n"), 6, `node "a": fallback: unknown provider "r" (defined: p, q)`},
		{"misspelt node fallback", graphProv("  main: {kind: sim}\n  backup: {kind: sim}\n", "  - {id: a, provider: main, fallback: [backpu], prompt: x}\n"), 6,
			`node "a": fallback: unknown provider "backpu" (defined: backup, main) (did you mean "backup"?)`},
		{"node falls back to its provider", graphProv(graphPQ, "  - id: a\n    provider: p\n    fallback: [q, p]\n    prompt: x\n"), 8,
			`node "a": fallback: "p" is the node's own provider`},
		{"node falls back to its only provider", graphHead + "  - {id: a, fallback: [p], prompt: x}\n", 5, `node "a": fallback: "p" is the node's own provider`},
		{"node fallback twice", graphProv(graphPQ, "  - id: a\n    provider: p\n    fallback:\n      - q\n      - q\n    prompt: x\n"), 10,
			`node "a": fallback names "q" more than once`},
		{"harness node to model API", graphProv("  h: {kind: harness}\n  q: {kind: sim}\n", "  - {id: a, provider: h, side_effects: none, fallback: [q], prompt: x}\n"), 6,
			`node "a": fallback: provider "q" is kind sim and provider "h" kind harness: a node cannot move between an agent harness and a model API`},
		{"model node to harness", graphProv("  p: {kind: sim}\n  h: {kind: harness}\n", "  - {id: a, provider: p, fallback: [h], prompt: x}\n"), 6,
			`node "a": fallback: provider "h" is kind harness and provider "p" kind sim: a node cannot move between an agent harness and a model API`},
		{"unsafe node with fallback", graphProv(graphPQ, "  - id: a\n    provider: p\n    side_effects: unsafe\n    fallback: [q]\n    prompt: x\n"), 9,
			`node "a": unsafe nodes never fail over: drop fallback or side_effects`},
		{"harness node with fallback", graphProv("  h: {kind: harness}\n  h2: {kind: harness}\n", "  - id: a\n    provider: h\n    fallback: [h2]\n    prompt: x\n"), 8,
			`node "a": unsafe nodes never fail over, and a node of a harness provider is unsafe unless it sets side_effects: drop fallback or set side_effects`},
		{"null node fallback", graphProv(graphPQ, "  - id: a\n    provider: p\n    fallback:\n    prompt: x\n"), 8,
			`node "a": fallback is empty (list the providers the node moves to, like [backup]; [] turns failover off for the node; omit it for its provider's list)`},
		{"node fallback not a list", graphProv(graphPQ, "  - {id: a, provider: p, fallback: q, prompt: x}\n"), 6, `node "a": fallback must be a list, like [a, b]`},

		// fallback_continue
		{"continue without fallback", graphProv(graphPQ, "  - id: a\n    provider: p\n    fallback_continue: true\n    prompt: x\n"), 8,
			`node "a": fallback_continue does nothing: the node has no fallback providers (set fallback on the node or on provider "p")`},
		{"continue with fallback off", graphProv("  p: {kind: sim, fallback: [q]}\n  q: {kind: sim}\n", "  - {id: a, provider: p, fallback: [], fallback_continue: true, prompt: x}\n"), 6,
			`node "a": fallback_continue does nothing: the node's fallback: [] turns failover off`},
		{"continue on an unsafe node", graphProv("  p: {kind: sim, fallback: [q]}\n  q: {kind: sim}\n", "  - {id: a, provider: p, side_effects: unsafe, fallback_continue: true, prompt: x}\n"), 6,
			`node "a": fallback_continue does nothing: unsafe nodes never fail over`},
		{"continue not a bool", graphProv("  p: {kind: sim, fallback: [q]}\n  q: {kind: sim}\n", "  - {id: a, provider: p, fallback_continue: yes please, prompt: x}\n"), 6,
			`node "a": fallback_continue must be true or false`},
		{"unknown node key", graphHead + "  - {id: a, prompt: x, fallbak: [p]}\n", 5, `node "a": unknown field "fallbak" (did you mean "fallback"?)`},
		{"duplicate node key", graphProv(graphPQ, "  - id: a\n    provider: p\n    fallback: [q]\n    fallback: []\n    prompt: x\n"), 9,
			`node "a": field "fallback" appears twice (first at line 8)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.src))
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("accepted or not an *Error: %v\n%s", err, tc.src)
			}
			if len(ge.Problems) != 1 {
				t.Errorf("want exactly one problem, got %d:\n%v", len(ge.Problems), err)
			}
			want := fmt.Sprintf("t.yaml:%d: ", tc.line)
			if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, tc.want) {
				t.Errorf("got:\n%v\nwant %q...%q", err, want, tc.want)
			}
		})
	}
}

// What the failover fields mean once parsed, and which lists FallbacksOf
// takes for a node.
func TestParseLimitsAndFallback(t *testing.T) {
	src := `name: t
providers:
  main:
    kind: openai
    model: m
    limits: {requests_per_minute: 600, tokens_per_minute: 90000, concurrency: 4}
    fallback: [spare, local]     # spare is defined below
  spare:
    kind: anthropic
    model: c
    limits: {concurrency: 1}
    fallback: [main, local]      # each provider's list is its own nodes'
  local: {kind: sim, fallback: []}
  agent: {kind: harness, limits: {requests_per_minute: 30}}
  agent2: {kind: harness, fallback: [agent]}
nodes:
  - {id: plain, provider: main, prompt: x}
  - {id: own, provider: main, fallback: [local], fallback_continue: true, prompt: x}
  - {id: off, provider: main, fallback: [], prompt: x}
  - {id: on-spare, provider: spare, prompt: x}
  - {id: none, provider: local, prompt: x}
  - {id: unsafe, provider: main, side_effects: unsafe, prompt: x}
  - {id: unsafe-off, provider: main, side_effects: unsafe, fallback: [], prompt: x}
  - {id: act, provider: agent2, prompt: x}
  - {id: stay, provider: main, fallback_continue: false, prompt: x}
`
	g, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		limits   Limits
		fallback []string
	}{
		"main":   {Limits{RequestsPerMinute: 600, TokensPerMinute: 90000, Concurrency: 4}, []string{"spare", "local"}},
		"spare":  {Limits{Concurrency: 1}, []string{"main", "local"}},
		"local":  {Limits{}, nil},
		"agent":  {Limits{RequestsPerMinute: 30}, nil},
		"agent2": {Limits{}, []string{"agent"}},
	} {
		p := g.Providers[name]
		if p.Limits != want.limits || !reflect.DeepEqual(p.Fallback, want.fallback) {
			t.Errorf("provider %s: limits %+v, fallback %#v; want %+v, %#v", name, p.Limits, p.Fallback, want.limits, want.fallback)
		}
	}
	for _, c := range []struct {
		id        string
		own       []string // Node.Fallback
		continues bool
		effective []string // FallbacksOf
	}{
		{"plain", nil, false, []string{"spare", "local"}},
		{"own", []string{"local"}, true, []string{"local"}},
		{"off", []string{}, false, nil},
		{"on-spare", nil, false, []string{"main", "local"}}, // not main's list: no chains
		{"none", nil, false, nil},
		{"unsafe", nil, false, []string{"spare", "local"}}, // the runner keeps it from failing over
		{"unsafe-off", []string{}, false, nil},
		{"act", nil, false, []string{"agent"}},
		{"stay", nil, false, []string{"spare", "local"}},
	} {
		n := g.Node(c.id)
		if !reflect.DeepEqual(n.Fallback, c.own) || n.FallbackContinue != c.continues {
			t.Errorf("node %s: Fallback %#v, FallbackContinue %v; want %#v, %v", c.id, n.Fallback, n.FallbackContinue, c.own, c.continues)
		}
		if got := g.FallbacksOf(n); !slices.Equal(got, c.effective) {
			t.Errorf("FallbacksOf(%s) = %v, want %v", c.id, got, c.effective)
		}
	}
	// The result is a copy: changing it changes nothing in the graph.
	g.FallbacksOf(g.Node("plain"))[0] = "x"
	if g.Providers["main"].Fallback[0] != "spare" {
		t.Error("FallbacksOf returned the provider's own slice")
	}
}

// FallbacksOf on nodes the parser would not accept (a Graph assembled by
// hand): the node's own provider, and a name twice, are left out.
func TestFallbacksOf(t *testing.T) {
	g := &Graph{Providers: map[string]*ProviderSpec{
		"p": {Name: "p", Kind: ProviderKindSim, Fallback: []string{"q", "p", "r", "q"}},
		"q": {Name: "q", Kind: ProviderKindSim, Fallback: []string{"r"}},
		"r": {Name: "r", Kind: ProviderKindSim},
	}}
	for _, c := range []struct {
		name string
		n    *Node
		want []string
	}{
		{"nil node", nil, nil},
		{"provider's list", &Node{Provider: "p"}, []string{"q", "r"}},
		{"node's list wins", &Node{Provider: "p", Fallback: []string{"r"}}, []string{"r"}},
		{"empty list turns it off", &Node{Provider: "p", Fallback: []string{}}, nil},
		{"own provider left out", &Node{Provider: "q", Fallback: []string{"q", "p"}}, []string{"p"}},
		{"not transitive", &Node{Provider: "q"}, []string{"r"}},
		{"no list", &Node{Provider: "r"}, nil},
		{"unknown provider", &Node{Provider: "nope"}, nil},
		{"unsafe node: the list all the same", &Node{Provider: "p", SideEffects: SideUnsafe}, []string{"q", "r"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := g.FallbacksOf(c.n); !slices.Equal(got, c.want) {
				t.Errorf("FallbacksOf = %v, want %v", got, c.want)
			}
		})
	}
}

// A graph built in code takes the same fields, through the same checks.
func TestBuildLimitsAndFallback(t *testing.T) {
	base := func() *Graph {
		return &Graph{
			Name: "code",
			Providers: map[string]*ProviderSpec{
				"p": {Kind: ProviderKindSim, Limits: Limits{RequestsPerMinute: 600, Concurrency: 2}, Fallback: []string{"q"}},
				"q": {Kind: ProviderKindSim, Continuation: "prefix"},
				"h": {Kind: ProviderKindHarness},
			},
			Nodes: []*Node{
				{ID: "a", Provider: "p", Prompt: "x", FallbackContinue: true},
				{ID: "b", Provider: "p", Prompt: "x", Fallback: []string{}},
				{ID: "c", Provider: "q", Prompt: "x", Fallback: []string{"p"}},
				{ID: "d", Provider: "h", Prompt: "x"},
			},
		}
	}
	g, err := Build(base(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := g.Providers["p"]; p.Limits != (Limits{RequestsPerMinute: 600, Concurrency: 2}) || !slices.Equal(p.Fallback, []string{"q"}) {
		t.Errorf("provider p: %+v", p)
	}
	if a := g.Node("a"); a.Fallback != nil || !a.FallbackContinue || !slices.Equal(g.FallbacksOf(a), []string{"q"}) {
		t.Errorf("node a: %+v", a)
	}
	if b := g.Node("b"); b.Fallback == nil || len(b.Fallback) != 0 || len(g.FallbacksOf(b)) != 0 {
		t.Errorf("node b: fallback %#v, want []string{}", b.Fallback)
	}
	if c := g.Node("c"); !slices.Equal(c.Fallback, []string{"p"}) {
		t.Errorf("node c: %+v", c)
	}

	for _, c := range []struct {
		name   string
		change func(g *Graph)
		want   string
	}{
		{"negative limit", func(g *Graph) { g.Providers["p"].Limits.TokensPerMinute = -1 },
			`provider "p": limits: tokens_per_minute must be > 0 (omit it to leave it to the provider's headers), got -1`},
		{"unknown provider fallback", func(g *Graph) { g.Providers["p"].Fallback = []string{"qq"} },
			`provider "p": fallback: unknown provider "qq" (defined: h, p, q) (did you mean "q"?)`},
		{"provider falls back to itself", func(g *Graph) { g.Providers["q"].Fallback = []string{"q"} }, `provider "q": fallback: "q" is this provider itself`},
		{"harness mix", func(g *Graph) { g.Providers["h"].Fallback = []string{"p"} },
			`provider "h": fallback: provider "p" is kind sim and provider "h" kind harness: a node cannot move between an agent harness and a model API`},
		{"node falls back to its provider", func(g *Graph) { g.Nodes[2].Fallback = []string{"q"} }, `node "c": fallback: "q" is the node's own provider`},
		{"node fallback twice", func(g *Graph) { g.Nodes[2].Fallback = []string{"p", "p"} }, `node "c": fallback names "p" more than once`},
		{"unsafe node with fallback", func(g *Graph) { g.Nodes[2].SideEffects = SideUnsafe },
			`node "c": fallback: unsafe nodes never fail over: drop fallback or side_effects`},
		{"continue without fallback", func(g *Graph) { g.Nodes[3].FallbackContinue = true; g.Nodes[3].SideEffects = SideNone },
			`node "d": fallback_continue does nothing: the node has no fallback providers (set fallback on the node or on provider "h")`},
		{"continue with fallback off", func(g *Graph) { g.Nodes[1].FallbackContinue = true },
			`node "b": fallback_continue does nothing: the node's fallback: [] turns failover off`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := base()
			c.change(g)
			_, err := Build(g, Options{})
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("accepted or not an *Error: %v", err)
			}
			if len(ge.Problems) != 1 || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got:\n%v\nwant one problem: %q", err, c.want)
			}
			// The line is the built file's, where the offending value is.
			line := strings.Split(string(mustMarshal(t, g)), "\n")[ge.Problems[0].Line-1]
			if !strings.Contains(line, "fallback") && !strings.Contains(line, "tokens_per_minute") {
				t.Errorf("problem at line %d, %q", ge.Problems[0].Line, line)
			}
		})
	}
}

// A provider of a kind registered with the runner takes limits and
// fallback, and counts as a model API.
func TestFallbackOfRegisteredKind(t *testing.T) {
	g := func(fallback string) *Graph {
		return &Graph{Name: "x", Providers: map[string]*ProviderSpec{
			"mine": {Kind: "mine", Limits: Limits{Concurrency: 1}, Fallback: []string{fallback}},
			"sim":  {Kind: ProviderKindSim},
			"h":    {Kind: ProviderKindHarness},
		}, Nodes: []*Node{{ID: "a", Provider: "mine", Prompt: "x"}}}
	}
	b, err := Build(g("sim"), Options{Kinds: []string{"mine"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.Providers["mine"]; p.Limits.Concurrency != 1 || !slices.Equal(b.FallbacksOf(b.Node("a")), []string{"sim"}) {
		t.Errorf("mine: %+v", p)
	}
	_, err = Build(g("h"), Options{Kinds: []string{"mine"}})
	if want := `provider "h" is kind harness and provider "mine" kind mine: a node cannot move between an agent harness and a model API`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

// testdata/graphs/failover.yaml, the example of docs/graph.md's "Rate
// limits and failover", and the example graph in that section parse, and
// mean what they say.
func TestFailoverExamples(t *testing.T) {
	g, err := Load(filepath.Join(graphTestdata, "failover.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	graphCheckInvariants(t, g)
	if p := g.Providers["primary"]; p.Kind != ProviderKindSim || p.Limits != (Limits{RequestsPerMinute: 600}) || !slices.Equal(p.Fallback, []string{"backup"}) {
		t.Errorf("primary: %+v", p)
	}
	if b := g.Providers["backup"]; b.Kind != ProviderKindSim || b.Fallback != nil {
		t.Errorf("backup: %+v", b)
	}
	for id, want := range map[string][]string{"outline": {"backup"}, "draft": {"backup"}, "check": nil, "publish": {"backup"}} {
		if got := g.FallbacksOf(g.Node(id)); !slices.Equal(got, want) {
			t.Errorf("FallbacksOf(%s) = %v, want %v", id, got, want)
		}
	}
	if !g.Node("draft").FallbackContinue || g.Node("publish").SideEffects != SideUnsafe {
		t.Errorf("draft %+v, publish %+v", g.Node("draft"), g.Node("publish"))
	}

	d, err := Parse("example.yaml", []byte(failoverExample))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(Reference()), failoverExample) {
		t.Error("docs/graph.md lacks the example")
	}
	if got := d.FallbacksOf(d.Node("draft")); !slices.Equal(got, []string{"claude"}) || !d.Node("draft").FallbackContinue {
		t.Errorf("example: draft falls back to %v", got)
	}
	if d.Providers["gpt"].Limits.RequestsPerMinute != 500 || d.FallbacksOf(d.Node("check")) != nil {
		t.Errorf("example: %+v", d.Providers["gpt"])
	}
}
