package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/buildinfo"
	"github.com/noderun/noderun/internal/cliword"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
)

// CLI conventions shared by every command, as gh and kubectl behave: a
// --version, flags anywhere on the line (intersperse), "did you mean" for
// unknown commands and flags with a short usage on stderr and exit 2, and
// values checked rather than silently ignored.

// buildCommit is the version `make build` stamps with -ldflags -X (`git
// describe`), for builds where the go command stamps no VCS information
// (GOFLAGS=-buildvcs=false).
var buildCommit string

func versionText() string { return buildinfo.Text(buildCommit) }

// versionCommand is `noderun version`, the same as --version.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version and commit (as --version does)",
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 0, "takes no arguments"); err != nil {
				return err
			}
			_, err := fmt.Fprintln(c.App.Writer, versionText())
			return err
		},
	}
}

// group puts commands in a section of --help.
func group(category string, cmds ...*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.Category = category
	}
	return cmds
}

// otherCategory heads the commands in no group: help, version, completion.
const otherCategory = "Other"

// helpTemplate is urfave/cli's help with the command groups in the order of
// cmds (the library sorts them by name), the ungrouped ones last under
// otherCategory, and one column for every group's descriptions.
func helpTemplate(cmds []*cli.Command) string {
	var order []string
	for _, c := range cmds {
		if c.Category != "" && !slices.Contains(order, c.Category) {
			order = append(order, c.Category)
		}
	}
	var b strings.Builder
	b.WriteString(`{{$cv := offsetCommands .VisibleCommands 5}}`)
	for _, name := range append(order, "") {
		heading := name
		if name == "" {
			heading = otherCategory
		}
		fmt.Fprintf(&b, `{{range .VisibleCategories}}{{if eq .Name %q}}
   %s:{{range .VisibleCommands}}
     {{$s := join .Names ", "}}{{$s}}{{indent (subtract $cv (offset $s 3)) ""}}{{.Usage}}{{end}}{{end}}{{end}}`, name, heading)
	}
	return strings.Replace(cli.AppHelpTemplate, `{{template "visibleCommandCategoryTemplate" .}}`, b.String(), 1)
}

// applyConventions sets shell completion, the grouped help and the
// usage-error handling on the app and every command below it.
func applyConventions(app *cli.App) {
	app.EnableBashCompletion = true
	app.Action = afterParsing(app.Action)
	app.CustomAppHelpTemplate = helpTemplate(app.Commands)
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
			if cmd.Name != "completion" { // it walks the commands, help's too (helpAfresh)
				cmd.Action = afterParsing(cmd.Action)
			}
			walk(path, cmd.Subcommands)
		}
	}
	walk(nil, app.Commands)
}

// parsing lets one App at a time parse its command line. urfave/cli applies
// its package-level HelpFlag to every command it parses, and applying a flag
// writes its default into it: two Apps parsing at once in one process (the
// tests run the CLI in process, side by side; an embedder might) race on it.
// run holds parsing from its start until the command's action begins, or
// until it returns (help, a usage error, a completion, `noderun completion`).
var parsing sync.Mutex

// helpAfresh sets up app and empties the subcommands of its help command.
// urfave/cli's help command is one *Command shared by every App, and running
// it (noderun help, noderun sim help) appends it to its own subcommands: an
// App run after that in the same process, whose fish completion walks every
// command's subcommands, would walk for ever. It runs under parsing, as does
// every other run of help and of completion, so no App walks the commands
// while another changes them.
func helpAfresh(app *cli.App) {
	app.Setup()
	if h := app.Command("help"); h != nil {
		h.Subcommands = nil
	}
}

// parsedKey finds, in an App's metadata, the function that lets go of
// parsing (once) for the run that holds it.
const parsedKey = "parsed"

// afterParsing is action, once the App has let go of parsing: every flag of
// its command line is parsed when an action begins.
func afterParsing(action cli.ActionFunc) cli.ActionFunc {
	if action == nil {
		return nil
	}
	return func(c *cli.Context) error {
		if parsed, ok := c.App.Metadata[parsedKey].(func()); ok {
			parsed()
		}
		return action(c)
	}
}

// usageError turns a flag parse error into exit 2 with a suggestion and a
// short usage line, on stderr; help never goes to stdout on an error.
func usageError(c *cli.Context, cmd *cli.Command, err error) error {
	msg := err.Error()
	flags, name := c.App.Flags, "noderun"
	if cmd != nil {
		flags, name = append(append([]cli.Flag(nil), cmd.Flags...), c.App.Flags...), "noderun "+cmd.FullName()
	}
	msg = cliword.FlagError(msg, flags)
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
	if s := cliword.Suggest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return usageErr(fmt.Errorf("%s\nusage: %s COMMAND [flags]; commands: %s (see: %s --help)", msg, parent, strings.Join(names, ", "), parent))
}

// noHelpTopic is urfave/cli's error for `noderun help nosuch`.
var noHelpTopic = regexp.MustCompile(`^No help topic for '(.*)'$`)

// helpTopicErr says `noderun help nosuch` as an unknown command is said.
func helpTopicErr(app *cli.App, err error) error {
	if m := noHelpTopic.FindStringSubmatch(fmt.Sprint(err)); m != nil && err != nil {
		return unknownCommand("noderun", m[1], app.Commands)
	}
	return err
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
	return usageErr(fmt.Errorf("--%s %q: must be one of %s%s", flag, value, strings.Join(allowed, ", "), cliword.DidYouMean(value, allowed)))
}

// checkProfile refuses a --profile that the run's graph (as journaled, with
// its profiles file) does not know: bad input, exit 2, found before resume
// starts anything.
func checkProfile(c *cli.Context, j *journal.Journal, runID string) error {
	name := c.String("profile")
	if name == "" {
		return nil
	}
	r, err := j.Run(c.Context, runID)
	if err != nil {
		return err
	}
	g, err := runner.ParseGraphWith(r.GraphPath, r.GraphText, runner.Options{})
	if err != nil {
		return nil // resume says so, with the run
	}
	if _, err := runner.Prepare(g, &runner.Options{Profile: name}); err != nil {
		return usageErr(fmt.Errorf("--profile: %w", err))
	}
	return nil
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
