package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check graph files without running them (exit 2 on any problem)",
		ArgsUsage: "GRAPH.yaml...",
		Description: "Examples:\n  noderun validate graphs/*.yaml          # exit 2 with file:line for every problem\n" +
			"  noderun validate g.yaml --json          # as JSON (docs/json.md), still exit 2 if invalid",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, -1, "give one or more graph files"); err != nil {
				return err
			}
			type graphJSON struct {
				Path     string   `json:"path"`
				OK       bool     `json:"ok"`
				Nodes    int      `json:"nodes"`
				Errors   []string `json:"errors"`
				Warnings []string `json:"warnings"`
			}
			var results []graphJSON
			bad := 0
			for _, path := range c.Args().Slice() {
				res := graphJSON{Path: path, Errors: []string{}, Warnings: []string{}}
				g, err := runner.LoadGraphContext(c.Context, path)
				if c.Context.Err() != nil {
					return interruptedLoad(path)
				}
				opts := runner.Options{}
				if err == nil {
					err = runner.Check(g, &opts)
				}
				if err != nil {
					bad++
					res.Errors = splitLines(err.Error())
					results = append(results, res)
					if !c.Bool("json") {
						fmt.Fprintln(c.App.ErrWriter, err)
					}
					continue
				}
				res.OK, res.Nodes = true, len(g.Nodes)
				if !c.Bool("json") {
					fmt.Fprintf(c.App.Writer, "%s: ok (%d nodes)\n", path, len(g.Nodes))
				}
				if err := runner.CheckEnvironment(g, &opts); err != nil {
					res.Warnings = splitLines(err.Error())
					if !c.Bool("json") {
						fmt.Fprintf(c.App.ErrWriter, "warning: `noderun run` on this machine would refuse it:\n%v\n", err)
					}
				}
				results = append(results, res)
			}
			if c.Bool("json") {
				if err := writeJSON(c.App.Writer, struct {
					Graphs []graphJSON `json:"graphs"`
				}{results}); err != nil {
					return err
				}
			}
			if bad > 0 {
				return &exitError{exitUsage, nil}
			}
			return nil
		},
	}
}

func profilesCommand() *cli.Command {
	return &cli.Command{
		Name:  "profiles",
		Usage: "print the recovery profiles and their values",
		Description: "Examples:\n  noderun profiles                          # the built-ins\n" +
			"  noderun profiles --file profiles.yaml --json   # with your overrides, as JSON (docs/json.md)",
		Flags: []cli.Flag{jsonFlag, &cli.StringFlag{Name: "file", Usage: "a profiles YAML `FILE` to merge over the built-ins", TakesFile: true}},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 0, "takes no arguments"); err != nil {
				return err
			}
			set := profile.Set(profile.Builtins())
			if f := c.String("file"); f != "" {
				var err error
				if set, err = profile.Load(f); err != nil {
					return usageErr(fileErr("--file", err))
				}
			}
			if c.Bool("json") {
				return profilesJSON(c.App.Writer, set)
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "PROFILE\tRETRIES\tRECONNECTS\tBACKOFF (full jitter)\tDEADLINE\tIDLE\tPOLL AFTER\tPOLL\tSTUCK AFTER\tMAX RETRY-AFTER\tBREAKER\tMAX OUTPUT")
			for _, name := range set.Names() {
				p := set[name]
				fmt.Fprintf(w, "%s\t%d\t%d\t%s × %g, cap %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Retries, p.Reconnects,
					p.Backoff.Base, p.Backoff.Factor, p.Backoff.Cap, p.Deadline, p.IdleTimeout, p.PollAfter, p.PollInterval, p.StuckAfter, p.MaxRetryAfter, breakerText(p),
					p.OutputBound())
			}
			return w.Flush()
		},
	}
}

func simCommand() *cli.Command {
	return &cli.Command{
		Name:        "sim",
		Usage:       "the fault-injecting OpenAI-compatible provider simulator",
		Description: "Example:\n  noderun sim serve --faults testdata/faults/flaky-stream.yaml   # prints its base URL",
		Subcommands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve the simulator until interrupted; prints its base URL",
			Description: "The config/fault file schema, every fault kind, the admin endpoints (/sim/stats,\n" +
				"/sim/faults, /sim/reset, /sim/outage) and examples: docs/simulator.md.\n" +
				"To prove a graph survives disconnects in CI, `noderun chaos GRAPH` does it all (docs/ci.md).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "addr", Value: "127.0.0.1:0", Usage: "listen on `HOST:PORT` (port 0: any free one)"},
				&cli.StringFlag{Name: "faults", Usage: "YAML `FILE` of simulator settings and scripted faults", TakesFile: true},
				&cli.Int64Flag{Name: "seed", Usage: "content seed (overrides the file's)"},
			},
			Action: func(c *cli.Context) error {
				if err := wantArgs(c, 0, 0, "takes no arguments"); err != nil {
					return err
				}
				var cfg sim.Config
				if f := c.String("faults"); f != "" {
					var err error
					if cfg, err = sim.LoadConfig(f); err != nil {
						return usageErr(fileErr("--faults", err))
					}
				}
				if c.IsSet("seed") {
					cfg.Seed = c.Int64("seed")
				}
				log, err := newLogger(c)
				if err != nil {
					return err
				}
				cfg.Logger = log
				srv := sim.New(cfg)
				if err := srv.Start(c.String("addr")); err != nil {
					return &exitError{exitFailed, err}
				}
				defer srv.Close()
				fmt.Fprintln(c.App.Writer, srv.BaseURL())
				<-c.Context.Done()
				return nil
			},
		}},
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func breakerText(p profile.Profile) string {
	if p.Breaker == 0 {
		return "off"
	}
	return fmt.Sprintf("%d failures, %s cool-down", p.Breaker, p.BreakerCooldown)
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// profilesJSON prints every profile; durations are in milliseconds.
func profilesJSON(w io.Writer, set profile.Set) error {
	type profileJSON struct {
		Name              string  `json:"name"`
		Retries           int     `json:"retries"`
		Reconnects        int     `json:"reconnects"`
		BackoffBaseMS     int64   `json:"backoff_base_ms"`
		BackoffFactor     float64 `json:"backoff_factor"`
		BackoffCapMS      int64   `json:"backoff_cap_ms"`
		DeadlineMS        int64   `json:"deadline_ms"`
		IdleTimeoutMS     int64   `json:"idle_timeout_ms"`
		PollAfterMS       int64   `json:"poll_after_ms"`
		PollIntervalMS    int64   `json:"poll_interval_ms"`
		StuckAfterMS      int64   `json:"stuck_after_ms"`
		MaxRetryAfterMS   int64   `json:"max_retry_after_ms"`
		Breaker           int     `json:"breaker"`
		BreakerCooldownMS int64   `json:"breaker_cooldown_ms"`
		MaxOutputBytes    int64   `json:"max_output_bytes"`
		MaxEvents         int     `json:"max_events"`
	}
	out := struct {
		Profiles []profileJSON `json:"profiles"`
	}{Profiles: []profileJSON{}}
	for _, name := range set.Names() {
		p := set[name]
		out.Profiles = append(out.Profiles, profileJSON{Name: name, Retries: p.Retries, Reconnects: p.Reconnects,
			BackoffBaseMS: p.Backoff.Base.D().Milliseconds(), BackoffFactor: p.Backoff.Factor, BackoffCapMS: p.Backoff.Cap.D().Milliseconds(),
			DeadlineMS: p.Deadline.D().Milliseconds(), IdleTimeoutMS: p.IdleTimeout.D().Milliseconds(), PollAfterMS: p.PollAfter.D().Milliseconds(),
			PollIntervalMS: p.PollInterval.D().Milliseconds(), StuckAfterMS: p.StuckAfter.D().Milliseconds(),
			MaxRetryAfterMS: p.MaxRetryAfter.D().Milliseconds(), Breaker: p.Breaker, BreakerCooldownMS: p.BreakerCooldown.D().Milliseconds(),
			MaxOutputBytes: int64(p.OutputBound()), MaxEvents: p.EventBound()})
	}
	return writeJSON(w, out)
}
