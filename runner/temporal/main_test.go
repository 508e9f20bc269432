package temporal_test

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
	"go.temporal.io/sdk/worker"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// One Temporal dev server (the real Temporal CLI, built by `make tools` into
// .tools/bin) serves every test and benchmark of the package: it takes
// seconds to start. Tests that need it fail, never skip, when it is missing.
var dev struct {
	once     sync.Once
	err      error
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	hostPort string
	log      *testkit.Buffer // the server's output, read when it fails to start
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopDev()
	noderun.Remove()
	os.Exit(code)
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1. It
// holds each until it has them all: a port closed at once may be handed out
// again by the next ask (the dev server once got the same port for its
// frontend and its HTTP API, and could not start).
func freePorts(n int) ([]int, error) {
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

// devServer returns the shared dev server's frontend address, starting it on
// first use.
func devServer(t testing.TB) string {
	t.Helper()
	dev.once.Do(func() { dev.err = startDev() })
	if dev.err != nil {
		t.Fatalf("Temporal dev server: %v", dev.err)
	}
	return dev.hostPort
}

func startDev() error {
	root, err := testkit.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, ".tools", "bin", "temporal")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is missing: run `make tools` (it builds the pinned Temporal CLI): %w", bin, err)
	}
	// Between asking for free ports and the server binding them, another
	// process may take one: then the server exits, and it is started again
	// on other ports.
	for try := 1; ; try++ {
		err = startDevOnce(bin)
		if err == nil || try == 3 || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		stopDev()
	}
}

// stopDev stops the dev server, if one was started, and waits for it.
func stopDev() {
	if dev.cmd == nil || dev.cmd.Process == nil {
		return
	}
	terminate(dev.cmd, dev.exited, 10*time.Second)
	dev.cmd = nil
}

// terminate asks cmd's process to stop (SIGTERM) and waits until exited is
// closed, killing the process if it is still there after grace.
func terminate(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func startDevOnce(bin string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	dev.hostPort = "127.0.0.1:" + strconv.Itoa(ports[0])
	dev.log = &testkit.Buffer{}
	dev.cmd = exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]), "--ui-port", strconv.Itoa(ports[1]), "--http-port", strconv.Itoa(ports[2]),
		"--metrics-port", strconv.Itoa(ports[3]), "--log-level", "error") // in memory
	dev.cmd.Stdout, dev.cmd.Stderr = dev.log, dev.log
	if err := dev.cmd.Start(); err != nil {
		dev.cmd = nil
		return err
	}
	exited := make(chan struct{})
	dev.exited = exited
	cmd := dev.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		c, err := ntemporal.Dial(ctx, dev.hostPort, "default", "probe", nil)
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after 90s: %v\n%s", err, dev.log.String())
		case <-exited:
			return fmt.Errorf("exited before it was ready: %s", dev.log.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func dialDev(t testing.TB) client.Client {
	t.Helper()
	c, err := ntemporal.Dial(context.Background(), devServer(t), "default", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// noderun is the CLI: workers are real processes to kill -9.
var noderun testkit.CLI

// startWorker runs acts in this process on queue, with a journal of its
// own at dbPath, until the test ends (the worker stops before its journal
// closes).
func startWorker(tb testing.TB, c client.Client, queue, dbPath string, acts *ntemporal.Activities) {
	tb.Helper()
	acts.Journal = testkit.OpenJournal(tb, dbPath)
	w := ntemporal.NewWorker(c, queue, acts, worker.Options{})
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
}

// ciInput is g's run input on the ci profile, under a new run id that
// starts with prefix.
func ciInput(tb testing.TB, prefix string, g *runner.Graph) ntemporal.RunInput {
	tb.Helper()
	prof, err := profile.Set(profile.Builtins()).Get("ci")
	if err != nil {
		tb.Fatal(err)
	}
	return ntemporal.RunInput{RunID: fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()), GraphPath: g.Path,
		GraphText: string(g.Source), Profile: prof}
}
