package temporal_test

import (
	"context"
	"fmt"
	"os"
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
var dev testkit.TemporalDev

func TestMain(m *testing.M) {
	// The parallel tests here wait (on heartbeats, workers' processes and
	// Temporal's retries of a failing workflow task, 50 s), not on the CPU:
	// all at once, not two at a time (at -parallel 2 the last, 50 s of
	// waiting, started 145 s in and ran alone).
	testkit.ParallelUnlessSet(16)
	code := m.Run()
	dev.Stop()
	noderun.Remove()
	os.Exit(code)
}

// devServer returns the shared dev server's frontend address, starting it on
// first use.
func devServer(t testing.TB) string { return dev.HostPort(t) }

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
	w, err := ntemporal.NewWorker(c, queue, acts, worker.Options{})
	if err != nil {
		tb.Fatal(err)
	}
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
