package ledger

import (
	"context"

	"github.com/noderun/noderun/journal"
)

// LoadEverything is Load reading every data event, whatever the run.
func LoadEverything(ctx context.Context, j *journal.Journal, runID string) (*Run, error) {
	return Load(ctx, j, runID, LoadOptions{everything: true})
}

// LoadOrdered is Load reading a finished run's nodes before its attempts and
// records, as it reads a running run's.
func LoadOrdered(ctx context.Context, j *journal.Journal, runID string, opts LoadOptions) (*Run, error) {
	opts.ordered = true
	return Load(ctx, j, runID, opts)
}
