package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/age"
	"github.com/noderun/noderun/journal"
)

// deleteCommand and pruneCommand remove runs (journal.DeleteRun, Prune):
// every row of a run in one transaction; a live run is refused.
func deleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete runs and everything journaled of them",
		ArgsUsage: "RUN|last...",
		Description: "Removes each run's nodes, attempts, events and cached outputs, one transaction a run. A run that\n" +
			"a live process runs is refused, naming it (pid and host); nothing is deleted then. The file keeps its\n" +
			"size, its freed pages reused, until noderun compact gives them back.\n\n" +
			"Examples:\n  noderun delete last\n  noderun delete 3f2a 9bc1    # unique prefixes of run ids",
		Flags: []cli.Flag{dbFlag()},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, -1, "give one or more run ids (or last)"); err != nil {
				return err
			}
			j, _, err := openLogged(c)
			if err != nil {
				return err
			}
			defer j.Close()
			var runs []journal.Run
			seen := map[string]bool{}
			for _, arg := range c.Args().Slice() { // every one found, and none live, before any goes
				r, err := findRun(c.Context, j, arg)
				if err != nil {
					return err
				}
				if le := j.Live(r); le != nil {
					return liveErr(le)
				}
				if !seen[r.ID] {
					seen[r.ID] = true
					runs = append(runs, r)
				}
			}
			for _, r := range runs {
				err := j.DeleteRun(c.Context, r.ID)
				if le, ok := errors.AsType[*journal.LockedError](err); ok {
					return liveErr(le) // taken since
				} else if err != nil && !errors.Is(err, journal.ErrNotFound) {
					return &exitError{exitFailed, err}
				}
				fmt.Fprintf(c.App.Writer, "deleted run %s (%s, %s)\n", r.ID, r.Graph, j.Standing(r))
			}
			fmt.Fprintf(c.App.ErrWriter, "noderun: to give the space back to the disk: noderun compact%s\n", dbArg(c))
			return nil
		},
	}
}

// liveErr refuses to delete a run a live process runs (exit 2).
func liveErr(le *journal.LockedError) error {
	return usageErr(fmt.Errorf("%w; a live run is not deleted: wait for it to end, or stop that process first", le))
}

func pruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "delete the runs started more than an age ago",
		Description: "Deletes, as noderun delete does, every run started more than --older-than ago (of --status, if\n" +
			"given); live runs are kept and named. --dry-run lists them and deletes nothing.\n\n" +
			"Examples:\n  noderun prune --older-than 30d --dry-run\n  noderun prune --older-than 36h --status failed && noderun compact",
		Flags: []cli.Flag{dbFlag(),
			&cli.StringFlag{Name: "older-than", Usage: "delete runs started more than `AGE` ago (7d, 36h, 90m; required)"},
			statusFlag("only runs of `STATUS`"),
			&cli.BoolFlag{Name: "dry-run", Usage: "list the runs it would delete; delete nothing"}},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 0, "takes no arguments"); err != nil {
				return err
			}
			if !c.IsSet("older-than") {
				return usageErr(fmt.Errorf("prune: give --older-than AGE (7d, 36h)\n%s", shortUsage("noderun prune", c.Command)))
			}
			d, err := age.Parse(c.String("older-than"))
			if err != nil {
				return usageErr(fmt.Errorf("--older-than: %w", err))
			}
			q, err := runQueryOf(c)
			if err != nil {
				return err
			}
			open, verb := func(c *cli.Context) (*journal.Journal, error) { j, _, err := openLogged(c); return j, err }, "deleted"
			if c.Bool("dry-run") { // reads only: a journal the user cannot write too, and creates no file
				open, verb = openForReading, "would delete"
			}
			j, err := open(c)
			if err != nil {
				return err
			}
			defer j.Close()
			res, err := j.Prune(c.Context, journal.PruneOptions{OlderThan: d, Status: q.Status, DryRun: c.Bool("dry-run")})
			if err != nil {
				return &exitError{exitFailed, err}
			}
			for _, r := range res.Deleted {
				fmt.Fprintf(c.App.Writer, "%s run %s (%s, %s, started %s)\n", verb, r.ID, r.Graph, j.Standing(r), r.Started.Format(time.DateTime))
			}
			for _, le := range res.Live {
				fmt.Fprintf(c.App.ErrWriter, "noderun: kept %v\n", le)
			}
			if len(res.Deleted) > 0 && !c.Bool("dry-run") {
				fmt.Fprintf(c.App.ErrWriter, "noderun: to give the space back to the disk: noderun compact%s\n", dbArg(c))
			}
			return nil
		},
	}
}

// statusFlag selects runs by their status as it stands.
func statusFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "status", Usage: usage + " (running, completed, failed, interrupted)"}
}

// runQueryFlags filter the runs list (status with no run).
func runQueryFlags() []cli.Flag {
	return []cli.Flag{statusFlag("only runs of `STATUS`"),
		&cli.StringFlag{Name: "graph", Usage: "only runs of graph `NAME`"},
		&cli.StringFlag{Name: "since", Usage: "only runs started since `WHEN` (7d, 36h, 2006-01-02)"},
		&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` runs, newest first (0: all)"}}
}

// runQueryOf reads runQueryFlags (those the command has); they filter a
// list, so a command given a run or --temporal refuses them (exit 2).
func runQueryOf(c *cli.Context) (journal.RunQuery, error) {
	var q journal.RunQuery
	var set []string
	for _, f := range []string{"status", "graph", "since", "limit"} {
		if c.IsSet(f) {
			set = append(set, "--"+f)
		}
	}
	if len(set) > 0 && (c.NArg() > 0 || c.String("temporal") != "") {
		return q, usageErr(fmt.Errorf("%s: %s: for the runs list only (give no run, and no --temporal)", c.Command.Name, strings.Join(set, ", ")))
	}
	if s := c.String("status"); s != "" {
		if err := oneOf("status", s, journal.RunStatusNames()...); err != nil {
			return q, err
		}
		q.Status = journal.RunStatus(s)
	}
	q.Graph, q.Limit = c.String("graph"), c.Int("limit")
	if q.Limit < 0 {
		return q, usageErr(fmt.Errorf("--limit %d: must be 0 (all) or more", q.Limit))
	}
	if s := c.String("since"); s != "" {
		t, err := age.Since(s, time.Now())
		if err != nil {
			return q, usageErr(fmt.Errorf("--since: %w", err))
		}
		q.Since = t
	}
	return q, nil
}
