package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log a writer's goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Vacuum rewrites the file only when no other writer has it open: a second
// writable Journal (another process's run, here another open file
// description) makes it ErrInUse, and the file is left as it was; once that
// writer has closed, it vacuums.
func TestVacuumWaitsForNoOtherWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	other, err := Open(ctx, path, WithLogger(quiet))
	check(t, err)
	if err := j.Vacuum(ctx); !errors.Is(err, ErrInUse) {
		t.Fatalf("vacuum beside another writer: %v, want ErrInUse", err)
	}
	createRun(t, other, "after") // the other writer still writes: nothing was taken from it
	check(t, other.Close())
	check(t, j.Vacuum(ctx))
	check(t, j.Vacuum(ctx)) // and again: the shared lock came back after each
	if b, err := os.ReadFile(path + LockSuffix); err != nil || len(b) != 0 {
		t.Fatalf("the lock file after a vacuum: %q, %v (want empty: nobody holds it)", b, err)
	}
}

// A writer that opens while another process rewrites the journal waits for
// it, saying which process it waits for, and then opens; its context ends
// the wait.
func TestOpenWaitsForARewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	var log lockedBuffer
	opened := make(chan error, 1)
	var waited *Journal
	err := j.exclusive(ctx, "vacuum", func() error {
		go func() {
			var err error
			waited, err = Open(ctx, path, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			opened <- err
		}()
		says := fmt.Sprintf("pid %d on host", os.Getpid())
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), says); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("the waiting writer does not say whom it waits for:\n%s", log.String())
			}
		}
		select {
		case err := <-opened:
			return fmt.Errorf("a writer opened under a rewrite: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := Open(short, path, WithLogger(quiet)); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "(vacuum for") {
			return fmt.Errorf("a writer whose context ends while it waits: %v", err)
		}
		return nil
	})
	check(t, err)
	check(t, <-opened)
	check(t, waited.Close())
}
