package gemini

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if goroutines of the adapter or the simulator
// outlive the tests: everything a test opens is closed.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leftover(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func leftover(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var bad []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "gemini.leftover(") {
				continue
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
