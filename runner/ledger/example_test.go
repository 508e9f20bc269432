package ledger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// A program runs a graph on the embedded simulator, whose chat stream drops
// once, and prints what `noderun run` prints at the end: a verdict for each
// node and the run's summary. (The summary's first line also gives the
// time lost, which differs from run to run; this example leaves it out.)
func ExampleAccountOf() {
	dir, err := os.MkdirTemp("", "ledger-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	g, err := runner.ParseGraph("example.yaml", []byte(`name: example
profile: ci
providers:
  chat:
    kind: sim
    continuation: prefix
    sim:
      seed: 7
      tokens: 120
      faults: [{endpoint: chat, requests: [1], kind: close, after_events: 40}]
nodes:
  - {id: plan, provider: chat, prompt: Plan a short study of dropped streams.}
`))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	j, err := journal.Open(ctx, filepath.Join(dir, "run.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	res, err := runner.Run(ctx, g, runner.Options{Journal: j})
	if err != nil {
		log.Fatal(err)
	}

	run, err := ledger.Load(ctx, j, res.RunID, ledger.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	a := ledger.AccountOf(run, ledger.Prices{"sim": {Input: 1.25, Output: 10}})
	for _, n := range a.Nodes {
		fmt.Printf("%s: %s, faults %v; %d tokens preserved\n", n.ID, n.Verdict.Kind, n.Faults, n.Tokens.Preserved)
	}
	for _, line := range a.Summary[1:] {
		fmt.Println(line)
	}
	// Output:
	// plan: recovered, faults map[disconnect_detected:1]; 39 tokens preserved
	// tokens: 120 generated = 120 needed + 0 regenerated + 0 unfinished; 39 preserved by re-attach or continue (some counted from the stream: estimated)
	// cost: $0.0013, of which $0.0000 on work thrown away
}
