package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/cliword"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/graph"
)

// inputFlag collects --input name=value flags in order. It is a GenericFlag
// rather than a StringSliceFlag, which would split values at commas.
type inputFlag struct{ vals []string }

func (f *inputFlag) Set(v string) error {
	name, _, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("--input %q: want KEY=VALUE, or KEY=@FILE for a file's content", v)
	}
	f.vals = append(f.vals, v)
	return nil
}

func (f *inputFlag) String() string { return strings.Join(f.vals, " ") }

// inputsOf reads the --input flags: name=value, or name=@FILE for the
// content of FILE (for an input of type file, its path). A name given twice
// is an error.
func inputsOf(c *cli.Context, g *runner.Graph, maxBytes int64) (map[string]string, error) {
	f, _ := c.Generic("input").(*inputFlag)
	if f == nil || len(f.vals) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(f.vals))
	for _, v := range f.vals {
		name, val, _ := strings.Cut(v, "=")
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--input %s is given twice", name)
		}
		if path, ok := strings.CutPrefix(val, "@"); ok {
			if in := g.Input(name); in != nil && in.Type == graph.InputFile {
				val = path // the graph reads the file itself, and journals its content
			} else {
				b, err := graph.ReadInput(c.Context, path, maxBytes)
				if err != nil {
					if e := cliword.FileErr("--input "+name+"=@"+path, err); e != err {
						return nil, e
					}
					return nil, fmt.Errorf("--input %s=@%s: %w", name, path, err)
				}
				val = string(b)
			}
		}
		out[name] = val
	}
	return out, nil
}

// maxInputOf is --max-input in bytes.
func maxInputOf(c *cli.Context) (int64, error) {
	s := c.String("max-input")
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > 1<<40 {
		return 0, fmt.Errorf("--max-input %q: give a size such as 8MiB, 64MiB or 1GiB", s)
	}
	return int64(n), nil
}

// inputHint adds the flags' words to an input's error, which the graph
// package leaves to its caller: how to pass a missing input, how to raise
// the bound an input is past.
func inputHint(err error) error {
	if missing := missingInputs(err); len(missing) > 0 {
		var pass []string
		for _, name := range missing {
			pass = append(pass, "--input "+name+"=VALUE")
		}
		err = fmt.Errorf("%w\n  (pass it with %s)", err, strings.Join(pass, " "))
	}
	var big *graph.InputTooLargeError
	if errors.As(err, &big) {
		return fmt.Errorf("%w\n  (raise the bound with --max-input, e.g. --max-input %s)", err, strings.ReplaceAll(humanize.IBytes(uint64(2*big.Limit)), " ", ""))
	}
	return err
}

// missingInputs names the required inputs err says were not given.
func missingInputs(err error) []string {
	ge, ok := errors.AsType[*graph.Error](err)
	if !ok {
		return nil
	}
	var out []string
	for _, p := range ge.Problems {
		if mi, ok := p.Err.(*graph.MissingInputError); ok {
			out = append(out, mi.Name)
		}
	}
	return out
}

// schemaCommand prints the JSON Schema of graph files.
func schemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "schema",
		Usage: "print the JSON Schema of graph files (for editors: docs/graph.md)",
		Description: "Editors that use the YAML language server check and complete graph files that start with\n" +
			"  # yaml-language-server: $schema=PATH-OR-URL-OF-THE-SCHEMA\n" +
			"Save this output (or use docs/graph.schema.json) and point the comment at it.\n\n" +
			"Examples:\n  noderun schema > graph.schema.json   # the JSON Schema of graph files (docs/graph.md)",
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 0, "takes no arguments"); err != nil {
				return err
			}
			_, err := c.App.Writer.Write(graph.Schema())
			return err
		},
	}
}
