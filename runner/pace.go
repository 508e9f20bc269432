package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/runner/quota"
)

// use points the node at provider name (its own, or a fallback): the
// adapter, its defaults, and the pacer of its account and model. model is
// the node's own model, which only its own provider takes.
func (x *nodeExec) use(name, model string) {
	bp := x.run.provs[name]
	x.prov, x.provNm, x.inProcess = bp.p, name, bp.inProcess
	if model == "" || name != x.node.Provider {
		model = bp.model
	}
	x.req.Model, x.req.WorkDir = model, bp.workDir
	x.pacer = nil
	if x.run.pacers != nil && bp.account != "" {
		x.pacer = x.run.pacers.Pacer(bp.account+" "+model, bp.limits)
	}
}

// admit waits until the node's provider's quota allows a request that
// generates (a fresh stream or a continue), unless one is admitted already.
// A wait is journaled (NR601) and shown as ProgressWaiting.
func (x *nodeExec) admit(ctx context.Context) error {
	if x.pacer == nil || x.ticket != nil {
		return nil
	}
	input := provider.EstimateTokens(x.req.System) + provider.EstimateTokens(x.req.Prompt)
	if x.out.Len() > 0 { // a continue sends the partial answer too
		input += provider.EstimateTokens(x.out.String())
	}
	t, waited, err := x.pacer.Wait(ctx, quota.Request{Order: x.order, Input: input, MaxOutput: x.req.MaxOutputTokens, Front: x.parked,
		OnWait: func(resets time.Duration) {
			x.report(Progress{State: ProgressWaiting, Text: waitingText(resets), Step: RecoveryStep{Delay: resets}})
		}})
	x.parked = false
	if errors.Is(err, quota.ErrOverLimit) {
		return &diagnostics.Error{Class: diagnostics.ClassDeterministic,
			Err: fmt.Errorf("provider %s: %w; lower max_output_tokens or the prompt, or raise limits.tokens_per_minute", x.provNm, err)}
	}
	if err != nil {
		return err
	}
	x.ticket = t
	if waited >= time.Millisecond {
		x.diag(ctx, diagnostics.New(diagnostics.QuotaWait,
			fmt.Sprintf("waited %s for provider %s's quota", profile.FormatDuration(waited.Round(time.Millisecond)), x.provNm),
			diagnostics.KeyWaited.Attr(waited), diagnostics.KeyProvider.Attr(x.provNm)))
	}
	return nil
}

// waitingText says a wait for quota for people.
func waitingText(resets time.Duration) string {
	if resets <= 0 {
		return "waiting for quota"
	}
	return fmt.Sprintf("waiting for quota (resets in %s)", profile.FormatDuration(resets.Round(100*time.Millisecond)))
}

// observed returns ctx carrying the observer that shows the pacer every
// response the adapter gets: the admitted request's answer counts against
// its ticket, any other (a status check) only says what is left.
func (x *nodeExec) observed(ctx context.Context) context.Context {
	if x.pacer == nil {
		return ctx
	}
	t, p := x.ticket, x.pacer
	return provider.WithResponseObserver(ctx, func(status int, h http.Header) {
		if t != nil {
			t.Observe(status, h)
		} else {
			p.Observe(status, h)
		}
	})
}

// releaseTicket ends the admitted request: output is what it generated, which
// teaches the pacer what a request costs.
func (x *nodeExec) releaseTicket(output int) {
	if x.ticket != nil {
		x.ticket.Done(output)
		x.ticket = nil
	}
}

// park announces a 429 that parks the node: it waits, first in line, for
// its provider's quota (the pacer holds every request of the account until
// the Retry-After), then takes the same step again. No budget is spent.
func (x *nodeExec) park(ctx context.Context, ce *diagnostics.Error, delay time.Duration) {
	x.parked = true
	if x.pacer != nil && ce.RetryAfter > 0 {
		// The adapter's word (a header, or a body the pacer never sees):
		// no request of the account goes before it.
		x.pacer.Hold(time.Now().Add(ce.RetryAfter))
	}
	line := "parked: " + waitingText(delay) + ", no retry spent"
	x.diag(ctx, diagnostics.New(diagnostics.QuotaParked, line, diagnostics.KeyClass.Attr(ce.Class), diagnostics.KeyDelay.Attr(delay),
		diagnostics.KeyRetryAfter.Attr(ce.RetryAfter), diagnostics.KeyProvider.Attr(x.provNm)))
	x.report(Progress{State: ProgressWaiting, Text: waitingText(delay), Step: RecoveryStep{Code: diagnostics.QuotaParked, Class: ce.Class, Delay: delay}})
}
