package testkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// FreePorts asks the kernel for n distinct free ports on 127.0.0.1. It
// holds each until it has them all: a port closed at once may be handed out
// again by the next ask (the Temporal dev server once got the same port for
// its frontend and its HTTP API, and could not start).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// Terminate asks cmd's process to stop (SIGTERM) and waits until exited is
// closed, killing the process if it is still there after grace.
func Terminate(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Tool is the path of a program `make tools` builds into .tools/bin; a
// test that needs it fails, never skips, when it is missing.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	RealPeer(tb, name)
	p, err := toolPath(name)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func toolPath(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, ".tools", "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is missing: run `make tools` (it installs it): %w", p, err)
	}
	return p, nil
}

// TemporalDev is a Temporal dev server (the pinned Temporal CLI, in
// memory, on 127.0.0.1 ports of its own) that a test package shares: it
// takes seconds to start. HostPort starts it on first use; the package's
// TestMain calls Stop.
type TemporalDev struct {
	once     sync.Once
	err      error
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	hostPort string
	log      *Buffer // the server's output, read when it fails to start
}

// HostPort is the dev server's frontend address, once it answers.
func (d *TemporalDev) HostPort(tb testing.TB) string {
	tb.Helper()
	RealPeer(tb, "the Temporal dev server")
	d.once.Do(func() { d.err = d.start() })
	if d.err != nil {
		tb.Fatalf("Temporal dev server: %v", d.err)
	}
	return d.hostPort
}

func (d *TemporalDev) start() error {
	bin, err := toolPath("temporal")
	if err != nil {
		return err
	}
	// Between asking for free ports and the server binding them, another
	// process may take one: then the server exits, and it is started again
	// on other ports.
	for try := 1; ; try++ {
		err = d.startOnce(bin)
		if err == nil || try == 3 || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		d.Stop()
	}
}

func (d *TemporalDev) startOnce(bin string) error {
	ports, err := FreePorts(4)
	if err != nil {
		return err
	}
	d.hostPort = "127.0.0.1:" + strconv.Itoa(ports[0])
	d.log = &Buffer{}
	d.cmd = exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]), "--ui-port", strconv.Itoa(ports[1]), "--http-port", strconv.Itoa(ports[2]),
		"--metrics-port", strconv.Itoa(ports[3]), "--log-level", "error", // in memory
		// Four partitions a task queue, as a cluster has by default (the dev
		// server has one), so that wide runs are measured as they would run.
		"--dynamic-config-value", "matching.numTaskqueueReadPartitions=4",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=4")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := d.cmd.Start(); err != nil {
		d.cmd = nil
		return err
	}
	exited := make(chan struct{})
	d.exited = exited
	cmd := d.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	// The frontend takes connections a little before it serves: ready is
	// when it answers a health check.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		c, err := client.DialContext(ctx, client.Options{HostPort: d.hostPort, Logger: quietLogger{}})
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after 90s: %v\n%s", err, d.log.String())
		case <-exited:
			return fmt.Errorf("exited before it was ready: %s", d.log.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pid is the dev server's process id; 0 before it has started.
func (d *TemporalDev) Pid() int {
	if d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Stop stops the dev server, if one was started, and waits for it.
func (d *TemporalDev) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	Terminate(d.cmd, d.exited, 10*time.Second)
	d.cmd = nil
}

// quietLogger keeps the SDK's connection chatter out of the tests' output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
