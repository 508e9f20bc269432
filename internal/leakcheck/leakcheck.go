// Package leakcheck fails a test binary whose tests leave goroutines of
// noderun's providers or of HTTP connections behind: everything a test opens
// (a stream, a simulator, a connection) must be closed by the time it ends.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main is a TestMain: it runs the tests and, if they passed, fails the
// binary when such goroutines outlive them by more than 5 s.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := Leftover(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Leftover waits up to wait for the goroutines of noderun's providers and
// of HTTP connections to end, and returns the stacks of those still there.
func Leftover(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var bad []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "leakcheck.Leftover(") {
				continue // this one
			}
			if strings.Contains(g, "noderun/provider/") || strings.Contains(g, "net/http.(*persistConn)") || strings.Contains(g, "net/http.(*conn).serve") {
				bad = append(bad, g)
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return strings.Join(bad, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
