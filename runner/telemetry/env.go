package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/noderun/noderun/internal/redact"
)

// TracesFromEnv builds a tracer provider as the standard OpenTelemetry
// environment variables say, or returns nil when they ask for no traces:
// nothing is built then, so a run that sets none pays nothing.
//
// Traces are on when OTEL_TRACES_EXPORTER names an exporter (otlp, console)
// or, with it unset, when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn them off. OTEL_EXPORTER_OTLP_PROTOCOL (or
// its _TRACES_ form) picks grpc or http/protobuf (the default, as the
// specification says); the exporters read the endpoint, headers, timeout
// and TLS variables themselves, and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name defaults to "noderun").
//
// getenv is os.Getenv when nil. An export that fails is told to log (a
// warning when exports start failing, a line when they work again: once
// a burst, not once a batch), its text redacted of the OTLP headers' values
// and credentials; log nil discards it. Shut the provider down when done:
// that exports the spans still batched.
func TracesFromEnv(ctx context.Context, getenv func(string) string, version string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	if exporter == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
		exporter = "otlp"
	}
	var exp sdktrace.SpanExporter
	var err error
	switch exporter {
	case "none":
		return nil, nil
	case "otlp":
		protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if protocol == "" {
			protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		switch strings.ToLower(strings.TrimSpace(protocol)) {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", protocol)
		}
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: want otlp, console or none", exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("traces exporter: %w", err)
	}
	exp = &loggedExporter{SpanExporter: exp, log: cmp.Or(log, slog.New(slog.DiscardHandler)), red: redact.New(headerValues(getenv)...)}
	// The environment's attributes win over ours: an operator's
	// OTEL_SERVICE_NAME names the service.
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("noderun"), semconv.ServiceVersion(version)),
		resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("traces resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// loggedExporter tells the log, not the SDK's global error handler (which
// prints raw to stderr), when exports fail: once when they start failing,
// once when they work again. The batch processor does not retry a batch
// (the OTLP exporters retry inside Export), so a failed one is dropped
// either way.
type loggedExporter struct {
	sdktrace.SpanExporter
	log     *slog.Logger
	red     *redact.Redactor
	failing atomic.Bool
}

func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		if !e.failing.Swap(true) {
			e.log.Warn("traces: exporting spans failed; they are dropped until an export works again: " + e.red.String(err.Error()))
		}
		return nil
	}
	if e.failing.Swap(false) {
		e.log.Info("traces: exporting spans works again")
	}
	return nil
}

// headerValues are the values of the OTLP exporters' headers (credentials,
// often): OTEL_EXPORTER_OTLP_HEADERS and its _TRACES_ form, "k=v,k2=v2".
func headerValues(getenv func(string) string) []string {
	var out []string
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for kv := range strings.SplitSeq(getenv(name), ",") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				out = append(out, strings.TrimSpace(v))
				if dec, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
					out = append(out, dec)
				}
			}
		}
	}
	return out
}

// ErrorHandler sends what the OpenTelemetry SDK reports outside an export
// (otel.SetErrorHandler: a process-wide setting, the CLI's to make) to
// log, redacted as export failures are, instead of raw to stderr.
func ErrorHandler(log *slog.Logger, getenv func(string) string) otel.ErrorHandler {
	if getenv == nil {
		getenv = os.Getenv
	}
	red := redact.New(headerValues(getenv)...)
	return otel.ErrorHandlerFunc(func(err error) { log.Warn("traces: " + red.String(err.Error())) })
}
