package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// A journal's size on disk is its file's and its WAL's, whichever exist.
func TestDiskSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	for _, c := range []struct {
		name  string
		files map[string]int
		want  int64
	}{
		{"nothing there", nil, 0},
		{"the file alone", map[string]int{"j.db": 4096}, 4096},
		{"with its WAL, not its index", map[string]int{"j.db": 4096, "j.db-wal": 1000, "j.db-shm": 32768}, 5096},
	} {
		for name, n := range c.files {
			if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := DiskSize(path); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}
