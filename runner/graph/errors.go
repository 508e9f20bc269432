package graph

import (
	"errors"
	"fmt"
)

// Sentinels of the problems a program may want to tell apart: errors.Is
// finds each through the *Error that lists it (Problem.Err), wherever the
// graph came from (a file, Build, a journal).
var (
	// ErrUnknownKind: a provider's kind is neither built in nor registered
	// (Options.Kinds; the runner's Options.Kinds).
	ErrUnknownKind = errors.New("unknown provider kind")
	// ErrUnknownField: a field the graph language does not have where it
	// stands (a typo, or a field of another kind).
	ErrUnknownField = errors.New("unknown field")
	// ErrUnknownProvider: a node or a fallback names a provider the graph
	// does not define.
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrUnknownNode: a node's needs (or a caller) names a node the graph
	// does not have.
	ErrUnknownNode = errors.New("unknown node")
	// ErrDuplicateNode: two nodes share an id.
	ErrDuplicateNode = errors.New("duplicate node id")
	// ErrCycle: nodes need each other in a cycle.
	ErrCycle = errors.New("dependency cycle")
	// ErrMissingField: a required field (name, nodes, a provider's kind, a
	// node's id or prompt) is absent.
	ErrMissingField = errors.New("missing field")
)

// MissingInputError is a required input a run was not given. Its message
// names the input, not how to pass one: the caller (a CLI flag, an API
// field) says that.
type MissingInputError struct {
	Name, Description string
}

func (e *MissingInputError) Error() string {
	msg := fmt.Sprintf("missing input %s", graphQuote(e.Name))
	if e.Description != "" {
		msg += " (" + e.Description + ")"
	}
	return msg
}

// reportAs is report with the problem's typed cause, for errors.Is.
func (p *graphParser) reportAs(s graphScope, line int, field string, cause error, format string, args ...any) {
	p.report(s, line, field, format, args...)
	p.problems[len(p.problems)-1].Err = cause
}
