package graph

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Input is one entry of a graph's `inputs:`: a value the run takes from
// whoever starts it, read by templates as {{ input "name" }}.
type Input struct {
	Name        string
	Description string
	// Type is InputString, InputInt, InputBool or InputFile.
	Type string
	// Default is the value when none is given; HasDefault says there is one
	// (a file default is made absolute against the graph file's directory).
	Default    string
	HasDefault bool
	// Required: a run without a value is refused. It is true when the file
	// says so, or sets neither required nor default.
	Required bool
	// Line is where the input is named in the file.
	Line int
}

var graphInputNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Input returns the declared input with the given name, or nil.
func (g *Graph) Input(name string) *Input {
	for _, in := range g.Inputs {
		if in.Name == name {
			return in
		}
	}
	return nil
}

func (p *graphParser) inputsBlock(g *Graph, f graphPair) {
	top := graphScope{}
	g.InputsLine = f.key.Line
	v := graphResolve(f.val)
	switch {
	case v != nil && graphIsNull(v):
		return
	case v == nil || v.Kind != yaml.MappingNode:
		p.report(top, f.val.Line, "inputs", "inputs must be a mapping of input names to {description, type, default, required}")
		return
	}
	for _, e := range p.pairs(top, v, "input") {
		in := p.input(e.key, e.val)
		g.Inputs = append(g.Inputs, in)
		p.inputs[in.Name] = in
	}
}

func (p *graphParser) input(key, val *yaml.Node) *Input {
	in := &Input{Name: key.Value, Type: InputString, Line: key.Line}
	s := graphScope{prefix: fmt.Sprintf("input %s: ", graphQuote(key.Value))}
	if !graphInputNamePattern.MatchString(key.Value) {
		p.report(s, key.Line, "", "bad input name: use letters, digits and \"_\", not starting with a digit")
	}
	v := graphResolve(val)
	if v == nil || graphIsNull(v) {
		in.Required = true
		return in
	}
	if v.Kind != yaml.MappingNode {
		p.report(s, val.Line, "", "an input must be a mapping, like {description: ..., default: ...}")
		return in
	}
	var required *bool
	var def graphPair
	for _, f := range p.pairs(s, v, "field") {
		switch f.key.Value {
		case "description":
			in.Description, _ = p.str(s, f)
		case "type":
			if t, ok := p.str(s, f); ok {
				if !slices.Contains(graphInputTypes, t) {
					p.report(s, f.val.Line, "type", "type must be one of %s, not %s", strings.Join(graphInputTypes, ", "), graphQuote(t))
				}
				in.Type = t
			}
		case "default":
			if d, ok := p.str(s, f); ok {
				in.Default, in.HasDefault, def = d, true, f
			}
		case "required":
			if b, ok := p.boolean(s, f); ok {
				required = &b
			}
		default:
			p.unknownField(s, f.key, graphInputFields)
		}
	}
	switch {
	case required != nil && *required && in.HasDefault:
		p.report(s, def.key.Line, "default", "a required input has no default (drop required, or the default)")
	case required != nil:
		in.Required = *required
	default:
		in.Required = !in.HasDefault
	}
	if in.HasDefault {
		if _, err := convertInput(in.Type, in.Default); err != nil {
			p.report(s, def.val.Line, "default", "default: %v", err)
		}
		if in.Type == InputFile {
			in.Default = p.resolvePath(in.Default)
		}
	}
	return in
}

// convertInput checks a value against its type and returns it in its
// canonical form ("true", "42"); a file value is returned as given.
func convertInput(typ, v string) (string, error) {
	switch typ {
	case InputInt:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "", fmt.Errorf("%s is not a whole number", graphQuote(v))
		}
		return strconv.Itoa(n), nil
	case InputBool:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return "", fmt.Errorf("%s is not true or false", graphQuote(v))
		}
		return strconv.FormatBool(b), nil
	case InputFile:
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("the file name is empty")
		}
	}
	return v, nil
}

// ResolveInputs checks the values given for a run (name to value, as on the
// command line) against the graph's inputs, fills in defaults, and returns
// the values templates read: ints and bools in canonical form, and for a
// file input the file's content. An unknown name, a missing required input
// or a value of the wrong type is an *Error whose problems name the graph
// file and the line of the inputs block (or of the input).
//
// A file input is read with ReadInput, at most DefaultMaxInputBytes: see
// ResolveInputsContext for another bound, and for a read that waits (a
// FIFO) that gives way when a context ends.
func (g *Graph) ResolveInputs(given map[string]string) (map[string]string, error) {
	return g.ResolveInputsContext(context.Background(), given, 0)
}

// ResolveInputsContext is ResolveInputs reading a file input at most
// maxBytes (0: DefaultMaxInputBytes) and giving up when ctx ends.
func (g *Graph) ResolveInputsContext(ctx context.Context, given map[string]string, maxBytes int64) (map[string]string, error) {
	return g.resolveInputs(ctx, given, maxBytes, true)
}

// CheckInputs finds what ResolveInputsContext would find wrong with the
// values given, without reading a file input (it checks that the file is
// there and, for a regular one, within maxBytes): a FIFO or a process
// substitution (/dev/fd/N) is read once, by the run.
func (g *Graph) CheckInputs(given map[string]string, maxBytes int64) error {
	_, err := g.resolveInputs(context.Background(), given, maxBytes, false)
	return err
}

func (g *Graph) resolveInputs(ctx context.Context, given map[string]string, maxBytes int64, read bool) (map[string]string, error) {
	var probs []Problem
	line := g.InputsLine
	if line == 0 {
		line = 1
	}
	declared := make([]string, 0, len(g.Inputs))
	for _, in := range g.Inputs {
		declared = append(declared, in.Name)
	}
	for _, name := range graphSortedKeys(given) {
		if g.Input(name) != nil {
			continue
		}
		msg := fmt.Sprintf("unknown input %s", graphQuote(name))
		if len(declared) == 0 {
			msg += ": the graph declares no inputs"
		} else {
			msg += fmt.Sprintf(" (declared: %s)%s", strings.Join(declared, ", "), graphSuggest(name, declared))
		}
		probs = append(probs, Problem{Line: line, Field: "inputs", Msg: msg})
	}
	out := make(map[string]string, len(g.Inputs))
	for _, in := range g.Inputs {
		v, ok := given[in.Name]
		if !ok {
			if !in.HasDefault {
				if in.Required {
					mi := &MissingInputError{Name: in.Name, Description: in.Description}
					probs = append(probs, Problem{Line: in.Line, Field: "inputs", Msg: mi.Error(), Err: mi})
				}
				continue
			}
			v = in.Default
		}
		c, err := convertInput(in.Type, v)
		if err != nil {
			probs = append(probs, Problem{Line: in.Line, Field: "inputs", Msg: fmt.Sprintf("input %s: %v", graphQuote(in.Name), err)})
			continue
		}
		if in.Type == InputFile && !read {
			if _, err := checkInput(c, maxBytes); err != nil {
				probs = append(probs, Problem{Line: in.Line, Field: "inputs", Msg: fmt.Sprintf("input %s: %v", graphQuote(in.Name), err), Err: err})
			}
			continue
		}
		if in.Type == InputFile {
			b, err := ReadInput(ctx, c, maxBytes)
			if err != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("input %s: %w", graphQuote(in.Name), err) // interrupted: not a problem of the graph
			}
			if err != nil {
				probs = append(probs, Problem{Line: in.Line, Field: "inputs", Msg: fmt.Sprintf("input %s: %v", graphQuote(in.Name), err), Err: err})
				continue
			}
			c = string(b)
		}
		out[in.Name] = c
	}
	if len(probs) > 0 {
		slices.SortStableFunc(probs, func(a, b Problem) int { return a.Line - b.Line })
		return nil, &Error{Path: g.Path, Problems: probs}
	}
	return out, nil
}
