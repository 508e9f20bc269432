package ledger

import (
	"context"

	"github.com/noderun/noderun/journal"
)

// LoadEverything is Load reading every data event, whatever the run.
func LoadEverything(ctx context.Context, j *journal.Journal, runID string) (*Run, error) {
	return Load(ctx, j, runID, LoadOptions{everything: true})
}
