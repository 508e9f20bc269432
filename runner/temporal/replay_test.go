package temporal_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// The workflow stays replay-safe: a history recorded from the kill -9 test
// (`go test ./runner/temporal -run Kill9 -update-history`: a worker lost
// mid-stream, the activity retried on the other) replays without
// nondeterminism against the current workflow code.
func TestReplayRecordedHistory(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	ntemporal.RegisterWorkflow(replayer)
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", "kill9-history.json")); err != nil {
		t.Fatal(err)
	}
}
