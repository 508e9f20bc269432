package journal

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	if _, err := OpenReadOnly(ctx, path); err == nil {
		t.Fatal("opened a journal that does not exist")
	}
	j, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.CreateRun(ctx, Run{ID: "r", Graph: "g", Status: RunRunning}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, err := ro.Run(ctx, "r"); err != nil || r.Graph != "g" {
		t.Fatalf("read %+v, %v", r, err)
	}
	if !ro.Abandoned(Run{ID: "r", Status: RunRunning}) {
		t.Error("a running run without an owner is abandoned, read-only or not")
	}
	if err := ro.SetRunStatus(ctx, "r", RunFailed); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write to a read-only journal: %v, want ErrReadOnly", err)
	}
	if err := ro.Append(Event{RunID: "r", Kind: "delta"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("append to a read-only journal: %v, want ErrReadOnly", err)
	}
}
