package main

import (
	"io"
	"time"

	"github.com/noderun/noderun/internal/jsonindent"
	"github.com/noderun/noderun/runner/view"
)

// The --json output of every read command (docs/json.md is the schema, and
// tests check every command against it) is built by package runner/view,
// which the HTTP server (noderun serve) serves too.

// writeJSON writes v as json.Encoder with SetIndent("", "  ") does, at
// about half its cost (package jsonindent's BenchmarkMarshal): the result
// of a wide run holds every node's output.
func writeJSON(w io.Writer, v any) error {
	b, err := jsonindent.Marshal(v, "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// jsonTime is an RFC 3339 UTC time; nil (omitted) when zero.
func jsonTime(t time.Time) *string { return view.Time(t) }
