package runner

import (
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
)

// attemptUsage counts what the current attempt has cost, so that failed and
// abandoned attempts are journaled with their usage too, not only the one
// that succeeded (the provider reports usage only with terminal evidence).
type attemptUsage struct {
	streamed  int             // output chunks received (≈ tokens)
	reasoning int             // reasoning chunks received
	preserved int             // output tokens kept by re-attaches and continues
	reported  *provider.Usage // the provider's figure, with terminal evidence
	chain     bool            // the attempt continues work from before it (crash resume)
	// before are output tokens that earlier requests of the attempt
	// delivered and the reported figure does not cover: a continue's
	// server generates only the rest, and reports only that.
	before int
}

// reattach records that the work is picked up again where it stands (a
// re-attach, or a continue from the journaled prefix): every token streamed
// so far would have been generated again by a re-send.
func (u *attemptUsage) reattach() { u.preserved += u.streamed }

// continued records a continue: like a re-attach it keeps what was
// streamed, but it is a new request, whose usage will not count it.
func (u *attemptUsage) continued() {
	u.reattach()
	u.before = u.streamed
}

// record is the journal's account of the attempt.
func (u *attemptUsage) record() journal.Usage {
	if r := u.reported; r != nil {
		// Tokens delivered before the last continue are counted from the
		// stream (a chunk a token): estimated. The input of the requests
		// a continue replaced is not known (they never completed).
		return journal.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens + u.before, ReasoningTokens: r.ReasoningTokens,
			CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens,
			StreamedTokens: u.streamed, PreservedTokens: u.preserved, Chain: u.chain, Estimated: u.before > 0}
	}
	// Output tokens include reasoning tokens, as providers report them.
	return journal.Usage{OutputTokens: u.streamed + u.reasoning, ReasoningTokens: u.reasoning, Estimated: true,
		StreamedTokens: u.streamed, PreservedTokens: u.preserved, Chain: u.chain}
}
