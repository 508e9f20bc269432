package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/shell"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/chaos"
)

func chaosCommand() *cli.Command {
	return &cli.Command{
		Name:      "chaos",
		Usage:     "prove a graph survives mid-stream disconnects, on the simulator",
		ArgsUsage: "GRAPH.yaml",
		Description: "Every provider is replaced by a simulated one of the same API (Codex harness nodes run Codex\n" +
			"pointed at the simulator). Each case aims one fault at one node at a time; the node must complete\n" +
			"with output byte-identical to the undisturbed run, within the profile's bounds, regenerating\n" +
			"nothing a resumable provider could re-attach to, or end as the case expects (outage-long: give\n" +
			"up within its bounds; an unsafe node may always be held). Exit 0 only if every case holds; a\n" +
			"temporary journal is kept, and named, when one does not. See docs/ci.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "faults", Usage: "matrix file: pick default cases and add your own (docs/ci.md)"},
			&cli.StringFlag{Name: "junit", Usage: "write JUnit XML to this file (one testcase per case and node)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON on stdout"},
			&cli.BoolFlag{Name: "list", Usage: "print the cases and exit"},
			&cli.StringFlag{Name: "profile", Usage: "recovery profile (overrides the graph's)"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "simulator content seed"},
			&cli.IntFlag{Name: "tokens", Value: chaos.DefaultTokens, Usage: "tokens in every simulated answer"},
			&cli.IntFlag{Name: "parallel", Value: chaos.DefaultParallel, DefaultText: "8; 1 per 2 CPUs with agent harness nodes",
				Usage: "case runs at once (each on its own simulator)"},
			&cli.StringFlag{Name: "db", Usage: "keep every run in this journal (default: a temporary one)"},
		},
		Action: chaosAction,
	}
}

func chaosAction(c *cli.Context) error {
	if c.Int("parallel") < 1 {
		return usageErr(fmt.Errorf("chaos: --parallel %d: give how many case runs go at once, 1 or more (default %d)\n%s",
			c.Int("parallel"), chaos.DefaultParallel, shortUsage("noderun chaos", c.Command)))
	}
	if c.Int("tokens") < 1 {
		return usageErr(fmt.Errorf("chaos: --tokens %d: give the length of every simulated answer, 1 or more (default %d)\n%s",
			c.Int("tokens"), chaos.DefaultTokens, shortUsage("noderun chaos", c.Command)))
	}
	var g *runner.Graph
	if c.NArg() > 1 || c.NArg() == 0 && !c.Bool("list") {
		return usageErr(errors.New("chaos: give exactly one graph file"))
	}
	if c.NArg() == 1 {
		var err error
		if g, err = loadGraph(c, c.Args().First()); err != nil {
			return err
		}
	}
	var matrix *chaos.Matrix
	if f := c.String("faults"); f != "" {
		var err error
		if matrix, err = chaos.LoadMatrix(f); err != nil {
			return usageErr(err)
		}
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	opts := runner.Options{Profile: c.String("profile"), Logger: log, Sim: &runner.SimOptions{}}
	var prof profile.Profile
	if g != nil {
		if err := errors.Join(runner.Check(g, &opts), runner.CheckEnvironment(g, &opts)); err != nil {
			return usageErr(err)
		}
		prof, _ = runner.Prepare(g, &opts)
	} else {
		name := c.String("profile")
		if name == "" {
			name = "default"
		}
		if prof, err = profile.Set(profile.Builtins()).Get(name); err != nil {
			return usageErr(err)
		}
	}
	cases, err := chaos.Select(chaos.DefaultCases(prof), matrix)
	if err != nil {
		return usageErr(fmt.Errorf("%s: %w", c.String("faults"), err))
	}
	if c.Bool("list") {
		return chaos.WriteCases(c.App.Writer, cases, prof.Name)
	}

	// Progress on stderr: a line redrawn in place on a terminal, one line
	// per case run as it ends when piped. The runs' own logs would bury it
	// (a dozen lines a case): they stay in the journal, and reach stderr,
	// above the progress, with --log-level debug only.
	prog := newChaosProgress(c.App.ErrWriter)
	defer prog.stop()
	if log, err = newLoggerTo(c, prog.writer(), prog.width()); err != nil {
		return err
	}
	runLog := slog.New(slog.DiscardHandler)
	if c.String("log-level") == "debug" {
		runLog = log
	}
	// Without --db the runs go to a temporary journal, removed when every
	// case holds and kept when one fails: the commands the report prints
	// for a failed case read it.
	db, tmp := c.String("db"), ""
	if db == "" {
		dir, err := os.MkdirTemp("", "noderun-chaos-")
		if err != nil {
			return &exitError{exitFailed, err}
		}
		tmp, db = dir, filepath.Join(dir, "chaos.db")
	}
	j, err := journal.Open(c.Context, db, journal.WithLogger(log))
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return journalErr(err)
	}
	parallel := 0 // chaos's default for the graph
	if c.IsSet("parallel") {
		parallel = c.Int("parallel")
	}
	rep, err := chaos.Run(c.Context, g, chaos.Options{Journal: j, Cases: cases, Profile: c.String("profile"),
		Profiles: opts.Profiles, Seed: c.Int64("seed"), Tokens: c.Int("tokens"), Parallel: parallel, Logger: runLog,
		Started: prog.started, Progress: prog.done})
	prog.stop()
	// Closed before anyone reads it (the commands the report prints) or
	// removes it.
	if cerr := j.Close(); cerr != nil && err == nil {
		return journalErr(cerr)
	}
	kept := ""
	switch {
	case tmp == "":
	case err == nil && rep.OK():
		rep.Journal = "" // about to go
		defer os.RemoveAll(tmp)
	default:
		kept = "; the journal of every run is kept: " + db
	}
	if err != nil {
		if c.Context.Err() != nil {
			return &exitError{exitInterrupted, fmt.Errorf("chaos interrupted: %w%s", err, kept)}
		}
		return &exitError{exitFailed, fmt.Errorf("%w%s", err, kept)}
	}
	if f := c.String("junit"); f != "" {
		if err := writeFileWith(f, rep.WriteJUnit); err != nil {
			return &exitError{exitFailed, fmt.Errorf("--junit: %w", err)}
		}
	}
	if c.Bool("json") {
		err = rep.WriteJSON(c.App.Writer)
	} else {
		err = rep.WriteTable(c.App.Writer)
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	if hint := profileHint(rep, prof, opts.Profiles, c.Args().First()); hint != "" {
		fmt.Fprintln(c.App.ErrWriter, hint)
	}
	if !rep.OK() {
		return &exitError{exitFailed, fmt.Errorf("chaos: %d of %d case runs failed; the journal of every run: %s", rep.Failed, rep.Runs, db)}
	}
	return nil
}

// profileHint suggests the ci profile when the run spent most of its wall
// time waiting only for silence cases, which wait out the profile's idle
// window, and ci would at least halve it (chaos.Report.IdleHint).
func profileHint(rep *chaos.Report, prof profile.Profile, set profile.Set, graph string) string {
	h, ok := rep.IdleHint(prof, set)
	if !ok {
		return ""
	}
	return fmt.Sprintf("hint: %s waits out the idle window (%s: %s, ci: %s),\n"+
		"      %s of this run's %s; with --profile ci it takes %s or less:\n"+
		"      noderun chaos %s --profile ci",
		strings.Join(h.Cases, ", "), prof.Name, roundDuration(h.Idle), roundDuration(h.Shorter),
		roundDuration(h.Tail), roundDuration(h.Wall), roundDuration(h.Estimate), shell.Quote(graph))
}

// roundDuration prints d to the second as people write it: 45s, 90s,
// 2m5s, 1h30m (not 1m32.417s or 1h30m0s). Under two minutes it stays in
// seconds, which read faster than 1m5s.
func roundDuration(d time.Duration) string {
	d = max(0, d.Round(time.Second))
	if d < 2*time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if sec > 0 {
		fmt.Fprintf(&b, "%ds", sec)
	}
	return b.String()
}

// writeFileWith writes a file through fn, replacing it only when fn succeeds.
func writeFileWith(path string, fn func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".noderun-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := fn(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
