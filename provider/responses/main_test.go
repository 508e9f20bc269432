package responses

import (
	"testing"

	"github.com/noderun/noderun/internal/leakcheck"
)

// TestMain fails the package if goroutines of the adapter or the simulator
// outlive the tests: everything a test opens is closed.
func TestMain(m *testing.M) { leakcheck.Main(m) }
