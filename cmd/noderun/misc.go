package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/cliword"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner/view"
)

func validateCommand() *cli.Command {
	kinds := []view.FileKind{view.FileProfiles, view.FilePrices, view.FileFaults}
	flags := []cli.Flag{jsonFlag()}
	for _, k := range kinds {
		flags = append(flags, &cli.StringSliceFlag{Name: string(k), Usage: "check a " + string(k) + " `FILE` too (repeatable)", TakesFile: true})
	}
	return &cli.Command{
		Name:      "validate",
		Usage:     "check graph, profiles, price and fault files without running them",
		ArgsUsage: "GRAPH.yaml...",
		Description: "Exit 2 when any file has a problem.\n\nExamples:\n  noderun validate graphs/*.yaml          # exit 2 with file:line for every problem\n" +
			"  noderun validate g.yaml --json          # as JSON (docs/json.md), still exit 2 if invalid\n" +
			"  noderun validate --profiles p.yaml --prices prices.yaml --faults sim.yaml",
		Flags: flags,
		Action: func(c *cli.Context) error {
			res := view.Validation{Graphs: []view.GraphCheck{}}
			for _, k := range kinds {
				for _, path := range c.StringSlice(string(k)) {
					res.Files = append(res.Files, view.CheckFile(k, path))
				}
			}
			if err := wantArgs(c, min(1, 1-len(res.Files)), -1, "give one or more graph files (or --profiles, --prices, --faults)"); err != nil {
				return err
			}
			bad := 0
			for _, path := range c.Args().Slice() {
				g, err := view.CheckGraph(c.Context, path)
				if err != nil {
					return interruptedLoad(path)
				}
				res.Graphs = append(res.Graphs, g)
				switch {
				case c.Bool("json"):
				case g.Err != nil:
					fmt.Fprintln(c.App.ErrWriter, g.Err)
				default:
					fmt.Fprintf(c.App.Writer, "%s: ok (%s)\n", path, textfit.Count(g.Nodes, "node"))
					if g.Env != nil {
						fmt.Fprintf(c.App.ErrWriter, "warning: `noderun run` on this machine would refuse it:\n%v\n", g.Env)
					}
				}
				if g.Err != nil {
					bad++
				}
			}
			for _, f := range res.Files {
				switch {
				case c.Bool("json"):
				case f.Err != nil:
					fmt.Fprintln(c.App.ErrWriter, f.Err)
				default:
					fmt.Fprintf(c.App.Writer, "%s: ok (%s)\n", f.Path, f.Kind)
				}
				if f.Err != nil {
					bad++
				}
			}
			if c.Bool("json") {
				if err := writeJSON(c.App.Writer, res); err != nil {
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
		Flags: []cli.Flag{jsonFlag(), &cli.StringFlag{Name: "file", Usage: "a profiles YAML `FILE` to merge over the built-ins", TakesFile: true}},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 0, "takes no arguments"); err != nil {
				return err
			}
			set := profile.Set(profile.Builtins())
			if f := c.String("file"); f != "" {
				var err error
				if set, err = profile.Load(f); err != nil {
					return usageErr(cliword.FileErr("--file", err))
				}
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, view.ProfilesOf(set))
			}
			return view.WriteProfiles(c.App.Writer, set)
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
						return usageErr(cliword.FileErr("--faults", err))
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
