package server_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/leakcheck"
	"github.com/noderun/noderun/internal/testkit"
)

// cli is the noderun command, built once for every test of the package that
// runs it as a process of its own (a runner killed -9, `noderun serve`,
// `noderun events --json` as the reference of a stream).
var cli testkit.CLI

// TestMain removes the built command, and fails the binary when a test left
// the goroutines of a stream or an HTTP connection behind.
func TestMain(m *testing.M) {
	code := m.Run()
	cli.Remove()
	if code == 0 {
		if leaked := leakcheck.Leftover(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
