package runner

import (
	"log/slog"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/resume"
)

// recoveryCost is what recovery made the provider do again, journaled on
// the diagnostics that announce each step (NR110 continue, NR103/NR205/NR112
// retry) and summed on NR108, so that `noderun diagnose` can show what
// continuation saved:
//
//   - a continue re-sends the output delivered so far as input (prompt
//     tokens, billed at the input price) and regenerates nothing;
//   - a retry throws the attempt's output away and has it generated again
//     (output tokens).
//
// Output is measured in bytes and in delta events (about one token each:
// servers stream a token per chunk); the provider's usage, journaled on the
// attempt's done event, has the exact token counts of the final request.
type recoveryCost struct {
	continues, retries     int
	resentBytes, resentN   int // partial output re-sent as the final assistant message
	regenBytes, regenDelta int // output discarded by retries, to be generated again
}

// step records the step about to be taken from an attempt that has
// delivered out bytes in deltas events, and returns its attributes.
func (c *recoveryCost) step(a resume.Action, out, deltas int) []slog.Attr {
	switch a {
	case resume.ActContinue:
		c.continues++
		c.resentBytes += out
		c.resentN += deltas
		return []slog.Attr{diagnostics.KeyContinuedFrom.Attr(out), diagnostics.KeyContinuedFromDeltas.Attr(deltas),
			diagnostics.KeyResentPrefixBytes.Attr(out), diagnostics.KeyRegeneratedBytes.Attr(0)}
	case resume.ActRetry:
		c.retries++
		c.regenBytes += out
		c.regenDelta += deltas
		return []slog.Attr{diagnostics.KeyRegeneratedBytes.Attr(out), diagnostics.KeyRegeneratedDeltas.Attr(deltas)}
	}
	return nil
}

// total is the node's recovery cost, for the report of a recovered node.
func (c *recoveryCost) total() []slog.Attr {
	if c.continues == 0 && c.retries == 0 {
		return nil
	}
	return []slog.Attr{diagnostics.KeyContinues.Attr(c.continues), diagnostics.KeyRetries.Attr(c.retries),
		diagnostics.KeyResentPrefixBytes.Attr(c.resentBytes), diagnostics.KeyResentPrefixDeltas.Attr(c.resentN),
		diagnostics.KeyRegeneratedBytes.Attr(c.regenBytes), diagnostics.KeyRegeneratedDeltas.Attr(c.regenDelta)}
}
