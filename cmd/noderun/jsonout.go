package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/noderun/noderun/runner/view"
)

// The --json output of every read command (docs/json.md is the schema, and
// tests check every command against it) is built by package runner/view,
// which the HTTP server (noderun serve) serves too.

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonTime is an RFC 3339 UTC time; nil (omitted) when zero.
func jsonTime(t time.Time) *string { return view.Time(t) }
