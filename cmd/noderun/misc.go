package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
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
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageErr(errors.New("validate: give one or more graph files"))
			}
			bad := 0
			for _, path := range c.Args().Slice() {
				g, err := runner.LoadGraph(path)
				opts := runner.Options{}
				if err == nil {
					err = runner.Check(g, &opts)
				}
				if err != nil {
					bad++
					fmt.Fprintln(c.App.ErrWriter, err)
					continue
				}
				fmt.Fprintf(c.App.Writer, "%s: ok (%d nodes)\n", path, len(g.Nodes))
				if err := runner.CheckEnvironment(g, &opts); err != nil {
					fmt.Fprintf(c.App.ErrWriter, "warning: `noderun run` on this machine would refuse it:\n%v\n", err)
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
		Flags: []cli.Flag{&cli.StringFlag{Name: "file", Usage: "a profiles YAML file to merge over the built-ins"}},
		Action: func(c *cli.Context) error {
			set := profile.Set(profile.Builtins())
			if f := c.String("file"); f != "" {
				var err error
				if set, err = profile.Load(f); err != nil {
					return usageErr(err)
				}
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "PROFILE\tRETRIES\tRECONNECTS\tBACKOFF (full jitter)\tDEADLINE\tIDLE\tPOLL AFTER\tPOLL\tSTUCK AFTER\tMAX RETRY-AFTER\tBREAKER")
			for _, name := range set.Names() {
				p := set[name]
				fmt.Fprintf(w, "%s\t%d\t%d\t%s × %g, cap %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Retries, p.Reconnects,
					p.Backoff.Base, p.Backoff.Factor, p.Backoff.Cap, p.Deadline, p.IdleTimeout, p.PollAfter, p.PollInterval, p.StuckAfter, p.MaxRetryAfter, breakerText(p))
			}
			return w.Flush()
		},
	}
}

func simCommand() *cli.Command {
	return &cli.Command{
		Name:  "sim",
		Usage: "the fault-injecting OpenAI-compatible provider simulator",
		Subcommands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve the simulator until interrupted; prints its base URL",
			Description: "The config/fault file schema, every fault kind, the admin endpoints (/sim/stats,\n" +
				"/sim/faults, /sim/reset, /sim/outage) and examples: docs/simulator.md.\n" +
				"To prove a graph survives disconnects in CI, `noderun chaos GRAPH` does it all (docs/ci.md).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "addr", Value: "127.0.0.1:0", Usage: "listen address"},
				&cli.StringFlag{Name: "faults", Usage: "YAML file of simulator settings and scripted faults"},
				&cli.Int64Flag{Name: "seed", Usage: "content seed (overrides the file's)"},
			},
			Action: func(c *cli.Context) error {
				var cfg sim.Config
				if f := c.String("faults"); f != "" {
					var err error
					if cfg, err = sim.LoadConfig(f); err != nil {
						return usageErr(err)
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

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func breakerText(p profile.Profile) string {
	if p.Breaker == 0 {
		return "off"
	}
	return fmt.Sprintf("%d failures, %s cool-down", p.Breaker, p.BreakerCooldown)
}
