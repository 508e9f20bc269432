package journal

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Issue 46: a journal that cannot be created in a read-only directory is
// told where to go, not to "continue its runs" (it has none); one that
// exists but cannot be written is told to be copied.
func TestCreateErrorFitsTheCase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.db")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, want, not string
		err             error
	}{
		{filepath.Join(dir, "new.db"), "the directory " + dir + " is not writable; put the journal in one that is", "continue its runs", fs.ErrPermission},
		{filepath.Join(dir, "new.db"), "is not writable", "continue its runs", syscall.EROFS},
		{existing, "copy it somewhere writable to continue its runs", "directory", fs.ErrPermission},
	}
	for _, c := range cases {
		got := (&Journal{path: c.path}).createError(&fs.PathError{Op: "open", Path: c.path, Err: c.err}).Error()
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("%s (%v): %q; want it to say %q and not %q", c.path, c.err, got, c.want, c.not)
		}
	}
}
