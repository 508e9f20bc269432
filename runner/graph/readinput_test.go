package graph_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/runner/graph"
)

func TestReadInput(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(small, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name  string
		path  string
		limit int64
		want  string
		big   bool
	}{
		{"a small file", small, 0, "hello", false},
		{"at its bound", small, 5, "hello", false},
		{"past its bound", small, 4, "", true},
		// a device that never ends: read up to the bound, not whole
		{"/dev/zero", "/dev/zero", 1 << 10, "", true},
		{"/dev/null", "/dev/null", 0, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := graph.ReadInput(ctx, c.path, c.limit)
			var tl *graph.InputTooLargeError
			switch {
			case c.big && (!errors.As(err, &tl) || tl.Path != c.path):
				t.Fatalf("err %v, want an InputTooLargeError", err)
			case !c.big && (err != nil || string(b) != c.want):
				t.Fatalf("%q, %v; want %q", b, err, c.want)
			}
		})
	}
	if _, err := graph.ReadInput(ctx, dir, 0); err == nil {
		t.Error("a directory was read as an input")
	}
}

// A FIFO's open waits for a writer, and its read for data: both give way
// when the context ends; with a writer, its content is read.
func TestReadInputFromAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"no writer", "a writer that writes nothing"} {
		ctx, cancel := context.WithCancel(context.Background())
		if stage == "a writer that writes nothing" {
			go func() {
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err == nil {
					defer w.Close()
					<-ctx.Done()
					time.Sleep(200 * time.Millisecond)
				}
			}()
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := graph.ReadInput(ctx, fifo, 0)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Errorf("%s: %v after %s; want it canceled at once", stage, err, time.Since(start))
		}
		cancel()
	}
	want := bytes.Repeat([]byte("line\n"), 1000)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		_, _ = w.Write(want)
	}()
	got, err := graph.ReadInput(context.Background(), fifo, 0)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%d bytes, %v; want %d", len(got), err, len(want))
	}
}
