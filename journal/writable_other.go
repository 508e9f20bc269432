//go:build !unix

package journal

// writable cannot tell here without opening the file, so it says no: a
// read-only journal then leaves an empty -wal it recreated (see sweep).
func writable(string) bool { return false }
