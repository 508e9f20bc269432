package journal

import "os"

// DiskSize is the bytes the journal at path takes on disk: its file and its
// write-ahead log (-wal), each counted when it exists. The shared-memory
// index (-shm) is not: SQLite rebuilds it, and it holds no data.
func DiskSize(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if st, err := os.Stat(path + suffix); err == nil {
			n += st.Size()
		}
	}
	return n
}
