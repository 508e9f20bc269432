// Command noderun runs goal graphs whose nodes make long streaming LLM calls,
// journals every chunk in SQLite, and recovers dropped streams instead of
// failing the node.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/noderun/noderun/internal/humanlog"
	"github.com/noderun/noderun/internal/textfit"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // a node failed or was skipped
	exitUsage       = 2 // bad flags, bad graph, bad profile: nothing was written
	exitInterrupted = 130
)

// exitError carries an exit code through urfave/cli.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error { return &exitError{exitUsage, err} }

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is main without the process: tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, sig := watchSignals(context.Background())
	defer sig.stop()
	app := newApp(stdout, &lockedWriter{w: stderr})
	parsing.Lock()
	parsed := sync.OnceFunc(parsing.Unlock)
	defer parsed()
	app.Metadata = map[string]any{signalsKey: sig, parsedKey: parsed}
	helpAfresh(app)
	if line, ok := completionArgs(args); ok && slices.Contains(line[1:], "--") {
		return exitOK // the shell asks for completions after "--": arguments only, nothing to offer (and nothing runs)
	}
	err := helpTopicErr(app, app.RunContext(ctx, intersperse(app, serveOptional(args))))
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			printErr(stderr, ee.err)
		}
		return ee.code
	}
	printErr(stderr, err)
	return exitUsage
}

// printErr says err on stderr, each of its lines fitted to a terminal.
func printErr(stderr io.Writer, err error) {
	width := outWidth(stderr)
	for _, l := range strings.Split("noderun: "+err.Error(), "\n") {
		fmt.Fprintln(stderr, textfit.Line(l, width))
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "noderun",
		Usage:     "run LLM goal graphs; a dropped stream does not lose the node",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "diagnostics on stderr: debug, info, warn, error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "the log on stderr: text (for people), logfmt or json"},
			&cli.BoolFlag{Name: "version", Usage: "print the version and commit, and exit"},
		},
		Before: func(c *cli.Context) error {
			if err := oneOf("log-level", c.String("log-level"), "debug", "info", "warn", "error"); err != nil {
				return err
			}
			return oneOf("log-format", c.String("log-format"), "text", "logfmt", "json")
		},
		Action:         rootAction,
		ExitErrHandler: func(*cli.Context, error) {}, // run() maps errors to exit codes
		Commands: slices.Concat( // the groups of --help, in this order
			group("Run", runCommand(), resumeCommand(), cancelCommand(), compactCommand(), deleteCommand(), pruneCommand()),
			group("Inspect", serveCommand(), statusCommand(), eventsCommand(), showCommand(), diagnoseCommand(), reportCommand()),
			group("Test", validateCommand(), schemaCommand(), profilesCommand(), pricesCommand(), simCommand(), chaosCommand()),
			group("Scale out", workerCommand()),
			group("", versionCommand(), completionCommand()), // with help, under otherCategory
		),
	}
	applyConventions(app)
	return app
}

// newLogger writes the log to stderr: sentences for a person (fitted to the
// terminal, or to humanlog.PipeWidth on a pipe), or every attribute as logfmt or JSON.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	return newLoggerTo(c, c.App.ErrWriter, termWidth(c.App.ErrWriter))
}

// newLoggerTo writes the log to w; width is the terminal's columns when w is
// one (nil for a pipe or a file).
func newLoggerTo(c *cli.Context, w io.Writer, width func() int) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usageErr(fmt.Errorf("--log-level: %w", err))
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: humanlog.BoundAttr}
	switch c.String("log-format") {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "logfmt":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(humanlog.New(w, lvl, width)), nil
}

// termWidth reads the columns of the terminal behind w, per call (it may be
// resized); nil when w is not a terminal.
func termWidth(w io.Writer) func() int {
	f, ok := terminalFile(w)
	if !ok {
		return nil
	}
	return func() int {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
		return 80
	}
}

// terminalFile is the terminal behind w, if it is one.
func terminalFile(w io.Writer) (*os.File, bool) {
	if lw, ok := w.(*lockedWriter); ok {
		w = lw.w
	}
	f, ok := w.(*os.File)
	return f, ok && isatty.IsTerminal(f.Fd())
}

// lockedWriter serialises writes: diagnostics (slog) and progress lines share
// stderr from many goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// outWidth is the columns a table on w may use: the terminal's, or 0 for a
// pipe or a file (where a view fits a table to view.PipeWidth).
func outWidth(w io.Writer) int {
	if width := termWidth(w); width != nil {
		return width()
	}
	return 0
}
