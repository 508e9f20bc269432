package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// The attributes of noderun's own (docs/observability.md); the GenAI ones
// are the semantic conventions'.
const (
	AttrRunID      = attribute.Key("noderun.run.id")
	AttrGraph      = attribute.Key("noderun.graph")
	AttrRunStatus  = attribute.Key("noderun.run.status")
	AttrNode       = attribute.Key("noderun.node.id")
	AttrNodeState  = attribute.Key("noderun.node.state")
	AttrAttempt    = attribute.Key("noderun.attempt")
	AttrMode       = attribute.Key("noderun.attempt.mode")
	AttrOutcome    = attribute.Key("noderun.attempt.outcome")
	AttrProvider   = attribute.Key("noderun.provider")
	AttrCode       = attribute.Key("noderun.code")
	AttrDiagnostic = attribute.Key("noderun.diagnostic")
	AttrMessage    = attribute.Key("noderun.message")
	AttrAttempts   = attribute.Key("noderun.attempts")
	AttrRegen      = attribute.Key("noderun.tokens.regenerated")
	AttrPreserved  = attribute.Key("noderun.tokens.preserved")
	AttrLostMS     = attribute.Key("noderun.time_lost_ms")
	AttrCachedFrom = attribute.Key("noderun.cached_from")
	// AttrSystem is gen_ai.system, the older name of gen_ai.provider.name,
	// set too for backends that read only it.
	AttrSystem = attribute.Key("gen_ai.system")
)

// StartRun starts the span of a run (a local run, or `run --temporal`'s
// client side, whose context the Temporal interceptor carries to the
// workers' nodes). end ends it with the run's status. Without traces it
// returns ctx and a no-op.
func (t *Telemetry) StartRun(ctx context.Context, runID, graph string) (_ context.Context, end func(journal.RunStatus)) {
	if t == nil || t.tracer == nil {
		return ctx, func(journal.RunStatus) {}
	}
	ctx, span := t.tracer.Start(ctx, "run "+graph, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrRunID.String(runID), AttrGraph.String(graph)))
	return ctx, func(st journal.RunStatus) {
		span.SetAttributes(AttrRunStatus.String(string(st)))
		if st == journal.RunFailed {
			span.SetStatus(codes.Error, "run failed")
		}
		span.End()
	}
}

// spans exports the node's span, a child span per attempt not exported yet
// and each diagnostic not exported yet as an event (on its attempt's span
// when that one is exported now, else on the node's). They are made when
// the node settles, from the journal, with the journaled times: a span is
// exported only when it ends anyway, and the stream pays nothing.
func (t *Telemetry) spans(ctx context.Context, g *runner.Graph, nd *ledger.Node, seen *nodeSeen) {
	na := ledger.AccountNode(nd, nil)
	kind := providerKind(g, nd)
	from, to := nodeTimes(nd)
	attrs := []attribute.KeyValue{AttrNode.String(nd.ID), AttrNodeState.String(string(nd.State)),
		AttrAttempts.Int(na.Attempts), AttrRegen.Int(na.Tokens.Regenerated), AttrPreserved.Int(na.Tokens.Preserved),
		AttrLostMS.Int64(na.TimeLostMS)}
	if len(nd.Attempts) > 0 || na.Cached > 0 {
		attrs = append(attrs, semconv.GenAIRequestModel(nd.Model), semconv.GenAIProviderNameKey.String(kind), AttrSystem.String(kind),
			semconv.GenAIUsageInputTokens(na.Tokens.Input), semconv.GenAIUsageOutputTokens(na.Tokens.Generated+na.Tokens.Reasoning))
	}
	if !na.CachedFrom.IsZero() {
		attrs = append(attrs, AttrCachedFrom.String(na.CachedFrom.String()))
	}
	ctx, node := t.tracer.Start(ctx, "node "+nd.ID, trace.WithTimestamp(from), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if nd.State == journal.NodeFailed {
		node.SetStatus(codes.Error, nd.Reason)
	}
	open := map[int]trace.Span{}
	var ends []func()
	for _, a := range nd.Attempts[min(seen.attempts, len(nd.Attempts)):] {
		op := "chat"
		if g != nil {
			if p := g.Providers[a.Provider]; p != nil && p.Kind == "harness" {
				op = "invoke_agent"
			}
		}
		aattrs := []attribute.KeyValue{semconv.GenAIOperationNameKey.String(op),
			semconv.GenAIProviderNameKey.String(kindOf(g, a.Provider)), AttrSystem.String(kindOf(g, a.Provider)),
			semconv.GenAIRequestModel(nd.Model), AttrNode.String(nd.ID), AttrAttempt.Int(a.N), AttrMode.String(string(a.Mode)),
			AttrOutcome.String(string(a.Outcome)), AttrProvider.String(a.Provider),
			semconv.GenAIUsageInputTokens(a.Usage.InputTokens), semconv.GenAIUsageOutputTokens(a.Usage.OutputTokens)}
		if a.Usage.Model != "" {
			aattrs = append(aattrs, semconv.GenAIResponseModel(a.Usage.Model))
		}
		if a.Ref != "" {
			aattrs = append(aattrs, semconv.GenAIResponseID(a.Ref))
		}
		// The journal keeps terminal evidence as the outcome: an attempt
		// that completed stopped as the model chose ("stop"); any other
		// ended by its error class (the GenAI conventions' error.type).
		switch a.Outcome {
		case journal.OutcomeOK:
			aattrs = append(aattrs, semconv.GenAIResponseFinishReasons("stop"))
		case journal.OutcomeError:
			aattrs = append(aattrs, semconv.GenAIResponseFinishReasons("error"), semconv.ErrorTypeKey.String(string(a.ErrClass)))
		}
		end := a.Ended
		if end.IsZero() {
			end = to
		}
		_, span := t.tracer.Start(ctx, op+" "+nd.Model, trace.WithTimestamp(a.Started), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(aattrs...))
		if a.Outcome == journal.OutcomeError {
			span.SetStatus(codes.Error, a.Error)
		}
		open[a.N] = span
		ends = append(ends, func() { span.End(trace.WithTimestamp(end)) })
	}
	seen.attempts = len(nd.Attempts)
	for _, r := range nd.Records[min(seen.records, len(nd.Records)):] {
		span := node
		if s, ok := open[r.Attempt]; ok {
			span = s
		}
		span.AddEvent(r.Code.Name, trace.WithTimestamp(r.Time), trace.WithAttributes(AttrCode.String(r.Code.ID),
			AttrDiagnostic.String(r.Code.Name), AttrMessage.String(r.Message)))
	}
	seen.records = len(nd.Records)
	for _, end := range ends {
		end()
	}
	node.End(trace.WithTimestamp(to))
}

// nodeTimes is when the node's work in the journal began and ended.
func nodeTimes(nd *ledger.Node) (from, to time.Time) {
	from, to = nd.Started, nd.Finished
	for _, s := range nd.Active {
		if from.IsZero() || s.From.Before(from) {
			from = s.From
		}
		if s.To.After(to) {
			to = s.To
		}
	}
	for _, a := range nd.Attempts {
		if from.IsZero() || a.Started.Before(from) {
			from = a.Started
		}
		if a.Ended.After(to) {
			to = a.Ended
		}
	}
	for _, r := range nd.Records {
		if from.IsZero() || r.Time.Before(from) {
			from = r.Time
		}
		if r.Time.After(to) {
			to = r.Time
		}
	}
	if from.IsZero() {
		from = time.Now()
	}
	if to.Before(from) {
		to = from
	}
	return from, to
}

// providerKind is the GenAI provider name of the node's first attempt.
func providerKind(g *runner.Graph, nd *ledger.Node) string {
	if len(nd.Attempts) > 0 {
		return kindOf(g, nd.Attempts[0].Provider)
	}
	if g != nil {
		if n := g.Node(nd.ID); n != nil {
			return kindOf(g, n.Provider)
		}
	}
	return ""
}

// kindOf is the GenAI conventions' gen_ai.provider.name of a graph's
// provider: its well-known value where the conventions have one, else
// the provider's kind ("sim", "harness").
func kindOf(g *runner.Graph, provider string) string {
	if g == nil {
		return ""
	}
	p := g.Providers[provider]
	if p == nil {
		return ""
	}
	switch p.Kind {
	case "openai", "responses":
		return "openai"
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	}
	return p.Kind
}
