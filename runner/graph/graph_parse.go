package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim/simconfig"
)

var (
	graphIDPattern      = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	graphEnvNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	graphYAMLErrPattern = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	graphDigitsPattern  = regexp.MustCompile(`^[-+]?[0-9_]+$`)
)

// Field names, for unknown-field messages and suggestions (fields.go).
var (
	graphRootFields  = fieldNames(fieldsGraph)
	graphNodeFields  = fieldNames(fieldsNode)
	graphInputFields = fieldNames(fieldsInput)
	// graphLimitsFields are the fields of a provider's `limits:`.
	graphLimitsFields = fieldNames(fieldsLimits)
	// graphProviderFields lists, for each provider field, the kinds it is
	// valid for; nil means every kind.
	graphProviderFields = func() map[string][]string {
		m := make(map[string][]string, len(fieldsProvider))
		for _, f := range fieldsProvider {
			m[f.Name] = f.Kinds
		}
		return m
	}()
	// graphContinuations are provider.Continuations() (a runner test checks).
	graphContinuations = []string{"none", "prefix", "continue_final_message", "assistant_last"}
	// graphPrefill is provider.ContinuePrefill, kind anthropic's only form.
	graphPrefill = "prefill"
)

// graphMergeBudget bounds the work merge keys (<<) can cause in one file.
const graphMergeBudget = 10000

// Options change how a graph file is read.
type Options struct {
	// Kinds are provider kinds beyond the built-in ones, as registered with
	// the runner (runner.Options.Kinds). A provider of such a kind may set
	// only the fields of every kind: kind, model, limits and fallback. For
	// fallback it counts as a model API, not an agent harness.
	Kinds []string
	// AnyKind takes every kind that is not built in as registered: for
	// reading a graph that was valid when it ran (a journaled one) in a
	// program that does not run it, and so need not know its kinds.
	AnyKind bool
}

// Parse parses and validates a graph file's text. path is used in
// messages and to resolve relative paths in the file; it is not read. Every
// problem found is returned in one *Error.
func Parse(path string, src []byte) (*Graph, error) {
	return ParseWith(path, src, Options{})
}

// ParseWith is Parse with options.
func ParseWith(path string, src []byte, opts Options) (*Graph, error) {
	sum := sha256.Sum256(src)
	g := &Graph{
		Path:      path,
		Source:    bytes.Clone(src),
		Hash:      hex.EncodeToString(sum[:]),
		Providers: map[string]*ProviderSpec{},
	}
	p := &graphParser{dir: filepath.Dir(path), mergeBudget: graphMergeBudget, inputs: map[string]*Input{},
		kinds: append(slices.Clone(graphProviderKinds), opts.Kinds...), anyKind: opts.AnyKind, fallbackLines: map[*ProviderSpec][]int{}}
	if root := p.document(src); root != nil {
		p.graph(g, root)
	}
	if len(p.problems) > 0 {
		sort.SliceStable(p.problems, func(i, j int) bool { return p.problems[i].Line < p.problems[j].Line })
		return nil, &Error{Path: path, Problems: p.problems}
	}
	g.index()
	if len(g.order) != len(g.Nodes) { // cannot happen: cycles are problems
		return nil, &Error{Path: path, Problems: []Problem{{Msg: "internal error: graph has a cycle"}}}
	}
	return g, nil
}

type graphParser struct {
	dir         string
	anyKind     bool // Options.AnyKind
	problems    []Problem
	mergeBudget int
	// mergeReported: the merge budget's exhaustion is reported once.
	mergeReported bool
	nodes         []*graphParsedNode
	inputs        map[string]*Input // declared, by name, for template checks
	kinds         []string          // provider kinds known
	// fallbackLines are the lines of each provider's fallback entries, for
	// the checks that need every provider parsed.
	fallbackLines map[*ProviderSpec][]int
}

// graphParsedNode is a node with what the checks across nodes need.
type graphParsedNode struct {
	n         *Node
	scope     graphScope
	needLines []int
}

// graphScope says what a problem is about: a node (by id) or a message prefix
// for things without an id (providers, nodes lacking a valid id).
type graphScope struct {
	node, prefix string
}

func (p *graphParser) report(s graphScope, line int, field, format string, args ...any) {
	msg := s.prefix + fmt.Sprintf(format, args...)
	msg = strings.ReplaceAll(msg, "\n", `\n`) // one problem, one line
	p.problems = append(p.problems, Problem{Line: line, Node: s.node, Field: field, Msg: msg})
}

// document parses the YAML and returns the root mapping, or nil after
// reporting why there is none.
func (p *graphParser) document(src []byte) (root *yaml.Node) {
	top := graphScope{}
	defer func() {
		if r := recover(); r != nil { // the YAML parser must not take the process down on bad input
			root = nil
			p.report(top, 0, "", "invalid YAML: parser failure: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.report(top, 0, "", "the file is empty: a graph needs a name, providers and nodes")
		} else {
			p.yamlError(err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		if x := graphDocRoot(&extra); x != nil && !graphIsNull(x) {
			p.report(top, x.Line, "", "a graph file holds one YAML document; a second one starts here")
		}
	case !errors.Is(err, io.EOF):
		p.yamlError(err)
	}
	if physical, expanded := graphSizes(&doc); expanded > 64*physical+100000 {
		// Aliases repeated inside aliases would make the checks below do
		// work out of all proportion to the file (a "billion laughs").
		p.report(top, 0, "", "the file uses too much aliasing: %d YAML nodes expand to more than %d", physical, expanded)
		return nil
	}
	root = graphDocRoot(&doc)
	switch {
	case root == nil || graphIsNull(root):
		p.report(top, doc.Line, "", "the file is empty: a graph needs a name, providers and nodes")
		return nil
	case root.Kind != yaml.MappingNode:
		p.report(top, root.Line, "", "a graph file must be a YAML mapping with name, providers and nodes")
		return nil
	}
	return root
}

func (p *graphParser) yamlError(err error) {
	msg := err.Error()
	if m := graphYAMLErrPattern.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.report(graphScope{}, line, "", "invalid YAML: %s", m[2])
		return
	}
	p.report(graphScope{}, 0, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

// graphSizes counts a document's YAML nodes as written and as they are
// when every alias is expanded (saturating; an alias inside its own anchor
// counts once).
func graphSizes(doc *yaml.Node) (physical, expanded int) {
	const limit = 1 << 40
	memo := map[*yaml.Node]int{}
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if n == nil {
			return 0
		}
		if n.Kind == yaml.AliasNode {
			return size(n.Alias)
		}
		if v, ok := memo[n]; ok {
			return max(v, 1) // -1: in progress, an alias to an enclosing node
		}
		memo[n] = -1
		total := 1
		for _, c := range n.Content {
			total = min(total+size(c), limit)
		}
		memo[n] = total
		return total
	}
	var count func(n *yaml.Node)
	count = func(n *yaml.Node) {
		physical++
		for _, c := range n.Content {
			count(c)
		}
	}
	count(doc)
	return physical, size(doc)
}

func graphDocRoot(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return graphResolve(doc.Content[0])
	}
	return graphResolve(doc)
}

// graphResolve follows aliases to the anchored node.
func graphResolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func graphIsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

type graphPair struct{ key, val *yaml.Node }

// pairs returns a mapping's entries in order, with merge keys (<<) expanded
// (explicit entries win) and repeated keys reported; what names the keys in
// messages ("field", "provider").
func (p *graphParser) pairs(s graphScope, m *yaml.Node, what string) []graphPair {
	var out, merged []graphPair
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := graphResolve(m.Content[i]), m.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			line := m.Content[i].Line
			p.report(s, line, "", "%s names must be plain strings", what)
			continue
		}
		if k.ShortTag() == "!!merge" {
			merged = append(merged, p.mergePairs(s, k, v, 0)...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			p.report(s, k.Line, k.Value, "%s %s appears twice (first at line %d)", what, graphQuote(k.Value), first.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, graphPair{k, v})
	}
	for _, mp := range merged {
		if _, ok := seen[mp.key.Value]; !ok {
			seen[mp.key.Value] = mp.key
			out = append(out, mp)
		}
	}
	return out
}

// mergePairs returns the entries a merge key brings in: those of a mapping,
// or of a list of mappings (earlier ones win).
func (p *graphParser) mergePairs(s graphScope, key, v *yaml.Node, depth int) []graphPair {
	v = graphResolve(v)
	p.mergeBudget--
	if p.mergeBudget < 0 || depth > 8 {
		if !p.mergeReported {
			p.mergeReported = true
			p.report(s, key.Line, "<<", "merge keys (<<) nest too deeply or too often")
		}
		return nil
	}
	var out []graphPair
	switch {
	case v != nil && v.Kind == yaml.MappingNode:
		var nested []graphPair
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := graphResolve(v.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				continue // reported where the mapping is used directly, if it is
			}
			if k.ShortTag() == "!!merge" {
				nested = append(nested, p.mergePairs(s, k, v.Content[i+1], depth+1)...)
				continue
			}
			out = append(out, graphPair{k, v.Content[i+1]})
		}
		out = append(out, nested...)
	case v != nil && v.Kind == yaml.SequenceNode:
		for _, item := range v.Content {
			out = append(out, p.mergePairs(s, key, item, depth+1)...)
		}
	default:
		p.report(s, key.Line, "<<", "merge key (<<) must merge a mapping, like <<: *defaults")
	}
	// First occurrence wins.
	seen := map[string]bool{}
	uniq := out[:0]
	for _, pr := range out {
		if !seen[pr.key.Value] {
			seen[pr.key.Value] = true
			uniq = append(uniq, pr)
		}
	}
	return uniq
}

// unknownField reports a field that is not known, suggesting a close known
// one, which it returns ("" when none is close).
func (p *graphParser) unknownField(s graphScope, key *yaml.Node, known []string) string {
	if c := graphClosest(key.Value, known); c != "" {
		p.reportAs(s, key.Line, key.Value, ErrUnknownField, "unknown field %s (did you mean %q?)", graphQuote(key.Value), c)
		return c
	}
	p.reportAs(s, key.Line, key.Value, ErrUnknownField, "unknown field %s (known fields: %s)", graphQuote(key.Value), strings.Join(known, ", "))
	return ""
}

// str reads a scalar as a string; null reads as "".
func (p *graphParser) str(s graphScope, f graphPair) (string, bool) {
	v := graphResolve(f.val)
	if v == nil || v.Kind != yaml.ScalarNode {
		p.report(s, f.val.Line, f.key.Value, "%s must be a string", f.key.Value)
		return "", false
	}
	if graphIsNull(v) {
		return "", true
	}
	return v.Value, true
}

// filled reads a string that must not be blank; a blank one is reported
// under where as "KEY is empty", with hint (what to do instead) when given.
func (p *graphParser) filled(s graphScope, f graphPair, where, hint string) (string, bool) {
	v, ok := p.str(s, f)
	if ok && strings.TrimSpace(v) == "" {
		msg := f.key.Value + " is empty"
		if hint != "" {
			msg += " (" + hint + ")"
		}
		p.report(s, f.val.Line, where, "%s", msg)
	}
	return v, ok
}

// integer reads a whole number.
func (p *graphParser) integer(s graphScope, f graphPair) (int, bool) {
	v := graphResolve(f.val)
	if v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!float" && graphDigitsPattern.MatchString(v.Value) {
		p.report(s, v.Line, f.key.Value, "%s is out of range", f.key.Value) // too long for an int, so YAML made it a float
		return 0, false
	}
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		p.report(s, f.val.Line, f.key.Value, "%s must be a whole number", f.key.Value)
		return 0, false
	}
	var n int
	if err := v.Decode(&n); err != nil {
		p.report(s, v.Line, f.key.Value, "%s is out of range", f.key.Value)
		return 0, false
	}
	return n, true
}

// size reads a byte count > 0: a whole number of bytes, or a size such as
// 32MiB (profile.ParseSize).
func (p *graphParser) size(s graphScope, f graphPair) (int64, bool) {
	v := graphResolve(f.val)
	if v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
		n, ok := p.integer(s, f)
		if ok && n <= 0 {
			p.report(s, f.val.Line, f.key.Value, "%s must be > 0 (omit it for the profile's), got %d", f.key.Value, n)
			return 0, false
		}
		return int64(n), ok
	}
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		p.report(s, f.val.Line, f.key.Value, "%s must be a size like 32MiB or a number of bytes", f.key.Value)
		return 0, false
	}
	n, err := profile.ParseSize(v.Value)
	if err != nil || n <= 0 {
		p.report(s, f.val.Line, f.key.Value, "%s must be a size like 32MiB or a number of bytes, not %s", f.key.Value, graphQuote(v.Value))
		return 0, false
	}
	return int64(n), true
}

// boolean reads true or false.
func (p *graphParser) boolean(s graphScope, f graphPair) (bool, bool) {
	v := graphResolve(f.val)
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		p.report(s, f.val.Line, f.key.Value, "%s must be true or false", f.key.Value)
		return false, false
	}
	var b bool
	_ = v.Decode(&b)
	return b, true
}

// strList reads a list of strings, with the line of each entry.
func (p *graphParser) strList(s graphScope, f graphPair) ([]string, []int, bool) {
	v := graphResolve(f.val)
	if v != nil && graphIsNull(v) {
		return nil, nil, true
	}
	if v == nil || v.Kind != yaml.SequenceNode {
		p.report(s, f.val.Line, f.key.Value, "%s must be a list, like [a, b]", f.key.Value)
		return nil, nil, false
	}
	ok := true
	vals := make([]string, 0, len(v.Content))
	lines := make([]int, 0, len(v.Content))
	for _, item := range v.Content {
		line := item.Line
		item = graphResolve(item)
		if item == nil || item.Kind != yaml.ScalarNode || graphIsNull(item) {
			p.report(s, line, f.key.Value, "%s: every entry must be a string", f.key.Value)
			ok = false
			continue
		}
		vals = append(vals, item.Value)
		lines = append(lines, line)
	}
	return vals, lines, ok
}

// strMap reads a mapping of strings to strings.
func (p *graphParser) strMap(s graphScope, f graphPair) (map[string]string, bool) {
	v := graphResolve(f.val)
	if v != nil && graphIsNull(v) {
		return nil, true
	}
	if v == nil || v.Kind != yaml.MappingNode {
		p.report(s, f.val.Line, f.key.Value, "%s must be a mapping of names to strings", f.key.Value)
		return nil, false
	}
	out := map[string]string{}
	ok := true
	for _, e := range p.pairs(s, v, f.key.Value+" entry") {
		val, good := p.str(s, graphPair{key: &yaml.Node{Value: f.key.Value + "." + e.key.Value}, val: e.val})
		if !good {
			ok = false
			continue
		}
		out[e.key.Value] = val
	}
	return out, ok
}

// resolvePath makes a path in the file absolute, resolving it against the
// graph file's directory, so that it does not depend on the working
// directory of whoever uses the graph.
func (p *graphParser) resolvePath(v string) string {
	if v == "" || filepath.IsAbs(v) {
		return v
	}
	j := filepath.Join(p.dir, v)
	if abs, err := filepath.Abs(j); err == nil {
		return abs
	}
	return j
}

// resolveIfPath resolves v if it holds a path separator; a bare name is kept.
func (p *graphParser) resolveIfPath(v string) string {
	if strings.ContainsRune(v, '/') || strings.ContainsRune(v, filepath.Separator) {
		return p.resolvePath(v)
	}
	return v
}

func (p *graphParser) graph(g *Graph, root *yaml.Node) {
	top := graphScope{}
	fields := map[string]graphPair{}
	// suggested: fields an unknown field was probably meant to be; they are
	// not also reported missing.
	suggested := map[string]bool{}
	for _, f := range p.pairs(top, root, "field") {
		if slices.Contains(graphRootFields, f.key.Value) {
			fields[f.key.Value] = f
		} else {
			suggested[p.unknownField(top, f.key, graphRootFields)] = true
		}
	}

	if f, ok := fields["name"]; !ok {
		if !suggested["name"] {
			p.reportAs(top, root.Line, "name", ErrMissingField, "missing name")
		}
	} else if v, ok := p.filled(top, f, "name", ""); ok {
		g.Name = v
	}
	if f, ok := fields["profile"]; ok {
		if v, ok := p.filled(top, f, "profile", "omit it to use the default profile"); ok {
			g.Profile = v
		}
	}
	if f, ok := fields["profiles"]; ok {
		if v, ok := p.filled(top, f, "profiles", "omit it, or give the path of a profiles file"); ok {
			g.ProfilesPath = p.resolvePath(v)
		}
	}

	if f, ok := fields["inputs"]; ok {
		p.inputsBlock(g, f)
	}
	g.Cache, g.CacheTTL = p.cacheFields(top, fields)

	if f, ok := fields["providers"]; ok {
		switch v := graphResolve(f.val); {
		case v != nil && graphIsNull(v):
		case v == nil || v.Kind != yaml.MappingNode:
			p.report(top, f.val.Line, "providers", "providers must be a mapping of name to provider")
		default:
			for _, e := range p.pairs(top, v, "provider") {
				spec := p.provider(e.key, e.val)
				g.Providers[spec.Name] = spec
			}
			// A provider's fallbacks can name providers defined after it.
			for _, name := range graphSortedKeys(g.Providers) {
				spec := g.Providers[name]
				s := graphScope{prefix: fmt.Sprintf("provider %s: ", graphQuote(name))}
				spec.Fallback = p.checkFallbacks(s, g, spec, spec.Fallback, p.fallbackLines[spec], false)
			}
		}
	}

	if len(g.Providers) == 0 && !p.hasProblemField("providers") {
		line := root.Line
		if pf, ok := fields["providers"]; ok {
			line = pf.key.Line
		}
		p.report(top, line, "providers", "no providers defined: a graph needs at least one under providers:")
	}

	f, ok := fields["nodes"]
	if !ok {
		if !suggested["nodes"] {
			p.reportAs(top, root.Line, "nodes", ErrMissingField, "no nodes: a graph needs at least one node under nodes:")
		}
		return
	}
	v := graphResolve(f.val)
	switch {
	case v != nil && (graphIsNull(v) || v.Kind == yaml.SequenceNode && len(v.Content) == 0):
		p.reportAs(top, f.key.Line, "nodes", ErrMissingField, "no nodes: a graph needs at least one node under nodes:")
		return
	case v == nil || v.Kind != yaml.SequenceNode:
		p.report(top, f.val.Line, "nodes", "nodes must be a list of nodes (each entry starting with \"- id: ...\")")
		return
	}
	for i, item := range v.Content {
		p.node(g, i+1, item)
	}
	p.crossCheck(g)
}

// cacheFields reads `cache` and `cache_ttl` of a graph or a node.
func (p *graphParser) cacheFields(s graphScope, fields map[string]graphPair) (cache *bool, ttl time.Duration) {
	if f, ok := fields["cache"]; ok {
		if v, ok := p.boolean(s, f); ok {
			cache = &v
		}
	}
	if f, ok := fields["cache_ttl"]; ok {
		if v, ok := p.str(s, f); ok {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				p.report(s, f.val.Line, "cache_ttl", "cache_ttl must be a duration like 30m, 24h or 168h, not %s", graphQuote(v))
			case d <= 0:
				p.report(s, f.val.Line, "cache_ttl", "cache_ttl must be > 0 (omit it: a cached output then never goes stale)")
			default:
				ttl = d
			}
		}
	}
	return cache, ttl
}

// CachePolicy says whether node n's output may be reused from an earlier
// run, and how old it may be (0: any age). A node's own `cache` decides;
// without one, a harness node or a node with side effects is not cached
// (a hit would skip what its request does to the world), and any other
// follows the graph's `cache`, true when omitted.
func (g *Graph) CachePolicy(n *Node) (on bool, ttl time.Duration) {
	ttl = n.CacheTTL
	if ttl == 0 {
		ttl = g.CacheTTL
	}
	switch {
	case n.Cache != nil:
		return *n.Cache, ttl
	case n.SideEffects != SideNone && n.SideEffects != "":
		return false, ttl
	case g.Providers[n.Provider] != nil && g.Providers[n.Provider].Kind == ProviderKindHarness:
		return false, ttl
	case g.Cache != nil:
		return *g.Cache, ttl
	}
	return true, ttl
}

func (p *graphParser) hasProblemField(field string) bool {
	for _, pr := range p.problems {
		if pr.Field == field && pr.Node == "" {
			return true
		}
	}
	return false
}

func (p *graphParser) provider(key, val *yaml.Node) *ProviderSpec {
	spec := &ProviderSpec{Name: key.Value, Line: key.Line}
	s := graphScope{prefix: fmt.Sprintf("provider %s: ", graphQuote(key.Value))}
	if !graphIDPattern.MatchString(key.Value) {
		p.report(s, key.Line, "", "bad provider name: use letters, digits, \"_\" and \"-\"")
	}
	v := graphResolve(val)
	if v == nil || graphIsNull(v) {
		p.reportAs(s, key.Line, "kind", ErrMissingField, "missing kind (one of %s)", strings.Join(p.kinds, ", "))
		return spec
	}
	if v.Kind != yaml.MappingNode {
		p.report(s, val.Line, "", "a provider must be a mapping with at least kind")
		return spec
	}
	fields := p.pairs(s, v, "field")
	kindLine := key.Line
	for _, f := range fields {
		if f.key.Value == "kind" {
			kindLine = f.key.Line
			if k, ok := p.str(s, f); ok {
				spec.Kind = k
				if !slices.Contains(p.kinds, k) && p.anyKind && k != "" {
					p.kinds = append(p.kinds, k)
				}
				if !slices.Contains(p.kinds, k) {
					p.reportAs(s, f.val.Line, "kind", ErrUnknownKind, "unknown kind %s (want one of %s)", graphQuote(k), strings.Join(p.kinds, ", "))
				}
			}
		}
	}
	kindKnown := slices.Contains(p.kinds, spec.Kind)
	if spec.Kind == "" && !graphMisspelt(fields, "kind", p.providerFieldsFor("")) {
		p.reportAs(s, kindLine, "kind", ErrMissingField, "missing kind (one of %s)", strings.Join(p.kinds, ", "))
	}
	for _, f := range fields {
		name := f.key.Value
		kinds, known := graphProviderFields[name]
		if !known {
			p.unknownField(s, f.key, p.providerFieldsFor(spec.Kind))
			continue
		}
		if kinds != nil && kindKnown && !slices.Contains(kinds, spec.Kind) {
			p.reportAs(s, f.key.Line, name, ErrUnknownField, "field %q is not valid for kind %q (it is for %s)", name, spec.Kind, strings.Join(kinds, ", "))
			continue
		}
		switch name {
		case "kind":
		case "model":
			spec.Model, _ = p.str(s, f)
		case "agent":
			spec.Agent, _ = p.filled(s, f, name, "name a Gemini agent, or omit it for a model")
		case "base_url":
			if u, ok := p.str(s, f); ok {
				pu, err := url.Parse(u)
				if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
					// The value is not echoed: it may hold credentials.
					p.report(s, f.val.Line, name, "base_url must be an http:// or https:// URL with a host")
				}
				spec.BaseURL = u
			}
		case "api_key_env":
			if e, ok := p.str(s, f); ok {
				if !graphEnvNamePattern.MatchString(e) {
					// The value is not echoed: it may be the key itself.
					p.report(s, f.val.Line, name, "api_key_env must name an environment variable (like OPENAI_API_KEY), not hold the key itself")
				}
				spec.APIKeyEnv = e
			}
		case "api":
			if a, ok := p.str(s, f); ok {
				if !slices.Contains(graphSimAPIs, a) {
					p.report(s, f.val.Line, name, "api must be one of %s, not %s", strings.Join(graphSimAPIs, ", "), graphQuote(a))
				}
				spec.API = a
			}
		case "sim":
			sv := graphResolve(f.val)
			switch {
			case sv != nil && graphIsNull(sv):
			case sv == nil || sv.Kind != yaml.MappingNode:
				p.report(s, f.val.Line, name, "sim must be a mapping (the simulator's configuration)")
			default:
				cfg, err := simconfig.DecodeConfig(sv)
				if l, ok := errors.AsType[*simconfig.ConfigErrors](err); ok {
					for _, ce := range l.Problems { // every problem of the block, each at its line
						cause := error(nil)
						if errors.Is(ce, simconfig.ErrUnknownField) {
							cause = ErrUnknownField
						}
						p.reportAs(s, ce.Line, name, cause, "sim: %s", ce.Msg)
					}
				} else if err != nil {
					p.report(s, sv.Line, name, "sim: %v", err)
				}
				spec.Sim = &cfg
			}
		case "harness":
			if h, ok := p.filled(s, f, name, "name a built-in descriptor, like codex, or a descriptor file"); ok {
				spec.Harness = p.resolveIfPath(h)
			}
		case "command":
			if c, ok := p.filled(s, f, name, ""); ok {
				spec.Command = p.resolveIfPath(c)
			}
		case "args":
			spec.Args, _, _ = p.strList(s, f)
		case "env":
			env, _ := p.strMap(s, f)
			for k := range env {
				if !graphEnvNamePattern.MatchString(k) {
					p.report(s, f.val.Line, name, "env: %s is not a valid environment variable name", graphQuote(k))
				}
			}
			spec.Env = env
		case "workdir":
			if w, ok := p.filled(s, f, name, "omit it to run in the graph file's directory"); ok {
				spec.WorkDir = p.resolvePath(w)
			}
		case "max_dials":
			if v, ok := p.integer(s, f); ok {
				if v <= 0 {
					p.report(s, f.val.Line, name, "max_dials must be > 0 (omit it for the default), got %d", v)
				}
				spec.MaxDials = v
			}
		case "continuation":
			if c, ok := p.str(s, f); ok {
				switch {
				case spec.Kind == ProviderKindAnthropic && c != "none" && c != graphPrefill:
					p.report(s, f.val.Line, name, "kind anthropic continues a partial answer only by prefill: continuation must be none or prefill, not %s", graphQuote(c))
				case spec.Kind != ProviderKindAnthropic && c == graphPrefill:
					p.report(s, f.val.Line, name, "continuation prefill is for kind anthropic (a prefilled assistant turn of the Messages API), not kind %s; a chat server takes one of %s", graphQuote(spec.Kind), strings.Join(graphContinuations, ", "))
				case spec.Kind != ProviderKindAnthropic && !slices.Contains(graphContinuations, c):
					p.report(s, f.val.Line, name, "continuation must be one of %s, not %s", strings.Join(graphContinuations, ", "), graphQuote(c))
				}
				spec.Continuation = c
			}
		case "state_dir":
			if d, ok := p.filled(s, f, name, "omit it for the default, ~/.local/state/noderun/harness"); ok {
				spec.StateDir = p.resolvePath(d)
			}
		case "limits":
			spec.Limits = p.limits(s, f)
		case "max_output_bytes":
			spec.MaxOutputBytes, _ = p.size(s, f)
		case "fallback":
			names, lines := p.fallbackList(s, f, "list the providers a node of this one moves to, like [backup], or omit it")
			if len(names) > 0 { // [] is the same as none
				spec.Fallback, p.fallbackLines[spec] = names, lines
			}
		}
	}
	if spec.Kind == ProviderKindSim && spec.API == "" {
		spec.API = SimAPIChat
	}
	if spec.API == SimAPIResponses && spec.Continuation != "" && spec.Continuation != "none" {
		p.report(s, spec.Line, "continuation", "continuation is for chat servers; a Responses API stream is re-attached by id instead")
	}
	return spec
}

// graphMisspelt: one of fields is unknown and closest to want, so it is
// reported as unknown rather than want as missing.
func graphMisspelt(fields []graphPair, want string, known []string) bool {
	for _, f := range fields {
		if !slices.Contains(known, f.key.Value) && graphClosest(f.key.Value, known) == want {
			return true
		}
	}
	return false
}

// providerFieldsFor lists the fields valid for a provider kind (all of
// them when the kind is unknown), sorted.
func (p *graphParser) providerFieldsFor(kind string) []string {
	known := slices.Contains(p.kinds, kind)
	var out []string
	for f, kinds := range graphProviderFields {
		if kinds == nil || !known || slices.Contains(kinds, kind) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func (p *graphParser) node(g *Graph, idx int, item *yaml.Node) {
	item = graphResolve(item)
	noID := graphScope{prefix: fmt.Sprintf("node #%d: ", idx)}
	if item == nil || item.Kind != yaml.MappingNode {
		line := 0
		if item != nil {
			line = item.Line
		}
		p.report(noID, line, "", "a node must be a mapping with at least id and prompt")
		return
	}
	n := &Node{Line: item.Line}
	pn := &graphParsedNode{n: n, scope: noID}
	if id := graphLookup(item, "id"); id != nil && id.Kind == yaml.ScalarNode && graphIDPattern.MatchString(id.Value) {
		pn.scope = graphScope{node: id.Value}
	}
	s := pn.scope
	fields := p.pairs(s, item, "field")
	byName := map[string]graphPair{}
	suggested := map[string]bool{}
	for _, f := range fields {
		if slices.Contains(graphNodeFields, f.key.Value) {
			byName[f.key.Value] = f
		} else {
			suggested[p.unknownField(s, f.key, graphNodeFields)] = true
		}
	}

	// id
	if f, ok := byName["id"]; !ok {
		if !suggested["id"] {
			p.reportAs(s, item.Line, "id", ErrMissingField, "missing id")
		}
	} else if id, ok := p.str(s, f); ok {
		switch {
		case id == "":
			p.report(s, f.val.Line, "id", "id is empty")
		case !graphIDPattern.MatchString(id):
			p.report(s, f.val.Line, "id", "bad id %s: use letters, digits, \"_\" and \"-\"", graphQuote(id))
		}
		n.ID = id
	}

	// needs
	if f, ok := byName["needs"]; ok {
		needs, lines, _ := p.strList(s, f)
		seen := map[string]bool{}
		for i, need := range needs {
			switch {
			case need == n.ID && n.ID != "":
				p.report(s, lines[i], "needs", "needs itself")
			case seen[need]:
				p.report(s, lines[i], "needs", "needs %s more than once", graphQuote(need))
			default:
				seen[need] = true
				n.Needs = append(n.Needs, need)
				pn.needLines = append(pn.needLines, lines[i])
			}
		}
	}

	// provider
	var spec *ProviderSpec
	if f, ok := byName["provider"]; ok {
		if name, ok := p.str(s, f); ok {
			n.Provider = name
			spec = g.Providers[name]
			switch {
			case name == "":
				p.report(s, f.val.Line, "provider", "provider is empty")
			case spec == nil && len(g.Providers) > 0:
				p.reportAs(s, f.val.Line, "provider", ErrUnknownProvider, "unknown provider %s (defined: %s)%s",
					graphQuote(name), strings.Join(graphSortedKeys(g.Providers), ", "), graphSuggest(name, graphSortedKeys(g.Providers)))
			case spec == nil:
				p.reportAs(s, f.val.Line, "provider", ErrUnknownProvider, "unknown provider %s (the graph defines none)", graphQuote(name))
			}
		}
	} else {
		switch len(g.Providers) {
		case 0: // reported once for the graph
		case 1:
			for name, sp := range g.Providers {
				n.Provider, spec = name, sp
			}
		default:
			p.report(s, item.Line, "provider", "no provider: the graph defines several (%s), so the node must name one",
				strings.Join(graphSortedKeys(g.Providers), ", "))
		}
	}

	// model
	if f, ok := byName["model"]; ok {
		n.Model, _ = p.str(s, f)
	}
	if f, ok := byName["agent"]; ok {
		n.Agent, _ = p.filled(s, f, "agent", "name a Gemini agent, or omit it for a model")
		if spec != nil && spec.Kind != ProviderKindGemini {
			p.report(s, f.key.Line, "agent", "agent is only for nodes of gemini providers (provider %s is %s)", graphQuote(spec.Name), spec.Kind)
		}
		if n.Agent != "" && n.Model != "" {
			p.report(s, f.key.Line, "agent", "set agent or model, not both: the Interactions API runs one or the other")
		}
	}
	if n.Agent == "" && n.Model == "" && spec != nil && spec.Kind == ProviderKindGemini {
		n.Agent = spec.Agent
	}
	if n.Model == "" && n.Agent == "" && spec != nil {
		n.Model = spec.Model
	}
	if n.Model == "" && n.Agent == "" && spec != nil && spec.Kind == ProviderKindGemini {
		p.report(s, item.Line, "model", "no model or agent: set model or agent on the node or on provider %s", graphQuote(spec.Name))
	}
	if n.Model == "" && spec != nil && (spec.Kind == ProviderKindOpenAI || spec.Kind == ProviderKindResponses || spec.Kind == ProviderKindAnthropic) {
		p.report(s, item.Line, "model", "no model: set model on the node or on provider %s", graphQuote(spec.Name))
	}

	// reasoning_effort, max_output_tokens, retries
	if f, ok := byName["reasoning_effort"]; ok {
		if r, ok := p.str(s, f); ok {
			if !slices.Contains(graphReasoningLevel, r) {
				p.report(s, f.val.Line, "reasoning_effort", "reasoning_effort must be one of %s, not %s", strings.Join(graphReasoningLevel, ", "), graphQuote(r))
			}
			n.ReasoningEffort = r
		}
	}
	if f, ok := byName["max_output_tokens"]; ok {
		if v, ok := p.integer(s, f); ok {
			if v <= 0 {
				p.report(s, f.val.Line, "max_output_tokens", "max_output_tokens must be > 0, got %d", v)
			}
			n.MaxOutputTokens = v
		}
	}
	if f, ok := byName["max_output_bytes"]; ok {
		n.MaxOutputBytes, _ = p.size(s, f)
	}
	if f, ok := byName["retries"]; ok {
		if v, ok := p.integer(s, f); ok {
			if v < 0 {
				p.report(s, f.val.Line, "retries", "retries must be >= 0, got %d", v)
			}
			n.Retries = &v
		}
	}

	// side_effects
	if f, ok := byName["side_effects"]; ok {
		if v, ok := p.str(s, f); ok {
			if !slices.Contains(graphSideEffects, v) {
				p.report(s, f.val.Line, "side_effects", "side_effects must be one of %s, not %s", strings.Join(graphSideEffects, ", "), graphQuote(v))
			}
			n.SideEffects = SideEffects(v)
		}
	} else if spec != nil && spec.Kind == ProviderKindHarness {
		n.SideEffects = SideUnsafe
	} else {
		n.SideEffects = SideNone
	}

	// fallback, fallback_continue (after side_effects: unsafe nodes never fail over)
	p.nodeFallback(g, s, n, spec, byName)

	// timeout, continue_on_failure, env
	if f, ok := byName["timeout"]; ok {
		if v, ok := p.str(s, f); ok {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				p.report(s, f.val.Line, "timeout", "timeout must be a duration like 90s, 20m or 1h30m, not %s", graphQuote(v))
			case d <= 0:
				p.report(s, f.val.Line, "timeout", "timeout must be > 0 (omit it for no timeout)")
			}
			n.Timeout = d
		}
	}
	if f, ok := byName["continue_on_failure"]; ok {
		n.ContinueOnFailure, _ = p.boolean(s, f)
	}
	n.Cache, n.CacheTTL = p.cacheFields(s, byName)
	if f, ok := byName["env"]; ok {
		env, _ := p.strMap(s, f)
		for _, k := range graphSortedKeys(env) {
			if !graphEnvNamePattern.MatchString(k) {
				p.report(s, f.val.Line, "env", "env: %s is not a valid environment variable name", graphQuote(k))
			}
		}
		if spec != nil && spec.Kind != ProviderKindHarness && len(env) > 0 {
			p.report(s, f.key.Line, "env", "env is only for nodes of harness providers (provider %s is %s)", graphQuote(spec.Name), spec.Kind)
		}
		n.Env = env
	}

	// system and prompt templates
	if f, ok := byName["system"]; ok {
		if v, ok := p.str(s, f); ok {
			n.System = v
			if v != "" {
				n.systemTmpl = p.template(s, n, "system", f.val, v)
			}
		}
	}
	if f, ok := byName["prompt"]; !ok {
		if !suggested["prompt"] {
			p.reportAs(s, item.Line, "prompt", ErrMissingField, "missing prompt")
		}
	} else if v, ok := p.str(s, f); ok {
		n.Prompt = v
		if strings.TrimSpace(v) == "" {
			p.report(s, f.val.Line, "prompt", "prompt is empty")
		} else {
			n.promptTmpl = p.template(s, n, "prompt", f.val, v)
		}
	}

	g.Nodes = append(g.Nodes, n)
	p.nodes = append(p.nodes, pn)
}

// limits reads a provider's `limits:`: at least one of its fields, each a
// whole number > 0.
func (p *graphParser) limits(s graphScope, f graphPair) Limits {
	var l Limits
	v := graphResolve(f.val)
	switch {
	case v != nil && graphIsNull(v):
		p.report(s, f.val.Line, "limits", "%s", graphLimitsEmpty)
		return l
	case v == nil || v.Kind != yaml.MappingNode:
		p.report(s, f.val.Line, "limits", "limits must be a mapping, like {requests_per_minute: 500}")
		return l
	}
	ls := graphScope{node: s.node, prefix: s.prefix + "limits: "}
	entries := p.pairs(ls, v, "field")
	if len(entries) == 0 {
		p.report(s, f.val.Line, "limits", "%s", graphLimitsEmpty)
	}
	for _, e := range entries {
		var dst *int
		switch e.key.Value {
		case "requests_per_minute":
			dst = &l.RequestsPerMinute
		case "tokens_per_minute":
			dst = &l.TokensPerMinute
		case "concurrency":
			dst = &l.Concurrency
		default:
			p.unknownField(ls, e.key, graphLimitsFields)
			continue
		}
		n, ok := p.integer(ls, e)
		switch {
		case !ok:
		case n <= 0:
			p.report(ls, e.val.Line, e.key.Value, "%s must be > 0 (omit it to leave it to the provider's headers), got %d", e.key.Value, n)
		default:
			*dst = n
		}
	}
	return l
}

// graphLimitsEmpty: a `limits:` that declares nothing is a slip (a key
// lost in an edit), not a way to say "no limits": omitting it says that.
const graphLimitsEmpty = "limits declares no limit: set requests_per_minute, tokens_per_minute or concurrency, " +
	"or omit limits (the run then learns them from the provider's rate-limit headers)"

// fallbackList reads a `fallback:` list with the line of each entry. A null
// value is an error, not "none": for a node it could mean either the
// provider's list or [], and a graph should say which. hint says what to
// write instead.
func (p *graphParser) fallbackList(s graphScope, f graphPair, hint string) ([]string, []int) {
	if v := graphResolve(f.val); v != nil && graphIsNull(v) {
		p.report(s, f.val.Line, "fallback", "fallback is empty (%s)", hint)
		return nil, nil
	}
	names, lines, _ := p.strList(s, f)
	return names, lines
}

// checkFallbacks reports what is wrong with a fallback list (names at
// lines) of provider own (the node's provider, for a node's list): a name
// that is not a provider of the graph, own itself, a name listed twice, and
// a move between an agent harness and a model API. It returns the names,
// as given.
func (p *graphParser) checkFallbacks(s graphScope, g *Graph, own *ProviderSpec, names []string, lines []int, forNode bool) []string {
	defined := graphSortedKeys(g.Providers)
	seen := map[string]bool{}
	for i, name := range names {
		fb := g.Providers[name]
		switch {
		case fb == nil:
			p.reportAs(s, lines[i], "fallback", ErrUnknownProvider, "fallback: unknown provider %s (defined: %s)%s",
				graphQuote(name), strings.Join(defined, ", "), graphSuggest(name, defined))
		case own != nil && name == own.Name && forNode:
			p.report(s, lines[i], "fallback", "fallback: %s is the node's own provider (list the providers it moves to when that one is unavailable)", graphQuote(name))
		case own != nil && name == own.Name:
			p.report(s, lines[i], "fallback", "fallback: %s is this provider itself (list the providers its nodes move to when it is unavailable)", graphQuote(name))
		case seen[name]:
			p.report(s, lines[i], "fallback", "fallback names %s more than once", graphQuote(name))
		case own != nil && slices.Contains(p.kinds, own.Kind) && slices.Contains(p.kinds, fb.Kind) &&
			(own.Kind == ProviderKindHarness) != (fb.Kind == ProviderKindHarness):
			p.report(s, lines[i], "fallback", "fallback: provider %s is kind %s and provider %s kind %s: a node cannot move between an agent harness and a model API",
				graphQuote(name), fb.Kind, graphQuote(own.Name), own.Kind)
		case fb.Model == "" && (fb.Kind == ProviderKindOpenAI || fb.Kind == ProviderKindResponses || fb.Kind == ProviderKindAnthropic):
			// A node that moves takes its fallback's model, never its own.
			p.report(s, lines[i], "fallback", "fallback: provider %s has no model: a node that moves to it sends the fallback's model (set model on %s)",
				graphQuote(name), graphQuote(name))
		case fb.Model == "" && fb.Agent == "" && fb.Kind == ProviderKindGemini:
			p.report(s, lines[i], "fallback", "fallback: provider %s has no model or agent: a node that moves to it sends the fallback's (set one on %s)",
				graphQuote(name), graphQuote(name))
		}
		seen[name] = true
	}
	return names
}

// nodeFallback reads a node's `fallback` and `fallback_continue`, once its
// provider and side effects are known.
func (p *graphParser) nodeFallback(g *Graph, s graphScope, n *Node, spec *ProviderSpec, byName map[string]graphPair) {
	unsafeReported := false
	if f, ok := byName["fallback"]; ok {
		names, lines := p.fallbackList(s, f, "list the providers the node moves to, like [backup]; [] turns failover off for the node; omit it for its provider's list")
		if names != nil { // a list, maybe [] (no failover for this node): not nil
			n.Fallback = p.checkFallbacks(s, g, spec, names, lines, true)
		}
		if len(n.Fallback) > 0 && n.SideEffects == SideUnsafe {
			unsafeReported = true
			if _, set := byName["side_effects"]; set {
				p.report(s, f.key.Line, "fallback", "unsafe nodes never fail over: drop fallback or side_effects")
			} else {
				p.report(s, f.key.Line, "fallback", "unsafe nodes never fail over, and a node of a harness provider is unsafe unless it sets side_effects: drop fallback or set side_effects")
			}
		}
	}
	f, ok := byName["fallback_continue"]
	if !ok {
		return
	}
	on, ok := p.boolean(s, f)
	if !ok || !on {
		return
	}
	n.FallbackContinue = true
	switch {
	case unsafeReported:
	case n.Fallback != nil && len(n.Fallback) == 0:
		p.report(s, f.key.Line, "fallback_continue", "fallback_continue does nothing: the node's fallback: [] turns failover off")
	case len(g.FallbacksOf(n)) == 0 && spec != nil:
		p.report(s, f.key.Line, "fallback_continue", "fallback_continue does nothing: the node has no fallback providers (set fallback on the node or on provider %s)", graphQuote(spec.Name))
	case n.SideEffects == SideUnsafe && spec != nil:
		p.report(s, f.key.Line, "fallback_continue", "fallback_continue does nothing: unsafe nodes never fail over")
	}
}

// graphLookup finds a key's value in a mapping, ignoring merge keys.
func graphLookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return graphResolve(m.Content[i+1])
		}
	}
	return nil
}

func graphSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ContinuationForms lists the values of a provider's continuation field.
func ContinuationForms() []string { return slices.Clone(graphContinuations) }
