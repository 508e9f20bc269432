//go:build unix

package benchstat

import (
	"syscall"
	"time"
)

// CPUTime is the process's user+system CPU time (0 where unknown).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
