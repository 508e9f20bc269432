package main

// Traces and metrics for run, resume and worker (docs/observability.md):
// traces as the standard OpenTelemetry environment variables say (none when
// they say nothing), metrics on --metrics ADDR.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/interceptor"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/telemetry"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// metricsFlags are the flags of the commands that can serve metrics. linger
// is for run and resume, which end: a worker serves until it stops.
func metricsFlags(linger bool) []cli.Flag {
	fs := []cli.Flag{&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics on http://`ADDR`/metrics (:0 picks a port)"}}
	if linger {
		fs = append(fs, &cli.DurationFlag{Name: "metrics-linger", Usage: "keep /metrics up `D` after the run ends, for a last scrape"})
	}
	return fs
}

// companions are flags that mean something only with another: given
// without it, they would be silently ignored.
var companions = []struct{ flag, needs, why string }{
	{"heartbeat-timeout", "temporal", "a run on Temporal's workers"},
	{"pack", "temporal", "a run on Temporal's workers"},
	{"namespace", "temporal", "a Temporal frontend"},
	{"task-queue", "temporal", "a Temporal frontend"},
	{"token-env", "serve", "the run's page (--serve)"},
}

// checkCompanions refuses a flag given without the flag it needs, and a
// negative --heartbeat-timeout.
func checkCompanions(c *cli.Context) error {
	for _, x := range companions {
		if c.IsSet(x.flag) && !c.IsSet(x.needs) && hasFlag(c, x.needs) {
			return usageErr(fmt.Errorf("--%s is for %s: give --%s too", x.flag, x.why, x.needs))
		}
	}
	if d := c.Duration("heartbeat-timeout"); d < 0 {
		return usageErr(fmt.Errorf("--heartbeat-timeout %s: give a duration above 0 (default 10s)", d))
	}
	return nil
}

// hasFlag: the command has the flag.
func hasFlag(c *cli.Context, name string) bool {
	for _, f := range c.Command.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// checkLinger refuses a --metrics-linger that cannot mean anything: a
// negative one, or one without --metrics to keep up.
func checkLinger(c *cli.Context) error {
	if !c.IsSet("metrics-linger") {
		return nil
	}
	if d := c.Duration("metrics-linger"); d < 0 {
		return usageErr(fmt.Errorf("--metrics-linger %s: give a duration of 0 or more", d))
	}
	if c.String("metrics") == "" {
		return usageErr(errors.New("--metrics-linger keeps --metrics up after the run: give --metrics ADDR too"))
	}
	return nil
}

// obs is a command's telemetry: nil parts are off.
type obs struct {
	traces  *sdktrace.TracerProvider
	metrics *telemetry.Metrics
	tel     *telemetry.Telemetry
	stop    func() // stops serving the metrics
	log     *slog.Logger
}

// startTelemetry builds what the environment and --metrics ask for. Without
// either it builds nothing: the run's hot path is the one without telemetry.
func startTelemetry(c *cli.Context, log *slog.Logger) (*obs, error) {
	o := &obs{log: log, stop: func() {}}
	tp, err := telemetry.TracesFromEnv(c.Context, nil, versionText(), log)
	if err != nil {
		return nil, usageErr(err)
	}
	o.traces = tp
	if tp != nil {
		otel.SetErrorHandler(telemetry.ErrorHandler(log, nil)) // the SDK's reports, in the log's format, redacted
	}
	if addr := c.String("metrics"); addr != "" {
		o.metrics = telemetry.NewMetrics()
		bound, stop, err := o.metrics.Serve(c.Context, addr)
		if err != nil {
			o.close()
			return nil, usageErr(fmt.Errorf("--metrics %s: %w", addr, err))
		}
		o.stop = stop
		fmt.Fprintf(c.App.ErrWriter, "noderun: metrics on http://%s/metrics\n", bound)
	}
	opts := telemetry.Options{Metrics: o.metrics, Logger: log}
	if tp != nil {
		opts.Traces = tp
	}
	o.tel = telemetry.New(opts)
	return o, nil
}

// observer is the runner's Observer: nil (untyped) when nothing is on.
func (o *obs) observer() runner.Observer {
	if o.tel == nil {
		return nil
	}
	return o.tel
}

// journalOptions time the journal's writes when metrics are served.
func (o *obs) journalOptions() []journal.Option {
	if o.metrics == nil {
		return nil
	}
	return []journal.Option{journal.WithWriteObserver(o.metrics.JournalWrites)}
}

// interceptors carry the trace context through Temporal: from run
// --temporal's span to the workflow and each node's activity on a worker.
func (o *obs) interceptors() ([]interceptor.ClientInterceptor, error) {
	if o.traces == nil {
		return nil, nil
	}
	ti, err := ntemporal.TracingInterceptor(o.traces)
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{ti}, nil
}

// lingerThenClose keeps /metrics up for --metrics-linger (a run's last
// figures for a scrape that comes after it ends) unless interrupted, then
// closes everything.
func (o *obs) lingerThenClose(c *cli.Context) {
	if d := c.Duration("metrics-linger"); o.metrics != nil && d > 0 && c.Context.Err() == nil {
		fmt.Fprintf(c.App.ErrWriter, "noderun: the run ended; /metrics stays up for %s (--metrics-linger; Ctrl-C stops it)\n", d)
		select {
		case <-time.After(d):
		case <-c.Context.Done():
		}
	}
	o.close()
}

// close stops serving the metrics and exports the spans still batched.
func (o *obs) close() {
	o.stop()
	if o.traces == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.traces.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		o.log.Warn("traces: exporting the last spans", "error", err)
	}
}
