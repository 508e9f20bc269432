package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func lockedBy(err error) (*LockedError, bool) {
	var le *LockedError
	return le, errors.As(err, &le)
}

func TestAcquireRunRefusesALiveOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	first := openTest(t, path)
	second := openTest(t, path) // a second runner, as another process would be
	a, b := NewOwner(), NewOwner()
	if a.Token == b.Token || a.PID != os.Getpid() {
		t.Fatalf("NewOwner: %+v %+v", a, b)
	}
	createRun(t, first, "r")
	check(t, first.AcquireRun(ctx, "r", a))
	check(t, first.AcquireRun(ctx, "r", a)) // re-acquiring is fine

	err := second.AcquireRun(ctx, "r", b)
	le, ok := lockedBy(err)
	if !ok || le.Owner != a || le.RunID != "r" {
		t.Fatalf("second AcquireRun = %v; want *LockedError naming %v", err, a)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", a.PID), "host " + a.Host, path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if r, _ := second.Run(ctx, "r"); r.Owner != a || r.Heartbeat.IsZero() {
		t.Errorf("run owner = %+v, heartbeat %v", r.Owner, r.Heartbeat)
	}

	check(t, second.ReleaseRun(ctx, "r", b)) // not b's: a no-op
	if _, ok := lockedBy(second.AcquireRun(ctx, "r", b)); !ok {
		t.Fatal("a release by a non-owner freed the lock")
	}
	check(t, first.ReleaseRun(ctx, "r", a))
	check(t, second.AcquireRun(ctx, "r", b))
	if r, _ := first.Run(ctx, "r"); r.Owner != b {
		t.Errorf("owner after hand-over = %+v", r.Owner)
	}
	if err := first.AcquireRun(ctx, "nope", a); !errors.Is(err, ErrNotFound) {
		t.Errorf("AcquireRun of a missing run = %v", err)
	}
	if err := first.ReleaseRun(ctx, "nope", a); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReleaseRun of a missing run = %v", err)
	}
	if err := first.AcquireRun(ctx, "r", Owner{PID: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("AcquireRun without token = %v", err)
	}
}

func TestAcquireRunTakesOverFromADeadProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	host, _ := os.Hostname()
	dead := Owner{PID: deadPID(t), Host: host, Token: "dead-runner"}
	// CreateRun with an owner locks the run at once. Stop the heartbeat this
	// Journal starts for it: the owner is supposed to be another process.
	check(t, j.CreateRun(ctx, Run{ID: "r", Graph: "g", Owner: dead}))
	j.stopHeartbeat("r", dead)

	me := NewOwner()
	check(t, j.AcquireRun(ctx, "r", me))
	if r, _ := j.Run(ctx, "r"); r.Owner != me {
		t.Fatalf("owner after takeover = %+v", r.Owner)
	}
}

func TestAcquireRunTakesOverAStaleHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	const stale = 400 * time.Millisecond
	// An owner on another host: its pid cannot be checked, only its heartbeat.
	remote := Owner{PID: os.Getpid(), Host: "elsewhere.example", Token: "remote"}
	owner := openTest(t, path, WithStaleAfter(stale))
	check(t, owner.CreateRun(ctx, Run{ID: "r", Graph: "g", Owner: remote}))

	other := openTest(t, path, WithStaleAfter(stale))
	me := NewOwner()
	time.Sleep(2 * stale) // the owner's heartbeat (every stale/4) keeps it
	if _, ok := lockedBy(other.AcquireRun(ctx, "r", me)); !ok {
		t.Fatal("took over a lock whose owner heartbeats")
	}
	owner.stopHeartbeat("r", remote) // the owner freezes (or its host dies) without releasing
	time.Sleep(stale + stale/2)
	check(t, other.AcquireRun(ctx, "r", me))
}

func TestCloseReleasesLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	first := openTest(t, path)
	createRun(t, first, "r")
	check(t, first.AcquireRun(ctx, "r", NewOwner()))
	check(t, first.Close())
	second := openTest(t, path)
	check(t, second.AcquireRun(ctx, "r", NewOwner())) // same (live) pid: only a release frees it
}

func TestAbandoned(t *testing.T) {
	t.Parallel()
	j := openTest(t, "")
	host, _ := os.Hostname()
	now := time.Now()
	for _, c := range []struct {
		name string
		run  Run
		want bool
	}{
		{"owned by a live process", Run{Status: RunRunning, Owner: NewOwner(), Heartbeat: now}, false},
		{"owned by a dead process", Run{Status: RunRunning, Owner: Owner{PID: deadPID(t), Host: host, Token: "x"}, Heartbeat: now}, true},
		{"stale heartbeat", Run{Status: RunRunning, Owner: Owner{PID: 1, Host: "elsewhere", Token: "x"}, Heartbeat: now.Add(-time.Hour)}, true},
		{"no owner", Run{Status: RunRunning}, true},
		{"finished", Run{Status: RunCompleted}, false},
	} {
		if got := j.Abandoned(c.run); got != c.want {
			t.Errorf("%s: Abandoned = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHeartbeatNoticesTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path, WithStaleAfter(200*time.Millisecond))
	createRun(t, j, "r")
	check(t, j.AcquireRun(ctx, "r", NewOwner()))
	// Another process steals the lock behind our back.
	other, err := openDB(path, writerParams)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec(`UPDATE runs SET owner_token = 'thief' WHERE id = 'r'`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j.hbMu.Lock()
		_, beating := j.held["r"]
		j.hbMu.Unlock()
		if !beating {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("heartbeat did not notice that the lock was lost")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var token string
	if err := other.QueryRow(`SELECT owner_token FROM runs WHERE id = 'r'`).Scan(&token); err != nil || token != "thief" {
		t.Fatalf("owner token = %q, %v: the old owner overwrote the new one", token, err)
	}
}
