package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// intersperse moves a command's flags in front of its positional arguments,
// so `noderun events RUN --node a` works: urfave/cli v2 stops reading flags
// at the first positional argument. Global flags given after the command
// move in front of it, and an unknown flag stays a flag, so that it is
// reported (with a suggestion) rather than taken for an argument.
//
// A shell's completion request keeps its flag last, where urfave/cli looks.
func intersperse(app *cli.App, args []string) []string {
	if line, ok := completionArgs(args); ok {
		return append(intersperse(app, line), completionFlag)
	}
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	flags := app.Flags
	cmds := app.Commands
	for len(rest) > 0 {
		// Global or parent flags stay where they are.
		n := flagLen(flags, rest)
		if n > 0 {
			out, rest = append(out, rest[:n]...), rest[n:]
			continue
		}
		cmd := findCommand(cmds, rest[0])
		if cmd == nil {
			break
		}
		out, rest = append(out, rest[0]), rest[1:]
		flags, cmds = cmd.Flags, cmd.Subcommands
		if len(cmds) == 0 {
			break
		}
	}
	var global, fl, pos, last []string
	for len(rest) > 0 {
		if rest[0] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 1 && flagLen(flags, rest) == 1 && flagLen(flags, []string{rest[0], ""}) == 2 {
			// A flag that wants a value comes last without one: the parser
			// must reach it to say so, so the arguments go (the line is an
			// error whatever they are).
			last, pos, rest = rest, nil, nil
			break
		}
		if n := flagLen(flags, rest); n > 0 {
			fl, rest = append(fl, rest[:n]...), rest[n:]
			continue
		}
		if len(out) > 1 {
			if n := flagLen(app.Flags, rest); n > 0 {
				global, rest = append(global, rest[:n]...), rest[n:]
				continue
			}
		}
		if len(out) > 1 && len(rest[0]) > 1 && rest[0][0] == '-' {
			fl, rest = append(fl, rest[0]), rest[1:] // unknown: let the parser name it
			continue
		}
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	out = append(append([]string{out[0]}, global...), out[1:]...)
	return append(append(append(out, fl...), pos...), last...)
}

// flagLen is how many arguments the flag at the head of args takes up (0 if
// it is not one of flags): 1 for booleans and --name=value, else 2.
func flagLen(flags []cli.Flag, args []string) int {
	a := args[0]
	if len(a) < 2 || a[0] != '-' || a == "--" {
		return 0
	}
	name := strings.TrimLeft(a, "-")
	name, _, hasValue := strings.Cut(name, "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if _, isBool := f.(*cli.BoolFlag); isBool || hasValue || len(args) == 1 {
				return 1
			}
			return 2
		}
	}
	return 0
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
