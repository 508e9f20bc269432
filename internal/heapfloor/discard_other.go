//go:build !linux

package heapfloor

// discard leaves b as it is where there is no MADV_DONTNEED to rely on.
func discard(b []byte) {}
