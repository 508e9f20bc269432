//go:build unix

package journal

import (
	"errors"
	"syscall"
)

// pidAlive reports whether a process with this pid exists on this host.
// Signal 0 checks without signalling; EPERM means it exists but is not ours.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
