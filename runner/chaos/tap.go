package chaos

import (
	"context"
	"log/slog"

	"github.com/noderun/noderun/diagnostics"
)

// tap is a slog.Handler that passes records on and tells watch about every
// diagnostic (a record with code and node attributes): how chaos learns,
// without hooks in the runner, that a node has run into an outage, whether
// noderun saw the refused connection (connect_failed) or the harness did
// (harness_retrying).
type tap struct {
	next  slog.Handler
	watch func(node string, c diagnostics.Code)
	node  string // from WithAttrs
}

func (t *tap) Enabled(ctx context.Context, l slog.Level) bool {
	return true // the watch sees diagnostics below the user's log level too
}

func (t *tap) Handle(ctx context.Context, r slog.Record) error {
	node, code := t.node, ""
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			node = a.Value.String()
		case "code":
			code = a.Value.String()
		}
		return true
	})
	if c, ok := diagnostics.Lookup(code); ok && node != "" {
		t.watch(node, c)
	}
	if t.next.Enabled(ctx, r.Level) {
		return t.next.Handle(ctx, r)
	}
	return nil
}

func (t *tap) WithAttrs(as []slog.Attr) slog.Handler {
	c := *t
	c.next = t.next.WithAttrs(as)
	for _, a := range as {
		if a.Key == "node" {
			c.node = a.Value.String()
		}
	}
	return &c
}

func (t *tap) WithGroup(name string) slog.Handler {
	c := *t
	c.next = t.next.WithGroup(name)
	return &c
}
