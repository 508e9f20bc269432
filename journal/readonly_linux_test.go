package journal

import (
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs on dir, unmounted when the test ends; false if
// this process may not mount.
func mountTmpfs(t *testing.T, dir string) bool {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Logf("cannot mount a tmpfs (%v): using a directory without write permission", err)
		return false
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return true
}

func remountReadOnly(t *testing.T, dir string) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size=16m"); err != nil {
		t.Fatal(err)
	}
}
