package graph

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"go.yaml.in/yaml/v3"
)

// A node's system and prompt are Go text/templates. Dot is
// graphTemplateData: {{ .Outputs.plan }} is the output of need "plan", and
// {{ output "plan" }} (for ids that are not Go identifiers, like "my-plan")
// and {{ index .Outputs "plan" }} are the same. Only the outputs of the
// node's needs are there; a missing one is an error, never "". A need that
// failed under continue_on_failure has the output "" and {{ failed "id" }}
// true. {{ input "goal" }} and {{ .Inputs.goal }} are the run's inputs.
//
// Parsing checks statically that a template uses only outputs of the node's
// needs. References that cannot be checked (a computed id, .Outputs used as a
// whole other than in {{ range .Outputs }}) are rejected.

// graphTemplateData is what a node's templates see as dot.
type graphTemplateData struct {
	// Outputs holds the outputs of the node's needs, by id.
	Outputs map[string]string
	// Inputs holds the run's inputs, by name.
	Inputs map[string]string
}

// Values are what a node's templates read when it is rendered.
type Values struct {
	// Outputs must hold the output of every need ("" for one that failed
	// under continue_on_failure); entries for other nodes are ignored.
	Outputs map[string]string
	// Failed names the needs that failed under continue_on_failure.
	Failed map[string]bool
	// Inputs are the run's resolved inputs (Graph.ResolveInputs).
	Inputs map[string]string
}

// graphTemplateParseFuncs declares the template functions for parsing; the
// real ones are bound to a node's outputs when it is rendered.
var graphTemplateParseFuncs = template.FuncMap{
	"output": func(string) (string, error) { return "", errors.New("output is only available while rendering") },
	"input":  func(string) (string, error) { return "", errors.New("input is only available while rendering") },
	"failed": func(string) (bool, error) { return false, errors.New("failed is only available while rendering") },
}

var (
	graphTemplateErrPattern     = regexp.MustCompile(`^template: [^:]*:(\d+):(?:\d+:)? ?(.*)$`)
	graphTemplateStartedPattern = regexp.MustCompile(` started at [^:]*:(\d+)`)
	graphHyphenRefPattern       = regexp.MustCompile(`\.Outputs\.[A-Za-z0-9_]*-`)
	graphUndefinedFunc          = regexp.MustCompile(`function "([^"]*)" not defined`)
)

// graphLiteral says whether text has no action: it renders as itself. Most
// prompts of a wide graph are such text, and parsing each one as a template,
// then cloning it to render, was 40% of loading a graph of 1,000 nodes.
func graphLiteral(text string) bool { return !strings.Contains(text, "{{") }

func graphNewTemplate(field, text string) (*template.Template, error) {
	return template.New(field).Option("missingkey=error").Funcs(graphTemplateParseFuncs).Parse(text)
}

// RenderPrompt executes the node's prompt template. outputs must hold the
// output of every need; entries for other nodes are ignored. A template that
// reads inputs needs Render.
func (n *Node) RenderPrompt(outputs map[string]string) (string, error) {
	return n.render("prompt", n.Prompt, n.promptTmpl, Values{Outputs: outputs})
}

// RenderSystem executes the node's system template ("" when it has none), as
// RenderPrompt.
func (n *Node) RenderSystem(outputs map[string]string) (string, error) {
	if n.System == "" {
		return "", nil
	}
	return n.render("system", n.System, n.systemTmpl, Values{Outputs: outputs})
}

// Render executes the node's system ("" when it has none) and prompt
// templates with v.
func (n *Node) Render(v Values) (system, prompt string, err error) {
	if n.System != "" {
		if system, err = n.render("system", n.System, n.systemTmpl, v); err != nil {
			return "", "", err
		}
	}
	prompt, err = n.render("prompt", n.Prompt, n.promptTmpl, v)
	return system, prompt, err
}

func (n *Node) render(field, text string, t *template.Template, v Values) (string, error) {
	outputs := v.Outputs
	data := make(map[string]string, len(n.Needs))
	for _, id := range n.Needs {
		v, ok := outputs[id]
		if !ok {
			return "", fmt.Errorf("node %q: %s: no output given for %q, which it needs", n.ID, field, id)
		}
		data[id] = v
	}
	if graphLiteral(text) {
		if len(text) > MaxPromptBytes {
			return "", fmt.Errorf("node %q: %s: the rendered text is %w: at most %d MiB", n.ID, field, ErrTooLarge, MaxPromptBytes>>20)
		}
		return text, nil
	}
	if t == nil { // a Node built in code rather than parsed
		var err error
		if t, err = graphNewTemplate(field, text); err != nil {
			return "", fmt.Errorf("node %q: %s: %w", n.ID, field, err)
		}
	}
	c, err := t.Clone()
	if err != nil {
		return "", fmt.Errorf("node %q: %s: %w", n.ID, field, err)
	}
	c.Funcs(template.FuncMap{
		"output": func(id string) (string, error) {
			v, ok := data[id]
			if !ok {
				return "", fmt.Errorf("no output %q: it is not one of the node's needs", id)
			}
			return v, nil
		},
		"input": func(name string) (string, error) {
			iv, ok := v.Inputs[name]
			if !ok {
				return "", fmt.Errorf("no input %q was given", name)
			}
			return iv, nil
		},
		"failed": func(id string) (bool, error) {
			if _, ok := data[id]; !ok {
				return false, fmt.Errorf("failed %q: it is not one of the node's needs", id)
			}
			return v.Failed[id], nil
		},
	})
	inputs := v.Inputs
	if inputs == nil {
		inputs = map[string]string{}
	}
	b := &boundedBuilder{max: MaxPromptBytes}
	if err := c.Execute(b, graphTemplateData{Outputs: data, Inputs: inputs}); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return "", fmt.Errorf("node %q: %s: the rendered text is %w: at most %d MiB", n.ID, field, ErrTooLarge, MaxPromptBytes>>20)
		}
		return "", fmt.Errorf("node %q: %s: %w", n.ID, field, err)
	}
	return b.String(), nil
}

// boundedBuilder is a strings.Builder that refuses to grow past max bytes,
// so that rendering stops there rather than after the whole text is built.
type boundedBuilder struct {
	strings.Builder
	max int
}

func (b *boundedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, ErrTooLarge
	}
	return b.Builder.Write(p)
}

// template parses a node's system or prompt and checks that it uses only the
// outputs of the node's needs; nil when it does not parse.
func (p *graphParser) template(s graphScope, n *Node, field string, val *yaml.Node, text string) *template.Template {
	if graphLiteral(text) {
		return nil // nothing to parse or check; render gives it back as it is
	}
	val = graphResolve(val)
	lineOf := func(tl int) int {
		switch {
		case val.Style&yaml.LiteralStyle != 0: // content starts on the line after "|"
			return val.Line + tl
		case val.Style&yaml.FoldedStyle != 0: // lines are folded: the start is the best we know
			return val.Line + 1
		default:
			return val.Line
		}
	}
	t, err := graphNewTemplate(field, text)
	if err != nil {
		line, msg := val.Line, err.Error()
		if m := graphTemplateErrPattern.FindStringSubmatch(msg); m != nil {
			tl, _ := strconv.Atoi(m[1])
			line, msg = lineOf(tl), m[2]
			// "unclosed action started at prompt:2": the start is the place.
			if m := graphTemplateStartedPattern.FindStringSubmatch(msg); m != nil {
				tl, _ := strconv.Atoi(m[1])
				line, msg = lineOf(tl), strings.Replace(msg, m[0], "", 1)
			}
		}
		hint := ""
		if graphHyphenRefPattern.MatchString(text) {
			hint = ` (an id with "-" cannot follow .Outputs.; write {{ output "my-id" }})`
		} else if m := graphUndefinedFunc.FindStringSubmatch(msg); m != nil && graphClosest(m[1], []string{"output"}) != "" {
			hint = ` (did you mean "output"?)`
		}
		p.report(s, line, field, "%s is not a valid template: %s%s", field, msg, hint)
		return nil
	}
	w := &graphTmplWalker{t: t, text: text}
	w.walk()
	reported := map[string]bool{}
	for _, is := range w.issues {
		p.report(s, lineOf(is.line), field, "%s: %s", field, is.msg)
	}
	for _, r := range w.inputs {
		if p.inputs[r.id] == nil && !reported["input:"+r.id] {
			reported["input:"+r.id] = true
			p.report(s, lineOf(r.line), field, "%s reads input %s, which is not declared under inputs:%s", field, graphQuote(r.id), graphSuggest(r.id, graphSortedKeys(p.inputs)))
		}
	}
	for _, r := range w.refs {
		if slices.Contains(n.Needs, r.id) || reported[r.id] {
			continue
		}
		reported[r.id] = true
		p.report(s, lineOf(r.line), field, "%s uses the output of %s, which is not in needs (add it to needs)", field, graphQuote(r.id))
	}
	return t
}

type graphTmplRef struct {
	id   string
	line int // within the template
}

type graphTmplIssue struct {
	line int
	msg  string
}

// graphTmplWalker collects the outputs a template refers to, and the
// references it cannot check.
type graphTmplWalker struct {
	t      *template.Template
	text   string
	refs   []graphTmplRef // outputs of nodes (output, failed, .Outputs)
	inputs []graphTmplRef // inputs (input, .Inputs)
	issues []graphTmplIssue
}

func (w *graphTmplWalker) walk() {
	ts := w.t.Templates()
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name() < ts[j].Name() })
	for _, t := range ts {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		// Dot is the template data in the main template; in a {{define}}d one
		// it is whatever the caller passes.
		w.list(t.Tree.Root, t.Name() == w.t.Name())
	}
}

func (w *graphTmplWalker) line(pos parse.Pos) int {
	i := min(max(int(pos), 0), len(w.text))
	return strings.Count(w.text[:i], "\n") + 1
}

func (w *graphTmplWalker) issue(pos parse.Pos, format string, args ...any) {
	w.issues = append(w.issues, graphTmplIssue{line: w.line(pos), msg: fmt.Sprintf(format, args...)})
}

func (w *graphTmplWalker) ref(id string, pos parse.Pos) {
	w.refs = append(w.refs, graphTmplRef{id: id, line: w.line(pos)})
}

func (w *graphTmplWalker) list(l *parse.ListNode, dotRoot bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		w.node(n, dotRoot)
	}
}

func (w *graphTmplWalker) node(n parse.Node, dotRoot bool) {
	switch n := n.(type) {
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
	case *parse.ActionNode:
		w.pipe(n.Pipe, dotRoot)
	case *parse.IfNode:
		w.pipe(n.Pipe, dotRoot)
		w.list(n.List, dotRoot)
		w.list(n.ElseList, dotRoot)
	case *parse.RangeNode:
		// Ranging over .Outputs visits only the needs' outputs: allowed, and
		// so is .Inputs. Anything else (a number, a computed list) could
		// render without bound, or name outputs that cannot be checked.
		switch {
		case graphIsOutputsPipe(n.Pipe):
		case graphIsInputsPipe(n.Pipe):
			w.pipe(n.Pipe, dotRoot)
		default:
			w.issue(n.Position(), "range works over .Outputs or .Inputs only, like {{ range $id, $out := .Outputs }}")
		}
		w.list(n.List, false)
		w.list(n.ElseList, dotRoot)
	case *parse.WithNode:
		w.pipe(n.Pipe, dotRoot)
		w.list(n.List, false)
		w.list(n.ElseList, dotRoot)
	case *parse.TemplateNode:
		if w.t.Lookup(n.Name) == nil {
			w.issue(n.Pos, "template %q is not defined", n.Name)
		}
		w.pipe(n.Pipe, dotRoot)
	default:
		w.issue(n.Position(), "unsupported template construct %s", n)
	}
}

func (w *graphTmplWalker) pipe(p *parse.PipeNode, dotRoot bool) {
	if p == nil {
		return
	}
	for i, c := range p.Cmds {
		w.command(c, dotRoot, i > 0)
	}
}

// command checks one command of a pipeline; piped says it receives the
// previous command's value as its last argument.
func (w *graphTmplWalker) command(c *parse.CommandNode, dotRoot, piped bool) {
	if len(c.Args) == 0 {
		return
	}
	args := c.Args
	if fn, ok := args[0].(*parse.IdentifierNode); ok {
		args = args[1:]
		switch fn.Ident {
		case "call":
			w.issue(fn.Pos, "call is not available in graph templates: a node's template sees strings, not functions")
			return
		case "input", "failed":
			if piped || len(args) != 1 {
				w.issue(fn.Pos, `%s takes one name in quotes, like {{ %s "x" }}`, fn.Ident, fn.Ident)
				w.args(args, dotRoot)
				return
			}
			if s, ok := args[0].(*parse.StringNode); ok {
				if fn.Ident == "input" {
					w.inputs = append(w.inputs, graphTmplRef{id: s.Text, line: w.line(s.Pos)})
				} else {
					w.ref(s.Text, s.Pos)
				}
				return
			}
			w.issue(args[0].Position(), `%s needs a name in quotes: a computed name cannot be checked`, fn.Ident)
			w.args(args, dotRoot)
			return
		case "output":
			if piped || len(args) != 1 {
				w.issue(fn.Pos, `output takes one node id in quotes, like {{ output "plan" }}`)
				w.args(args, dotRoot)
				return
			}
			if s, ok := args[0].(*parse.StringNode); ok {
				w.ref(s.Text, s.Pos)
				return
			}
			w.issue(args[0].Position(), `output needs a node id in quotes, like {{ output "plan" }}: a computed id cannot be checked against needs`)
			w.args(args, dotRoot)
			return
		case "index":
			if len(args) >= 1 && graphIsOutputs(args[0]) {
				if len(args) < 2 || piped && len(args) == 1 {
					w.issue(fn.Pos, `index .Outputs needs a node id in quotes, like {{ index .Outputs "plan" }}`)
					return
				}
				if s, ok := args[1].(*parse.StringNode); ok {
					w.ref(s.Text, s.Pos)
				} else {
					w.issue(args[1].Position(), `index .Outputs needs a node id in quotes, like {{ index .Outputs "plan" }}: a computed id cannot be checked against needs`)
					w.arg(args[1], dotRoot)
				}
				w.args(args[2:], dotRoot)
				return
			}
		}
	}
	w.args(args, dotRoot)
}

func (w *graphTmplWalker) args(args []parse.Node, dotRoot bool) {
	for _, a := range args {
		w.arg(a, dotRoot)
	}
}

func (w *graphTmplWalker) arg(a parse.Node, dotRoot bool) {
	switch a := a.(type) {
	case *parse.IdentifierNode:
		switch a.Ident {
		case "output":
			w.issue(a.Pos, `output must be called with a node id in quotes, like {{ output "plan" }}`)
		case "input", "failed":
			w.issue(a.Pos, `%s must be called with a name in quotes, like {{ %s "x" }}`, a.Ident, a.Ident)
		}
	case *parse.FieldNode, *parse.VariableNode, *parse.ChainNode, *parse.DotNode, *parse.PipeNode:
		if path, fromRoot, ok := graphTmplPath(a); ok {
			w.path(path, fromRoot || dotRoot, a.Position())
			return
		}
		switch a := a.(type) {
		case *parse.ChainNode:
			w.arg(a.Node, dotRoot)
		case *parse.PipeNode:
			w.pipe(a, dotRoot)
		}
	}
}

// path checks a field path read from the template data (atRoot) or from a
// dot of unknown type.
func (w *graphTmplWalker) path(path []string, atRoot bool, pos parse.Pos) {
	if len(path) == 0 {
		return
	}
	if path[0] == "Inputs" && atRoot {
		if len(path) >= 2 {
			w.inputs = append(w.inputs, graphTmplRef{id: path[1], line: w.line(pos)})
			return
		}
		return // the inputs are all known: ranging over them is fine
	}
	if path[0] == "Outputs" {
		if len(path) >= 2 {
			w.ref(path[1], pos)
			return
		}
		w.issue(pos, `.Outputs used as a whole cannot be checked against needs; use one output at a time, like {{ .Outputs.plan }} or {{ output "plan" }}`)
		return
	}
	if atRoot {
		w.issue(pos, `unknown field .%s (a template can use .Outputs.<id>, output "id", .Inputs.<name>, input "name" and failed "id")`, path[0])
	}
}

// graphTmplPath returns the field path an expression reads: .A.B is [A B]
// from dot, $.A is [A] from the root, (.A).B is [A B]; ok is false for
// anything else.
func graphTmplPath(n parse.Node) (path []string, fromRoot, ok bool) {
	switch n := n.(type) {
	case *parse.DotNode:
		return nil, false, true
	case *parse.FieldNode:
		return n.Ident, false, true
	case *parse.VariableNode:
		if len(n.Ident) > 0 && n.Ident[0] == "$" {
			return n.Ident[1:], true, true
		}
	case *parse.ChainNode:
		if base, root, ok := graphTmplPath(n.Node); ok {
			return append(slices.Clone(base), n.Field...), root, true
		}
	case *parse.PipeNode:
		if len(n.Decl) == 0 && len(n.Cmds) == 1 && len(n.Cmds[0].Args) == 1 {
			return graphTmplPath(n.Cmds[0].Args[0])
		}
	}
	return nil, false, false
}

// graphIsOutputs: the expression is .Outputs (or $.Outputs) itself.
func graphIsOutputs(n parse.Node) bool {
	path, _, ok := graphTmplPath(n)
	return ok && len(path) == 1 && path[0] == "Outputs"
}

// graphIsInputsPipe: the pipeline is just .Inputs.
func graphIsInputsPipe(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	path, _, ok := graphTmplPath(p.Cmds[0].Args[0])
	return ok && len(path) == 1 && path[0] == "Inputs"
}

// graphIsOutputsPipe: the pipeline is just .Outputs, as in {{ range .Outputs }}.
func graphIsOutputsPipe(p *parse.PipeNode) bool {
	return p != nil && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 && graphIsOutputs(p.Cmds[0].Args[0])
}
