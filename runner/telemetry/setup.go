package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// Setup is a process's telemetry as `noderun run`, `resume` and `worker` set
// it up: the traces the OpenTelemetry environment variables ask for
// (TracesFromEnv), the metrics served on an address, and the Telemetry that
// reports runs to both. A part that is off is nil: with neither traces nor
// metrics, Telemetry is nil too, and a run takes the path it takes without
// telemetry. Close it when done.
type Setup struct {
	Traces  *sdktrace.TracerProvider
	Metrics *Metrics
	// MetricsAddr is the address the metrics are served on (the port
	// that a :0 picked); "" without metrics.
	MetricsAddr string
	Telemetry   *Telemetry

	stop func() // stops serving the metrics
	log  *slog.Logger
}

// SetupOptions configure Start.
type SetupOptions struct {
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// Version is the traces' service.version.
	Version string
	// MetricsAddr is where to serve the metrics, at /metrics (HOST:PORT;
	// :0 picks a port); "": no metrics.
	MetricsAddr string
	// Logger gets the traces' failed exports and what could not be
	// reported; nil discards them.
	Logger *slog.Logger
}

// ListenError: the metrics could not be served at Addr.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return fmt.Sprintf("serving metrics on %s: %v", e.Addr, e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }

// Start sets up what opts ask for and serves the metrics until ctx ends or
// Close. Its errors are TracesFromEnv's (a variable it cannot use) and a
// *ListenError; on an error, nothing is left running.
func Start(ctx context.Context, opts SetupOptions) (*Setup, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Setup{log: log, stop: func() {}}
	tp, err := TracesFromEnv(ctx, opts.Getenv, opts.Version, opts.Logger)
	if err != nil {
		return nil, err
	}
	s.Traces = tp
	if opts.MetricsAddr != "" {
		s.Metrics = NewMetrics()
		bound, stop, err := s.Metrics.Serve(ctx, opts.MetricsAddr)
		if err != nil {
			s.Close()
			return nil, &ListenError{Addr: opts.MetricsAddr, Err: err}
		}
		s.MetricsAddr, s.stop = bound, stop
	}
	to := Options{Metrics: s.Metrics, Logger: opts.Logger}
	if tp != nil { // a nil *TracerProvider in the interface would not be nil
		to.Traces = tp
	}
	s.Telemetry = New(to)
	return s, nil
}

// Observer is what to set as runner.Options.Observer: nil (untyped) when
// nothing is on.
func (s *Setup) Observer() runner.Observer {
	if s.Telemetry == nil {
		return nil
	}
	return s.Telemetry
}

// JournalOptions time the journal's writes (journal.WithWriteObserver)
// when metrics are served; none otherwise.
func (s *Setup) JournalOptions() []journal.Option {
	if s.Metrics == nil {
		return nil
	}
	return []journal.Option{journal.WithWriteObserver(s.Metrics.JournalWrites)}
}

// Close stops serving the metrics and exports the spans still batched,
// waiting at most five seconds for the exporter; an export that fails is
// logged.
func (s *Setup) Close() {
	s.stop()
	if s.Traces == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Traces.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("traces: exporting the last spans", "error", err)
	}
}
