//go:build unix

package journal

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// writable tells whether this user may write path and create and remove
// files beside it (access(2): the mode, the owner, a read-only mount).
func writable(path string) bool {
	return unix.Access(path, unix.W_OK) == nil && unix.Access(filepath.Dir(path), unix.W_OK) == nil
}
