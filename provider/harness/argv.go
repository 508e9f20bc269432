package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Template is an argv template. Each item is a string or a group (a list of
// strings). Strings may hold placeholders:
//
//	{model} {prompt} {system} {reasoning_effort} {max_output_tokens}
//	{thread_id} {continue_prompt} {workdir} {state_dir} {node}
//
// ({state_dir} is the node's own directory for the harness's state, see
// Config.StateDir)
// optionally with a filter: {system|toml} is the value as a TOML basic string
// (quoted and escaped, for `-c key=VALUE` settings), {prompt|json} as a JSON
// string. "{{" and "}}" are literal braces. A group is left out entirely when
// a placeholder in it has an empty value (so `[-m, "{model}"]` disappears
// when the node names no model); a plain string is always passed, even empty.
// The item "{args}" (alone) is where the provider's extra args go; without
// it they are appended at the end.
type Template []Arg

// Arg is one template item.
type Arg struct {
	Group bool
	Parts []string
	Line  int
}

// placeholder names and what they are.
var placeholders = []string{"model", "prompt", "system", "reasoning_effort", "max_output_tokens",
	"thread_id", "continue_prompt", "workdir", "state_dir", "node"}

const argsItem = "{args}"

// UnmarshalYAML reads a list of strings and groups and checks every placeholder.
func (t *Template) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return errAt(n, "an argv template must be a list")
	}
	out := make(Template, 0, len(n.Content))
	for _, c := range n.Content {
		a := Arg{Line: c.Line}
		switch c.Kind {
		case yaml.ScalarNode:
			a.Parts = []string{c.Value}
		case yaml.SequenceNode:
			a.Group = true
			for _, g := range c.Content {
				if g.Kind != yaml.ScalarNode {
					return errAt(g, "an argv group must hold plain strings")
				}
				if g.Value == argsItem {
					return errAt(g, "{args} must be an item of its own, not in a group")
				}
				a.Parts = append(a.Parts, g.Value)
			}
			if len(a.Parts) == 0 {
				return errAt(c, "an argv group must not be empty")
			}
		default:
			return errAt(c, "an argv item must be a string or a list of strings")
		}
		for _, p := range a.Parts {
			if a.Group || p != argsItem {
				if _, err := expand(p, nil); err != nil {
					return errAt(c, "%v", err)
				}
			}
		}
		out = append(out, a)
	}
	*t = out
	return nil
}

// uses reports whether the template refers to placeholder name.
func (t Template) uses(name string) bool {
	for _, a := range t {
		for _, p := range a.Parts {
			if names, err := expand(p, nil); err == nil && slices.Contains(names.used, name) {
				return true
			}
		}
	}
	return false
}

// Argv expands the template with vals (placeholder name → value) and the
// extra args.
func (t Template) Argv(vals map[string]string, extra []string) []string {
	var argv []string
	spliced := false
	for _, a := range t {
		if !a.Group && a.Parts[0] == argsItem {
			argv = append(argv, extra...)
			spliced = true
			continue
		}
		var group []string
		keep := true
		for _, p := range a.Parts {
			r, _ := expand(p, vals)
			if a.Group && r.empty {
				keep = false
			}
			group = append(group, r.text)
		}
		if keep {
			argv = append(argv, group...)
		}
	}
	if !spliced {
		argv = append(argv, extra...)
	}
	return argv
}

type expansion struct {
	text  string
	used  []string
	empty bool // some placeholder had an empty value
}

// expand substitutes the placeholders of s. With vals nil it only checks s.
func expand(s string, vals map[string]string) (expansion, error) {
	var r expansion
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '}':
			return r, fmt.Errorf("unmatched } in %q (write }} for a literal brace)", s)
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return r, fmt.Errorf("unclosed { in %q (write {{ for a literal brace)", s)
			}
			name, filter, _ := strings.Cut(s[i+1:i+end], "|")
			if !slices.Contains(placeholders, name) {
				if name == "args" {
					return r, fmt.Errorf("{args} must be an item of its own")
				}
				return r, fmt.Errorf("unknown placeholder {%s} (known: %s)", name, strings.Join(placeholders, ", "))
			}
			if filter != "" && filter != "toml" && filter != "json" {
				return r, fmt.Errorf("unknown filter %q in {%s|%s} (known: toml, json)", filter, name, filter)
			}
			r.used = append(r.used, name)
			v := vals[name]
			if v == "" {
				r.empty = true
			}
			switch filter {
			case "toml":
				v = tomlString(v)
			case "json":
				v = jsonString(v)
			}
			b.WriteString(v)
			i += end
		default:
			b.WriteByte(c)
		}
	}
	r.text = b.String()
	return r, nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}
