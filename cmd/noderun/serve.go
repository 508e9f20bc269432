package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/server"
)

// defaultServeAddr is where serve (and run --serve without an address) listens.
const defaultServeAddr = "127.0.0.1:8080"

func serveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "token-env", Usage: "the variable `NAME` holding the token every request needs"},
	}
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve a journal over HTTP: a live page, an API, event streams",
		ArgsUsage: " ",
		Description: "Serves one journal: the runs started by other `noderun run` processes on it and the runs started\n" +
			"through it, which run in this process. The API's bodies are the --json documents; a run's events are\n" +
			"server-sent events that resume with Last-Event-ID (docs/http.md).\n\nExamples:\n" +
			"  noderun serve                                   # http://127.0.0.1:8080/ for ./noderun.db\n" +
			"  noderun serve --db ci.db --addr 127.0.0.1:0     # a port of its own choosing\n" +
			"  NODERUN_TOKEN=$(openssl rand -hex 16) noderun serve --addr :8080 --token-env NODERUN_TOKEN\n" +
			"  noderun serve --temporal 127.0.0.1:7233         # the runs on Temporal too (their figures; not their tokens live)\n\n" +
			"Off a loopback address a token is required (--token-env); writes always need one.",
		Flags: append([]cli.Flag{dbFlag(),
			&cli.StringFlag{Name: "addr", Value: defaultServeAddr, Usage: "listen on `HOST:PORT` (:0 picks a port)"},
			&cli.StringFlag{Name: "dir", Value: ".", Usage: "the `DIR` whose graph files a run started through the server may name", TakesFile: true},
			&cli.StringFlag{Name: "profile", Usage: "the recovery `PROFILE` of runs started through the server"},
			&cli.IntFlag{Name: "parallel", Value: 4, Usage: "nodes a run started through the server runs at once"},
			&cli.BoolFlag{Name: "sim", Usage: "runs started here run every provider on the embedded simulator"},
			&cli.StringFlag{Name: "prices", Usage: "price table `FILE` for diagnose's figures", TakesFile: true},
			&cli.StringFlag{Name: "temporal", Usage: "also show the runs on the Temporal frontend at `HOST:PORT`", EnvVars: []string{"NODERUN_TEMPORAL"}},
			&cli.StringFlag{Name: "namespace", Value: "default", Usage: "--temporal: the Temporal namespace"},
		}, serveFlags()...),
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 0, "takes no arguments (the journal is --db)"); err != nil {
				return err
			}
			if c.Int("parallel") < 1 {
				return usageErr(errors.New("--parallel must be at least 1"))
			}
			if err := checkCompanions(c); err != nil {
				return err
			}
			token, err := serveToken(c, c.String("addr"))
			if err != nil {
				return err
			}
			prices, err := pricesOf(c)
			if err != nil {
				return err
			}
			if st, err := os.Stat(c.String("dir")); err != nil || !st.IsDir() {
				return usageErr(fmt.Errorf("--dir %s: not a directory", c.String("dir")))
			}
			log, err := newLogger(c)
			if err != nil {
				return err
			}
			var tmp *server.Temporal
			if addr := c.String("temporal"); addr != "" {
				tc, err := dialTemporal(c, "")
				if err != nil {
					return err
				}
				defer tc.Close()
				tmp = &server.Temporal{Client: tc, Address: addr}
			}
			path := c.String("db")
			if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
				// A new journal: runs are started through the server.
				j, err := journal.Open(c.Context, path, journal.WithLogger(log))
				if err != nil {
					return journalErr(err)
				}
				if err := j.Close(); err != nil {
					return journalErr(err)
				}
			}
			rj, err := openForReading(c)
			if err != nil {
				return err
			}
			defer rj.Close()
			opts := runner.Options{Profile: c.String("profile"), Parallel: c.Int("parallel"), Logger: log, JournalArg: strings.TrimSpace(dbArg(c))}
			if c.Bool("sim") {
				opts.Sim = &runner.SimOptions{}
			}
			local := &server.Local{DB: path, Dir: c.String("dir"), Options: opts, JournalOptions: []journal.Option{journal.WithLogger(log)}}
			srv, err := server.New(server.Options{Journal: rj, Token: token, Actions: local, Prices: prices, Logger: log,
				Temporal: tmp, LoopbackOnly: token == ""})
			if err != nil {
				return err
			}
			ln, err := listen(c, c.String("addr"))
			if err != nil {
				return err
			}
			url := "http://" + ln.Addr().String() + "/"
			fmt.Fprintln(c.App.Writer, url)
			fmt.Fprintf(c.App.ErrWriter, "noderun: serving %s at %s (Ctrl-C stops; runs started here are then interrupted, resumable)\n", path, url)
			if token == "" {
				fmt.Fprintf(c.App.ErrWriter, "noderun: writes (POST) need: Authorization: Bearer %s\n", srv.WriteToken())
			}
			err = srv.Serve(c.Context, ln)
			if cerr := local.Close(); cerr != nil && err == nil {
				err = cerr
			}
			if c.Context.Err() != nil {
				return &exitError{exitInterrupted, errors.New("")}
			}
			return err
		},
	}
}

// serveToken reads the token --token-env names; off a loopback address the
// server refuses to start without one.
func serveToken(c *cli.Context, addr string) (string, error) {
	token := ""
	if name := c.String("token-env"); name != "" {
		token = os.Getenv(name)
		if token == "" {
			return "", usageErr(fmt.Errorf("--token-env %s: the variable is empty or unset", name))
		}
		if len(token) < 16 {
			return "", usageErr(fmt.Errorf("--token-env %s: the token is %d characters; give at least 16 (e.g. openssl rand -hex 16)", name, len(token)))
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usageErr(fmt.Errorf("--addr %s: want HOST:PORT (e.g. 127.0.0.1:8080, :0)", addr))
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && token == "" {
		where := host
		if where == "" {
			where = "every interface"
		}
		return "", usageErr(fmt.Errorf("--addr %s: serving on %s needs a token: set one in a variable and name it with --token-env NAME", addr, where))
	}
	return token, nil
}

// listen opens the server's socket; a port in use is the operator's to fix.
func listen(c *cli.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(c.Context, "tcp", addr)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--addr %s: %w", addr, err))
	}
	return ln, nil
}

// serveAddrRe is what `run --serve` takes for its address when one follows it.
var serveAddrRe = regexp.MustCompile(`^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]*):[0-9]{1,5}$`)

// serveOptional lets `run --serve` go without a value: a bare --serve (one
// not followed by an address) listens on defaultServeAddr.
func serveOptional(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "--serve" || a == "-serve" {
			if i+1 < len(args) && serveAddrRe.MatchString(args[i+1]) {
				out = append(out, "--serve="+args[i+1])
				i++
				continue
			}
			out = append(out, "--serve="+defaultServeAddr)
			continue
		}
		out = append(out, a)
	}
	return out
}

// startRunServer serves the journal of a run while it runs (run --serve:
// reads only); the page's URL goes to stderr. Call it once the journal is
// open, and the stop it returns once the run has ended: it gives the
// watchers a moment to hear the end.
func startRunServer(c *cli.Context, runID string) (stop func(), err error) {
	addr := c.String("serve")
	token, err := serveToken(c, addr)
	if err != nil {
		return nil, err
	}
	rj, err := journal.OpenReadOnly(c.Context, c.String("db"))
	if err != nil {
		return nil, journalErr(err)
	}
	srv, err := server.New(server.Options{Journal: rj, Token: token, LoopbackOnly: token == ""})
	if err != nil {
		rj.Close()
		return nil, err
	}
	ln, err := listen(c, addr)
	if err != nil {
		rj.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.Context))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	fmt.Fprintf(c.App.ErrWriter, "noderun: watch the run at http://%s/runs/%s\n", ln.Addr(), runID)
	return func() {
		// The page hears the run's end: its poll reads the status a few
		// times a second.
		time.Sleep(time.Second)
		cancel()
		<-done
		_ = rj.Close()
	}, nil
}
