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
	"sync"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"
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
	app.Metadata = map[string]any{signalsKey: sig}
	if line, ok := completionArgs(args); ok && slices.Contains(line[1:], "--") {
		return exitOK // the shell asks for completions after "--": arguments only, nothing to offer (and nothing runs)
	}
	err := helpTopicErr(app, app.RunContext(ctx, intersperse(app, args)))
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "noderun:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "noderun:", err)
	return exitUsage
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "noderun",
		Usage:     "run LLM goal graphs; a dropped stream does not lose the node",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "diagnostics on stderr: debug, info, warn, error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "diagnostics on stderr when it is not a terminal: text (key=value) or json"},
			&cli.BoolFlag{Name: "version", Usage: "print the version and commit, and exit"},
		},
		Before: func(c *cli.Context) error {
			if err := oneOf("log-level", c.String("log-level"), "debug", "info", "warn", "error"); err != nil {
				return err
			}
			return oneOf("log-format", c.String("log-format"), "text", "json")
		},
		Action:         rootAction,
		ExitErrHandler: func(*cli.Context, error) {}, // run() maps errors to exit codes
		Commands: slices.Concat( // the groups of --help, in this order
			group("Run", runCommand(), resumeCommand(), cancelCommand()),
			group("Inspect", statusCommand(), eventsCommand(), showCommand(), diagnoseCommand(), reportCommand()),
			group("Test", validateCommand(), schemaCommand(), profilesCommand(), simCommand(), chaosCommand()),
			group("Scale out", workerCommand()),
			group("", versionCommand(), completionCommand()), // with help, under otherCategory
		),
	}
	applyConventions(app)
	return app
}

// newLogger writes diagnostics to stderr: key=value lines, or short lines
// for a person when stderr is a terminal.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	return newLoggerTo(c, c.App.ErrWriter, isTerminal(c.App.ErrWriter))
}

// newLoggerTo writes diagnostics to w: short lines for a person when tty.
func newLoggerTo(c *cli.Context, w io.Writer, tty bool) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usageErr(fmt.Errorf("--log-level: %w", err))
	}
	if tty {
		return slog.New(&compactHandler{w: w, level: lvl}), nil
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: boundAttr}
	if c.String("log-format") == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// maxLogValue bounds one message or value on stderr: a server's error body
// (kept to 8 KiB) is quoted whole in the journal, not on every log line.
const maxLogValue = 2 << 10

// bounded cuts s to maxLogValue bytes, saying how long it was.
func bounded(s string) string {
	if len(s) <= maxLogValue {
		return s
	}
	cut := maxLogValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [%d bytes; the journal has it whole]", s[:cut], len(s))
}

func boundAttr(_ []string, a slog.Attr) slog.Attr {
	switch {
	case a.Value.Kind() == slog.KindString && len(a.Value.String()) > maxLogValue:
		return slog.String(a.Key, bounded(a.Value.String()))
	case a.Value.Kind() == slog.KindAny:
		if err, ok := a.Value.Any().(error); ok && len(err.Error()) > maxLogValue {
			return slog.String(a.Key, bounded(err.Error()))
		}
	}
	return a
}

func isTerminal(w io.Writer) bool {
	if lw, ok := w.(*lockedWriter); ok {
		w = lw.w
	}
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
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
