package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
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
			if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
				continue // --generate-bash-completion is the shell's, not the operator's
			}
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, n)
				}
			}
		}
		if s := suggestWord(strings.TrimLeft(bad, "-"), names); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	} else {
		msg = flagError(msg, flags)
	}
	return usageErr(fmt.Errorf("%s\n%s", msg, shortUsage(name, cmd)))
}

// The errors of Go's flag package, which urfave/cli passes on.
var (
	flagNeedsArg  = regexp.MustCompile(`^flag needs an argument: -+(\S+)$`)
	flagBadValue  = regexp.MustCompile(`(?s)^invalid value ("(?:[^"\\]|\\.)*") for flag -+([^:\s]+): (.*)$`)
	flagBadBool   = regexp.MustCompile(`^invalid boolean (?:value ("(?:[^"\\]|\\.)*") for|flag) -*([^:\s]+)`)
	flagBadSyntax = regexp.MustCompile(`^bad flag syntax: (.*)$`)
)

// flagError says a flag parse error of Go's flag package in noderun's words:
// "flag needs an argument: -input" is "--input needs KEY=VALUE".
func flagError(msg string, flags []cli.Flag) string {
	if m := flagNeedsArg.FindStringSubmatch(msg); m != nil {
		f := lookupFlag(flags, m[1])
		return fmt.Sprintf("%s needs %s", flagName(f, m[1]), flagWants(f))
	}
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		if strings.HasPrefix(m[3], "--") { // the flag's own message (--input's)
			return m[3]
		}
		f := lookupFlag(flags, m[2])
		return fmt.Sprintf("%s needs %s, not %s", flagName(f, m[2]), flagWants(f), m[1])
	}
	if m := flagBadBool.FindStringSubmatch(msg); m != nil {
		n := flagName(lookupFlag(flags, m[2]), m[2])
		return fmt.Sprintf("%s takes no value (or %s=false), not %s", n, n, cmp.Or(m[1], "that one"))
	}
	if m := flagBadSyntax.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%q is not a flag: flags are --NAME, --NAME VALUE or --NAME=VALUE", m[1])
	}
	return msg
}

// flagName is how a flag is written: --output for -o.
func flagName(f cli.Flag, name string) string {
	if f != nil {
		name = f.Names()[0]
	}
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// lookupFlag is the flag of flags named name, or nil.
func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// flagWants is what a flag's value is, for an error: the placeholder of its
// usage (`FILE` in "the run journal (`FILE`)"), or its type's.
func flagWants(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		if _, ph, ok := strings.Cut(d.GetUsage(), "`"); ok {
			if ph, _, ok := strings.Cut(ph, "`"); ok && ph != "" {
				return ph
			}
		}
	}
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "a whole number"
	case *cli.Float64Flag:
		return "a number"
	case *cli.DurationFlag:
		return "a duration (500ms, 90s, 10m)"
	}
	return "a value"
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
	return usageErr(fmt.Errorf("--%s %q: must be one of %s%s", flag, value, strings.Join(allowed, ", "), didYouMean(value, allowed)))
}

// didYouMean is `; did you mean "x"?` for the word of words closest to w,
// or "" when none is close enough to be a typo.
func didYouMean(w string, words []string) string {
	if s := suggestWord(w, words); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
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

// fileErr says that a file given on the command line cannot be read, in
// noderun's words: "--prices p.yaml: no such file" rather than Go's
// "open p.yaml: no such file or directory"; flag may end with the path
// already ("--input k=@p.txt"). Any other error is err.
func fileErr(flag string, err error) error {
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok || !strings.HasSuffix(err.Error(), pe.Error()) {
		return err
	}
	why := pe.Err.Error()
	switch {
	case errors.Is(pe.Err, fs.ErrNotExist):
		why = "no such file"
	case errors.Is(pe.Err, fs.ErrPermission):
		why = "permission denied"
	case errors.Is(pe.Err, syscall.EISDIR):
		why = "a directory, not a file"
	}
	if !strings.HasSuffix(flag, pe.Path) {
		flag += " " + pe.Path
	}
	return fmt.Errorf("%s: %s", flag, why)
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
