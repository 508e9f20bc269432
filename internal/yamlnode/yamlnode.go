// Package yamlnode reads YAML nodes as noderun's files speak of them: aliases
// followed, merge keys applied, and a value named as a person would name it
// in an error ("tokens: want a whole number, got \"many\""). The profiles,
// simulator and price file decoders share it, so that every file says its
// problems in the same words.
package yamlnode

import (
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// maxAliases bounds how many aliases Resolve follows: a file is untrusted
// input, and yaml.v3 accepts an alias of an alias.
const maxAliases = 8

// Resolve follows aliases to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < maxAliases; i++ {
		n = n.Alias
	}
	return n
}

// Pairs are the key-value pairs of mapping n, with merge keys (<<) applied:
// a key of n wins over a merged one.
func Pairs(n *yaml.Node) [][2]*yaml.Node {
	var own, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() != "!!merge" {
			own = append(own, [2]*yaml.Node{k, v})
			continue
		}
		v = Resolve(v)
		srcs := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			srcs = v.Content
		}
		for _, s := range srcs {
			if s = Resolve(s); s.Kind == yaml.MappingNode {
				merged = append(merged, Pairs(s)...)
			}
		}
	}
	out := own
	for _, m := range merged {
		if !slices.ContainsFunc(out, func(o [2]*yaml.Node) bool { return o[0].Value == m[0].Value }) {
			out = append(out, m)
		}
	}
	return out
}

// IsNull reports a scalar that holds nothing (~, null, or no value).
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// Got names what a node holds: a quoted scalar, "a list", "a mapping",
// "an alias" (one Resolve would not follow), "nothing".
func Got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}
