package journal

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"
)

// Owner identifies the process that runs a run: one runner per run.
type Owner struct {
	PID  int
	Host string
	// Token tells apart two owners that share a pid and host (a restarted
	// container reuses pids; two Journals may live in one process).
	// Re-acquiring and releasing take the same token.
	Token string
}

// NewOwner returns an owner for this process with a fresh random token.
func NewOwner() Owner {
	host, _ := os.Hostname()
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return Owner{PID: os.Getpid(), Host: host, Token: hex.EncodeToString(b[:])}
}

func (o Owner) String() string { return fmt.Sprintf("pid %d on host %s", o.PID, o.Host) }

// LockedError is returned by AcquireRun when a live owner holds the run.
type LockedError struct {
	RunID     string
	Owner     Owner
	Heartbeat time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("run %s is being run by %s (last heartbeat %s ago)", e.RunID, e.Owner,
		time.Since(e.Heartbeat).Round(time.Second))
}

// AcquireRun makes o the owner of a run, so that no other runner works on it
// at the same time. It succeeds if nobody owns the run, if o already does
// (same token), or if the current owner is gone: its pid is not alive on this
// host, or its heartbeat is older than the stale bound (WithStaleAfter; the
// only test for an owner on another host, and the way out when a dead
// owner's pid was reused). Otherwise it returns a *LockedError.
//
// While it owns the run, this Journal refreshes the heartbeat every quarter of
// the stale bound, until ReleaseRun or Close (which releases). If another
// process takes the lock over meanwhile (this one was suspended past the
// stale bound), the heartbeat stops and an error is logged.
func (j *Journal) AcquireRun(ctx context.Context, runID string, o Owner) error {
	what := fmt.Sprintf("acquire run %q", runID)
	if o.PID <= 0 || o.Token == "" {
		return j.errorf("%s: %w: owner needs a pid and a token (see NewOwner)", what, ErrInvalid)
	}
	var prev Owner // the owner taken over from, if any
	var why string // and why it was
	err := j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		var cur Owner
		var hb int64
		err := tx.QueryRowContext(ctx, `SELECT owner_pid, owner_host, owner_token, heartbeat FROM runs WHERE id = ?`,
			runID).Scan(&cur.PID, &cur.Host, &cur.Token, &hb)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		now := time.Now()
		prev, why = Owner{}, ""
		if cur.Token != "" && cur.Token != o.Token {
			if why = j.ownerGone(cur, fromNanos(hb), now); why == "" {
				return &LockedError{RunID: runID, Owner: cur, Heartbeat: fromNanos(hb)}
			}
			prev = cur
		}
		_, err = tx.ExecContext(ctx, `UPDATE runs SET owner_pid = ?, owner_host = ?, owner_token = ?, heartbeat = ?
			WHERE id = ?`, o.PID, o.Host, o.Token, now.UnixNano(), runID)
		return err
	})
	if err != nil {
		return err
	}
	if why != "" {
		j.log.Warn("took over run lock", "path", j.path, "run", runID, "from", prev.String(), "because", why)
	}
	j.startHeartbeat(runID, o)
	return nil
}

// ownerGone says why cur no longer holds its lock, or "" if it may.
func (j *Journal) ownerGone(cur Owner, hb, now time.Time) string {
	if cur.Host == j.host && !pidAlive(cur.PID) {
		return "its process is gone"
	}
	if age := now.Sub(hb); age > j.staleAfter {
		return fmt.Sprintf("no heartbeat for %s", age.Round(time.Second))
	}
	return ""
}

// ReleaseRun gives up o's ownership of a run. Releasing a run o does not own
// is a no-op.
func (j *Journal) ReleaseRun(ctx context.Context, runID string, o Owner) error {
	j.stopHeartbeat(runID, o)
	return j.change(ctx, fmt.Sprintf("release run %q", runID), func(ctx context.Context, tx stmtTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET owner_pid = 0, owner_host = '', owner_token = '', heartbeat = 0
			WHERE id = ? AND owner_token = ?`, runID, o.Token)
		if err := mustAffect(res, err); !errors.Is(err, ErrNotFound) {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, runID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
}

// Abandoned reports whether a run says running but nobody runs it: it has no
// owner, or its owner is gone by AcquireRun's rules. The CLI shows such a run
// as interrupted; noderun resume can take it.
func (j *Journal) Abandoned(r Run) bool {
	if r.Status != RunRunning {
		return false
	}
	return r.Owner.Token == "" || j.ownerGone(r.Owner, r.Heartbeat, time.Now()) != ""
}

// Standing is a run's status as it stands now, the one every reader shows:
// the journaled status, except that a run that says running while its
// runner is gone (Abandoned: killed -9, its machine lost) is interrupted,
// and resumable.
func (j *Journal) Standing(r Run) RunStatus {
	if j.Abandoned(r) {
		return RunInterrupted
	}
	return r.Status
}

// NodeStanding is a node's state as it stands now: a node that says running
// in a run whose runner is gone was interrupted mid-stream (canceled, shown
// as interrupted), with its partial output journaled.
func NodeStanding(s NodeState, runnerGone bool) NodeState {
	if runnerGone && s == NodeRunning {
		return NodeCanceled
	}
	return s
}

// heldRun is a run lock this Journal holds.
type heldRun struct {
	owner Owner
	stop  context.CancelFunc // stops the heartbeat
}

// startHeartbeat keeps o's heartbeat on a run fresh until stopHeartbeat.
func (j *Journal) startHeartbeat(runID string, o Owner) {
	j.hbMu.Lock()
	defer j.hbMu.Unlock()
	if j.held == nil {
		return // closing
	}
	if h, ok := j.held[runID]; ok {
		if h.owner == o {
			return // already beating
		}
		h.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.held[runID] = &heldRun{owner: o, stop: cancel}
	j.hbWG.Add(1)
	go func() {
		defer j.hbWG.Done()
		t := time.NewTicker(j.staleAfter / 4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := j.change(ctx, fmt.Sprintf("heartbeat of run %q", runID), func(ctx context.Context, tx stmtTx) error {
				return mustAffect(tx.ExecContext(ctx, `UPDATE runs SET heartbeat = ? WHERE id = ? AND owner_token = ?`,
					time.Now().UnixNano(), runID, o.Token))
			})
			switch {
			case errors.Is(err, ErrNotFound):
				j.log.Error("run lock lost to another owner; stop working on this run", "path", j.path, "run", runID)
				j.stopHeartbeat(runID, o)
				return
			case err != nil && ctx.Err() == nil:
				j.log.Warn("run lock heartbeat failed", "path", j.path, "run", runID, "err", err)
			}
		}
	}()
}

// stopHeartbeat stops o's heartbeat on a run, if this Journal runs one.
func (j *Journal) stopHeartbeat(runID string, o Owner) {
	j.hbMu.Lock()
	defer j.hbMu.Unlock()
	if h, ok := j.held[runID]; ok && h.owner == o {
		h.stop()
		delete(j.held, runID)
	}
}

// releaseAll stops every heartbeat for good and releases the locks this
// Journal holds (Close: a runner that exits cleanly leaves its runs free).
func (j *Journal) releaseAll() {
	j.hbMu.Lock()
	held := j.held
	j.held = nil
	for _, h := range held {
		h.stop()
	}
	j.hbMu.Unlock()
	j.hbWG.Wait()
	for runID, h := range held {
		if err := j.ReleaseRun(context.Background(), runID, h.owner); err != nil {
			j.log.Warn("could not release run lock", "path", j.path, "run", runID, "err", err)
		}
	}
}
