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
	"sync"

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
	err := app.RunContext(ctx, intersperse(app, args))
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
	return &cli.App{
		Name:      "noderun",
		Usage:     "run goal graphs of streaming LLM calls without losing a node to a dropped socket",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "diagnostics on stderr: debug, info, warn, error"},
		},
		ExitErrHandler: func(*cli.Context, error) {}, // run() maps errors to exit codes
		Commands: []*cli.Command{
			runCommand(), resumeCommand(), cancelCommand(), statusCommand(), eventsCommand(), showCommand(),
			validateCommand(), profilesCommand(), simCommand(), workerCommand(),
		},
	}
}

// newLogger writes diagnostics to stderr: key=value lines, or short lines
// for a person when stderr is a terminal.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usageErr(fmt.Errorf("--log-level: %w", err))
	}
	w := c.App.ErrWriter
	if isTerminal(w) {
		return slog.New(&compactHandler{w: w, level: lvl}), nil
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
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
