package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
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
// getenv is os.Getenv when nil. Shut the provider down when done: that
// exports the spans still batched.
func TracesFromEnv(ctx context.Context, getenv func(string) string, version string) (*sdktrace.TracerProvider, error) {
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
	// The environment's attributes win over ours: an operator's
	// OTEL_SERVICE_NAME names the service.
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("noderun"), semconv.ServiceVersion(version)),
		resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("traces resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
