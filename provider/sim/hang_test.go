package sim

import (
	"fmt"
	"testing"
	"time"
)

func FuzzHang(f *testing.F) {
	f.Add([]byte("seed: 1\ntokens: 5\nsilence: 1s\nfaults:\n  - {kind: close, after_events: 2, requests: [1, 2]}\n"))
	f.Add([]byte("faults:\n  - kind: status\n    status: 429\n    retry_after: 5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				panic(fmt.Sprintf("HANG on %q", data))
			}
		}()
		ParseConfig(data)
		close(done)
	})
}
