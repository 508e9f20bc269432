package heapfloor

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
)

// resident is this process's resident memory, from the kernel.
func resident(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm (%v): resident memory is Linux's to tell here", err)
	}
	pages, err := strconv.ParseInt(strings.Fields(string(b))[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// The floor is what the design relies on: counted by the collector (its
// next goal at least twice the floor), given no memory by the kernel, and
// let go at release. It is checked in a process of its own, as a command
// holds it at its start: memory the heap freed earlier and still holds
// (an earlier run of this test under -count) is cleared when reused, and
// then resident.
func TestFloorCountsForTheCollectorButNotInMemory(t *testing.T) {
	if os.Getenv("HEAPFLOOR_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HEAPFLOOR_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	const size = 64 << 20
	goal := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NextGC
	}
	without := goal()
	before := resident(t)
	release := Hold(size)
	if g := goal(); g < 2*size {
		t.Errorf("with a %d MiB floor the next collection is at %d MiB: the floor does not count", size>>20, g>>20)
	}
	// Not under the race detector: there 1 run in 10, each in a fresh
	// process, found the floor resident (the race runtime's own path for
	// an allocation; the command is built without it). make test runs
	// this package once more without -race for this check.
	if grew := resident(t) - before; grew > size/4 && !testkit.Race {
		t.Errorf("holding the floor made the process %d MiB larger: it is in memory", grew>>20)
	}
	release()
	release = nil
	if g := goal(); g >= 2*size {
		t.Errorf("after release the next collection is still at %d MiB (%d MiB before the floor): it was kept", g>>20, without>>20)
	}
}
