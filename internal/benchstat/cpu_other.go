//go:build !unix

package benchstat

import "time"

// CPUTime is the process's user+system CPU time (0 where unknown).
func CPUTime() time.Duration { return 0 }
