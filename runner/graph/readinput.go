package graph

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// DefaultMaxInputBytes bounds what a run reads of a file given as an input
// (a `type: file` input, `--input NAME=@FILE`): the content is templated into
// prompts and journaled whole, so a file past it is refused, not read.
const DefaultMaxInputBytes = 8 << 20

// InputTooLargeError is a file input past its bound.
type InputTooLargeError struct {
	Path  string
	Limit int64
}

func (e *InputTooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, the bound of a file input", e.Path, sizeWords(e.Limit))
}

// ReadInput reads the file at path as an input's value: at most limit
// bytes (else an *InputTooLargeError, after reading limit+1, never the
// whole file: /dev/zero is refused at once). A FIFO, or a device, that
// waits for a writer or for data gives way when ctx ends.
func ReadInput(ctx context.Context, path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxInputBytes
	}
	st, err := checkInput(path, limit)
	if err != nil {
		return nil, err
	}
	var f *os.File
	if st.Mode().IsRegular() {
		if f, err = os.Open(path); err != nil {
			return nil, err
		}
	} else if f, err = openWaiting(ctx, path); err != nil {
		return nil, err
	}
	defer f.Close()
	// A FIFO or a character device is read through the runtime's poller:
	// a deadline set when ctx ends interrupts a read that waits.
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return nil, fmt.Errorf("reading %s: %w", path, context.Cause(ctx))
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, &InputTooLargeError{Path: path, Limit: limit}
	}
	return b, nil
}

// checkInput checks what ReadInput would read, without reading it, and
// returns what it found of the file.
func checkInput(path string, limit int64) (fs.FileInfo, error) {
	if limit <= 0 {
		limit = DefaultMaxInputBytes
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err
	case st.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a file", path)
	case st.Mode().IsRegular() && st.Size() > limit:
		return nil, &InputTooLargeError{Path: path, Limit: limit}
	}
	return st, nil
}

// openWaiting opens a file that is not a regular one (a FIFO's open waits
// for a writer) so that ctx ends the wait: a FIFO left waiting is freed by
// opening its other end.
func openWaiting(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-ctx.Done():
		// Our open is the FIFO's reader: a writer that opens and closes at
		// once lets it return (and see the end of the file).
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		go func() {
			if o := <-ch; o.f != nil {
				_ = o.f.Close()
			}
		}()
		return nil, &fs.PathError{Op: "open", Path: path, Err: context.Cause(ctx)}
	}
}

// sizeWords is a byte count as people write it.
func sizeWords(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
