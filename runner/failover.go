package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/resume"
)

// failover moves the node to the next provider of its fallback list (the
// decision d found its provider unavailable): the attempt on the old one
// ends, work left running there is cancelled, and a new attempt starts on
// the fallback with the node's budgets and deadline afresh. It returns the
// first step there: a continue of the partial answer when the node allows
// it (fallback_continue) and the fallback has a continuation form, else a
// request from scratch.
func (x *nodeExec) failover(ctx context.Context, d resume.Decision, ce *diagnostics.Error) (resume.Action, error) {
	from, to := x.provNm, x.fallbacks[0]
	x.fallbacks = x.fallbacks[1:]
	x.release(ctx) // leave nothing running where the node no longer looks
	// The longest answer an attempt delivered, this one's or an earlier
	// one's (the last attempt may be a retry that never connected).
	x.keepBest()
	partial, chunks, from0 := x.best.out, x.best.chunks, x.best.attempt
	x.endAttempt(ctx, ce)
	x.releaseTicket(0)
	x.use(to, x.node.Model)
	x.retries, x.resumes, x.backoffN, x.recovering = x.total, 0, 0, time.Time{}
	x.checked, x.dispatched, x.wasSent, x.parked, x.ended = false, false, false, false, false
	cont := x.node.FallbackContinue && partial != "" && x.prov.Capabilities().Continue && provider.CanContinue(x.prov, x.req)
	how := "from scratch"
	attrs := []slog.Attr{diagnostics.KeyClass.Attr(ce.Class), diagnostics.KeyFrom.Attr(from), diagnostics.KeyTo.Attr(to),
		diagnostics.KeyReason.Attr(d.Reason)}
	if cont {
		how = fmt.Sprintf("continuing its answer from byte %d (attempt %d's)", len(partial), from0)
		attrs = append(attrs, diagnostics.KeyContinuedFrom.Attr(len(partial)), diagnostics.KeyContinuedAttempt.Attr(from0))
	} else if partial != "" {
		attrs = append(attrs, diagnostics.KeyRegeneratedBytes.Attr(len(partial)))
	}
	// The answer will be the fallback's (or, continued, the two's): it is
	// found by the fallback's key, never by the primary's, and a continued
	// one by none.
	key := ""
	if !cont {
		key = x.run.cacheKeyOn(x.node, to, x.req.Model, x.req.System, x.req.Prompt)
	}
	if err := x.run.j.SetCacheKey(bg(ctx), x.run.id, x.node.ID, key); err != nil {
		return "", x.journalErr(err)
	}
	line := fmt.Sprintf("provider %s unavailable (%s): moving to fallback %s, %s", from, d.Reason, to, how)
	x.diag(ctx, diagnostics.New(diagnostics.FailedOver, line, attrs...))
	x.report(Progress{State: ProgressRecovering, Text: line, Step: RecoveryStep{Code: diagnostics.FailedOver, Class: ce.Class}})
	if err := x.beginAttempt(ctx, journal.ModeRetry); err != nil {
		return "", err
	}
	if !cont {
		return resume.ActRetry, nil
	}
	// The new attempt's output goes on from the partial answer.
	if err := x.run.journalPrefix(x.node.ID, x.attempt, partial, chunks); err != nil {
		return "", x.journalErr(err)
	}
	x.out.WriteString(partial)
	// The prefix was generated, and is counted, by the attempt it comes
	// from: here it is preserved, not generated again.
	x.usage = attemptUsage{preserved: chunks, chain: true}
	return resume.ActContinue, nil
}

// keepBest remembers the current attempt's output if it is the longest
// answer an attempt of the node has delivered: what a failover continues.
func (x *nodeExec) keepBest() {
	if x.out.Len() > len(x.best.out) {
		x.best.out, x.best.chunks, x.best.attempt = x.out.String(), x.usage.streamed, x.attempt
	}
}

// journalPrefix journals text as the first output of a node's attempt that
// goes on from an answer another attempt delivered (a failover that
// continues it, a node taken over from a lost worker): the journal then
// rebuilds the whole answer from this attempt alone, and a resume
// continues it from there.
// chunks is how many chunks text came in (0: not known, counted from its
// bytes).
func (r *runState) journalPrefix(node string, attempt int, text string, chunks int) error {
	if chunks == 0 {
		chunks = provider.EstimateTokens(text)
	}
	return r.j.Append(journal.Event{RunID: r.id, NodeID: node, Attempt: attempt, Kind: journal.KindDelta,
		ProviderSeq: journal.NoProviderSeq, Payload: []byte(text), Chunks: chunks})
}
