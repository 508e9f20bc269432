// Package dirstate describes a directory's files for tests that prove a
// command left it as it was (a read of a journal creates nothing beside it).
// It is apart from internal/testkit, which the journal's own tests cannot
// import (testkit imports the journal).
package dirstate

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Of lists dir: each file's name and size and, but for a -shm (SQLite's
// shared memory, which a reader may write), a hash of its bytes. Two equal
// results mean no file was created, removed or changed.
func Of(tb testing.TB, dir string) string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil {
			tb.Fatal(err)
		}
		s := fmt.Sprintf("%s(%d", e.Name(), st.Size())
		if st.Mode().IsRegular() && !strings.HasSuffix(e.Name(), "-shm") {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			s += fmt.Sprintf(" %x", sha256.Sum256(b))[:13]
		}
		out = append(out, s+")")
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
