package temporal

import (
	"fmt"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TracingInterceptor is the Temporal SDK's OpenTelemetry interceptor on
// tp, for Dial: it carries the trace context (W3C traceparent, and
// baggage) from a client's span into the workflow, and from the workflow
// to each node's activity, whose context a worker's runner.Observer then
// hangs the node's spans under. tp is the caller's: no global provider or
// propagator is read or set. Queries are not traced: a follower polls the
// workflow's state every 250 ms, and each poll would be a trace of its own.
func TracingInterceptor(tp trace.TracerProvider) (interceptor.ClientInterceptor, error) {
	ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("github.com/noderun/noderun/runner/temporal"), DisableQueryTracing: true,
		TextMapPropagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing: %w", err)
	}
	return ti, nil
}
