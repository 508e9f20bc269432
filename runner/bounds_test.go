package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// A node's answer and its attempt's events are bounded (issue 42): by the
// node's max_output_bytes, else its provider's, else the profile's; and
// by the profile's max_events. Past a bound the node fails with NR501,
// once (not retried), and keeps what it streamed before, up to the bound.
func TestAnswerBounds(t *testing.T) {
	cases := []struct {
		name     string
		profiles string // the graph's profiles file ("": none)
		provider string // extra provider fields
		node     string // extra node fields
		says     string // "" = completes
		max      int    // bytes the journaled partial answer may have
	}{
		{"the node's bound", "", "", ", max_output_bytes: 4KiB", "its answer passed 4.0KiB (max_output_bytes)", 4 << 10},
		{"the provider's bound", "", ", max_output_bytes: 4096", "", "its answer passed 4.0KiB (max_output_bytes)", 4 << 10},
		{"the node's beats its provider's", "", ", max_output_bytes: 4096", ", max_output_bytes: 1MiB", "", 0},
		{"the profile's bound", "ci: {max_output_bytes: 2KiB}\n", "", "", "its answer passed 2.0KiB (max_output_bytes)", 2 << 10},
		{"the profile's events", "ci: {max_events: 50}\n", "", "", "its stream passed 50 events in one attempt (the profile's max_events)", 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			profiles := ""
			if c.profiles != "" {
				p := filepath.Join(dir, "profiles.yaml")
				if err := os.WriteFile(p, []byte(c.profiles), 0o600); err != nil {
					t.Fatal(err)
				}
				profiles = fmt.Sprintf("profiles: %q\n", p)
			}
			g := parseTestGraph(t, fmt.Sprintf("name: b\nprofile: ci\n%sproviders:\n  p: {kind: sim, sim: {tokens: 3000}%s}\nnodes:\n  - {id: a, prompt: write a lot%s}\n",
				profiles, c.provider, c.node))
			j := testkit.TempJournal(t, "j.db")
			res, err := Run(context.Background(), g, Options{Journal: j})
			if err != nil {
				t.Fatal(err)
			}
			n := res.Nodes[0]
			if c.says == "" {
				if n.State != journal.NodeCompleted {
					t.Fatalf("node %s: %s", n.State, n.Reason)
				}
				return
			}
			if n.State != journal.NodeFailed || diagnostics.Classify(n.Err).Class != diagnostics.ClassLimit || !strings.Contains(n.Reason, c.says) {
				t.Fatalf("node %s (%v): %s; want it failed saying %q", n.State, n.Err, n.Reason, c.says)
			}
			ds := diagRecs(t, j, res.RunID, "a")
			if count(ds, diagnostics.LimitExceeded) != 1 || count(ds, diagnostics.RetryStarted) != 0 {
				t.Errorf("want one NR501 and no retry:\n%s", dumpDiags(ds))
			}
			kept, err := j.RebuildOutput(context.Background(), res.RunID, "a", 1)
			if err != nil || len(kept) == 0 || len(kept) > c.max {
				t.Errorf("the partial answer journaled is %d bytes (%v), want some, at most %d", len(kept), err, c.max)
			}
		})
	}
}
