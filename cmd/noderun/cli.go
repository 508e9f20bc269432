package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"

	"github.com/noderun/noderun/journal"
)

// CLI conventions shared by every command, as gh and kubectl behave: a
// --version, flags anywhere on the line (intersperse), "did you mean" for
// unknown commands and flags with a short usage on stderr and exit 2, and
// values checked rather than silently ignored.

// buildCommit is the commit when the build info has none (the Makefile sets
// it with -ldflags -X, for builds where the go command cannot stamp VCS
// information, such as GOFLAGS=-buildvcs=false).
var buildCommit string

// versionText is the module version and VCS commit from the build info.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "noderun (no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if rev == "" {
		rev = buildCommit
	}
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("noderun %s (commit %s%s, %s)", v, rev, modified, bi.GoVersion)
}

// applyConventions sets the usage-error handling on the app and every
// command below it.
func applyConventions(app *cli.App) {
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return usageError(c, nil, err)
	}
	var walk func(parents []string, cmds []*cli.Command)
	walk = func(parents []string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd := cmd
			path := append(append([]string(nil), parents...), cmd.Name)
			cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
				return usageError(c, cmd, err)
			}
			if cmd.Action == nil && len(cmd.Subcommands) > 0 {
				cmd.Action = func(c *cli.Context) error {
					if c.NArg() == 0 {
						return cli.ShowSubcommandHelp(c)
					}
					return unknownCommand(strings.Join(path, " "), c.Args().First(), cmd.Subcommands)
				}
			}
			walk(path, cmd.Subcommands)
		}
	}
	walk(nil, app.Commands)
}

// usageError turns a flag parse error into exit 2 with a suggestion and a
// short usage line, on stderr; help never goes to stdout on an error.
func usageError(c *cli.Context, cmd *cli.Command, err error) error {
	msg := err.Error()
	flags, name := c.App.Flags, "noderun"
	if cmd != nil {
		flags, name = append(append([]cli.Flag(nil), cmd.Flags...), c.App.Flags...), "noderun "+cmd.FullName()
	}
	if bad, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		msg = "unknown flag --" + strings.TrimLeft(bad, "-")
		var names []string
		for _, f := range flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, n)
				}
			}
		}
		if s := suggestWord(strings.TrimLeft(bad, "-"), names); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	}
	return usageErr(fmt.Errorf("%s\n%s", msg, shortUsage(name, cmd)))
}

// shortUsage is one line of usage and where to find more.
func shortUsage(name string, cmd *cli.Command) string {
	args := "COMMAND [flags]"
	if cmd != nil {
		args = strings.TrimSpace("[flags] " + cmd.ArgsUsage)
	}
	return fmt.Sprintf("usage: %s %s (see: %s --help)", name, args, name)
}

// unknownCommand is the error for a command that does not exist.
func unknownCommand(parent, name string, cmds []*cli.Command) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, parent)
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	if s := suggestWord(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return usageErr(fmt.Errorf("%s\nusage: %s COMMAND [flags]; commands: %s (see: %s --help)", msg, parent, strings.Join(names, ", "), parent))
}

// rootAction runs when no command is given: --version, the help, or an
// unknown command.
func rootAction(c *cli.Context) error {
	if c.Bool("version") {
		_, err := fmt.Fprintln(c.App.Writer, versionText())
		return err
	}
	if c.NArg() > 0 {
		return unknownCommand("noderun", c.Args().First(), c.App.Commands)
	}
	return cli.ShowAppHelp(c)
}

// wantArgs checks the number of positional arguments of a command.
func wantArgs(c *cli.Context, lo, hi int, what string) error {
	if n := c.NArg(); n < lo || (hi >= 0 && n > hi) {
		msg := what
		if n > hi && hi >= 0 {
			msg = fmt.Sprintf("%s (unexpected %q)", what, c.Args().Get(hi))
		}
		return usageErr(fmt.Errorf("%s: %s\n%s", c.Command.FullName(), msg, shortUsage("noderun "+c.Command.FullName(), c.Command)))
	}
	return nil
}

// oneOf checks a flag's value against the allowed ones.
func oneOf(flag, value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	msg := fmt.Sprintf("--%s %q: must be one of %s", flag, value, strings.Join(allowed, ", "))
	if s := suggestWord(value, allowed); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return usageErr(errors.New(msg))
}

// suggestWord is the closest of words to w by Jaro-Winkler similarity (as
// urfave/cli suggests), or "" when none is close enough to be a typo.
func suggestWord(w string, words []string) string {
	best, score := "", 0.0
	for _, x := range words {
		if d := smetrics.JaroWinkler(w, x, 0.7, 4); d > score {
			best, score = x, d
		}
	}
	if score < 0.75 {
		return ""
	}
	return best
}

// checkRetry refuses --retry for a node the run does not have, or one that
// has nothing to retry (it completed): bad input, exit 2.
func checkRetry(c *cli.Context, j *journal.Journal, runID string, ids []string) error {
	for _, id := range ids {
		if err := knownNode(c, j, runID, "--retry", id); err != nil {
			return err
		}
		n, err := j.Node(c.Context, runID, id)
		if err != nil {
			return err
		}
		if n.State == journal.NodeCompleted {
			return usageErr(fmt.Errorf("--retry %s: node %s of run %s completed; it has nothing to retry", id, id, runID))
		}
	}
	return nil
}
