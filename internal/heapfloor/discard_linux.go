package heapfloor

import (
	"os"
	"syscall"
	"unsafe"
)

// discard gives b's whole pages back to the kernel (MADV_DONTNEED): they
// read as zeros afterwards, as the pages of a private anonymous mapping,
// which the Go heap is. It is only for memory that holds zeros and is
// never written. A failure leaves b as it was: resident, and correct.
func discard(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) == 0 {
		return
	}
	start := (addr(b) + page - 1) &^ (page - 1)
	end := (addr(b) + uintptr(len(b))) &^ (page - 1)
	if end <= start {
		return
	}
	lo := start - addr(b)
	_ = syscall.Madvise(b[lo:lo+(end-start)], syscall.MADV_DONTNEED)
}

// addr is where b's bytes start.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
