package main

// Traces and metrics for run, resume and worker (docs/observability.md):
// traces as the standard OpenTelemetry environment variables say (none when
// they say nothing), metrics on --metrics ADDR.

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
	"go.opentelemetry.io/otel"
	"go.temporal.io/sdk/interceptor"

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

// startTelemetry sets up what the environment and --metrics ask for
// (telemetry.Start). Without either it builds nothing: the run's hot path is
// the one without telemetry.
func startTelemetry(c *cli.Context, log *slog.Logger) (*telemetry.Setup, error) {
	o, err := telemetry.Start(c.Context, telemetry.SetupOptions{Version: versionText(), MetricsAddr: c.String("metrics"), Logger: log})
	if le, ok := errors.AsType[*telemetry.ListenError](err); ok {
		return nil, usageErr(fmt.Errorf("--metrics %s: %w", le.Addr, le.Err))
	}
	if err != nil {
		return nil, usageErr(err)
	}
	if o.Traces != nil {
		otel.SetErrorHandler(telemetry.ErrorHandler(log, nil)) // the SDK's reports, in the log's format, redacted
	}
	if o.MetricsAddr != "" {
		fmt.Fprintf(c.App.ErrWriter, "noderun: metrics on http://%s/metrics\n", o.MetricsAddr)
	}
	return o, nil
}

// temporalInterceptors carry the trace context through Temporal: from run
// --temporal's span to the workflow and each node's activity on a worker.
func temporalInterceptors(o *telemetry.Setup) ([]interceptor.ClientInterceptor, error) {
	if o.Traces == nil {
		return nil, nil
	}
	ti, err := ntemporal.TracingInterceptor(o.Traces)
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{ti}, nil
}

// lingerThenClose keeps /metrics up for --metrics-linger (a run's last
// figures for a scrape that comes after it ends) unless interrupted, then
// closes everything.
func lingerThenClose(c *cli.Context, o *telemetry.Setup) {
	if d := c.Duration("metrics-linger"); o.Metrics != nil && d > 0 && c.Context.Err() == nil {
		fmt.Fprintf(c.App.ErrWriter, "noderun: the run ended; /metrics stays up for %s (--metrics-linger; Ctrl-C stops it)\n", d)
		select {
		case <-time.After(d):
		case <-c.Context.Done():
		}
	}
	o.Close()
}
