//go:build unix

package journal

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The journal holds prompts and outputs: the database and the -wal and -shm
// files SQLite creates beside it are readable by their owner only, whatever
// the umask.
func TestFilesAreOwnerOnly(t *testing.T) {
	t.Parallel()
	old := syscall.Umask(0) // process-wide: this test must not run in parallel
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	createRun(t, j, "r")
	j.Append(Event{RunID: "r", Kind: "k"})
	check(t, j.Flush(context.Background()))
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(p), st.Mode().Perm())
		}
	}
}
