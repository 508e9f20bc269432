package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/providertest"
)

// The program does what the README's Embedding section promises; its
// output is checked line by line (byte counts aside, which follow the
// simulator's text).
func TestEmbed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil {
		t.Fatalf("%v\noutput so far:\n%s", err, out.String())
	}
	want := []string{
		"sim research: completed, 1 attempt(s), faults [], steps [], ",
		"sim outline: completed, 2 attempt(s), faults [disconnect_detected], steps [retry_started], ",
		"sim summary: completed, 1 attempt(s), faults [], steps [], ",
		"custom essay: completed, 1 attempt(s) on resp_1, recovered by [reconnect], 104 bytes identical",
		"cancel: run interrupted, node canceled, errors.Is(err, cause) true",
		"resume: run completed, node completed, identical to an undisturbed run true",
		"misuse: nil graph true, unbuilt graph true, unknown kind true",
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || (strings.HasPrefix(w, "sim ") && !strings.HasSuffix(got[i], " bytes identical")) {
			t.Errorf("line %d: %q\nwant %q...", i+1, got[i], w)
		}
	}
}

// The custom kind keeps the adapter contract: the conformance suite every
// built-in adapter passes (package providertest), against its own server,
// cut for real.
func TestCustomKindConforms(t *testing.T) {
	var cut atomic.Int32
	srv := lineServer(&cut)
	defer srv.Close()
	providertest.Test(t, providertest.Config{
		New:      func() provider.Provider { return &lineProvider{url: srv.URL, client: srv.Client()} },
		Request:  provider.Request{Node: "essay", Prompt: "Why do streams drop?"},
		Want:     strings.Join(lines, "\n") + "\n",
		CutNext:  func(after int) { cut.Store(int32(after)) },
		CutAfter: 2,
	})
}
