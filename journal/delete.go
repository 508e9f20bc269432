package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Deleting runs (noderun delete, noderun prune) and listing them by what
// they are (noderun status --status/--graph/--since/--limit).
//
// A run's rows live in every table that has a run column: runs, nodes (its
// outputs, and so its cache entries), attempts by the run's id; events,
// provider_seq_tops and folds by its key. DeleteRun removes them all in one
// transaction, so a crash leaves the run whole or gone. SQLite keeps the
// freed pages for reuse; noderun compact (Vacuum) gives them back to the
// file system.

// RunStatuses are the statuses a run can stand in, in the order a person
// reads them (for a flag's allowed values).
var RunStatuses = []RunStatus{RunRunning, RunCompleted, RunFailed, RunInterrupted}

// RunStatusNames are RunStatuses as strings.
func RunStatusNames() []string {
	out := make([]string, len(RunStatuses))
	for i, s := range RunStatuses {
		out[i] = string(s)
	}
	return out
}

// ParseRunStatus reads a status a person typed; an unknown one is
// ErrInvalid, naming the valid ones.
func ParseRunStatus(s string) (RunStatus, error) {
	if st := RunStatus(s); st.valid() {
		return st, nil
	}
	return "", fmt.Errorf("%w: unknown run status %q (valid: %s)", ErrInvalid, s, strings.Join(RunStatusNames(), ", "))
}

// RunQuery selects runs. Zero fields select everything.
type RunQuery struct {
	// Status is the run's status as it stands (Standing): a run that says
	// running while its runner is gone is interrupted.
	Status RunStatus
	Graph  string    // the graph's name, exactly
	Since  time.Time // started at or after
	Before time.Time // started before
	Limit  int       // at most this many, newest first (0: all)
}

// FindRuns lists the runs q selects, newest first. GraphText is left out;
// Run has it.
func (j *Journal) FindRuns(ctx context.Context, q RunQuery) ([]Run, error) {
	var where []string
	var args []any
	if q.Graph != "" {
		where, args = append(where, "graph = ?"), append(args, q.Graph)
	}
	if !q.Since.IsZero() {
		where, args = append(where, "started >= ?"), append(args, q.Since.UnixNano())
	}
	if !q.Before.IsZero() {
		where, args = append(where, "started < ?"), append(args, q.Before.UnixNano())
	}
	switch q.Status {
	case "":
	case RunInterrupted: // journaled so, or running with its runner gone
		where, args = append(where, "status IN (?, ?)"), append(args, RunInterrupted, RunRunning)
	default:
		if !q.Status.valid() {
			_, err := ParseRunStatus(string(q.Status))
			return nil, j.errorf("list runs: %w", err)
		}
		where, args = append(where, "status = ?"), append(args, q.Status)
	}
	query := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := j.query(ctx, query+` ORDER BY started DESC, id DESC`, args...)
	if err != nil {
		return nil, j.errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() && (q.Limit <= 0 || len(out) < q.Limit) {
		r, err := scanRun(rows)
		if err != nil {
			return nil, j.errorf("list runs: %w", err)
		}
		// Standing needs the owner's liveness, which SQL cannot see.
		if q.Status != "" && j.Standing(r) != q.Status {
			continue
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, j.errorf("list runs: %w", err)
	}
	return out, nil
}

// Live returns the *LockedError of a run whose runner holds it now (nil if
// nobody does, or its owner is gone by AcquireRun's rules): such a run may
// not be deleted.
func (j *Journal) Live(r Run) *LockedError {
	if r.Owner.Token == "" || j.ownerGone(r.Owner, r.Heartbeat, time.Now()) != "" {
		return nil
	}
	return &LockedError{RunID: r.ID, Owner: r.Owner, Heartbeat: r.Heartbeat}
}

// DeleteRun removes a run and everything journaled of it, in one
// transaction. A run whose runner holds it (Live) is refused with a
// *LockedError naming the process; an unknown run is ErrNotFound.
func (j *Journal) DeleteRun(ctx context.Context, runID string) error {
	return j.change(ctx, fmt.Sprintf("delete run %q", runID), func(ctx context.Context, tx stmtTx) error {
		var key, hb int64
		var cur Owner
		err := tx.QueryRowContext(ctx, `SELECT key, owner_pid, owner_host, owner_token, heartbeat FROM runs WHERE id = ?`,
			runID).Scan(&key, &cur.PID, &cur.Host, &cur.Token, &hb)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		// Checked in the transaction that deletes: a runner that took the
		// run after the caller looked is still seen.
		if cur.Token != "" && j.ownerGone(cur, fromNanos(hb), time.Now()) == "" {
			return &LockedError{RunID: runID, Owner: cur, Heartbeat: fromNanos(hb)}
		}
		// Children first: attempts reference nodes, nodes reference runs.
		for _, d := range []struct {
			query string
			arg   any
		}{
			{`DELETE FROM attempts WHERE run = ?`, runID},
			{`DELETE FROM nodes WHERE run = ?`, runID},
			{`DELETE FROM events WHERE run = ?`, key},
			{`DELETE FROM provider_seq_tops WHERE run = ?`, key},
			{`DELETE FROM folds WHERE run = ?`, key},
			{`DELETE FROM runs WHERE key = ?`, key},
		} {
			if _, err := tx.ExecContext(ctx, d.query, d.arg); err != nil {
				return err
			}
		}
		// The writer's cursor of the run (its key and last seq) must not
		// outlive it: an append would find a run that is gone.
		delete(tx.w.runs, runID)
		return nil
	})
}

// PruneOptions selects the runs Prune deletes.
type PruneOptions struct {
	OlderThan time.Duration // started this long before Now or earlier; must be > 0
	Status    RunStatus     // only runs standing so ("": any)
	DryRun    bool          // list them, delete nothing
	Now       time.Time     // zero: time.Now()
}

// PruneResult is what Prune deleted (or, with DryRun, would delete) and
// the live runs it left alone.
type PruneResult struct {
	Deleted []Run
	Live    []*LockedError
}

// Prune deletes the runs that started more than OlderThan ago (of a status,
// if given), oldest last, each in its own transaction (DeleteRun): a prune
// of thousands of runs never holds the write lock long enough to stall a
// live runner. A live run is left alone and listed.
func (j *Journal) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	var res PruneResult
	if o.OlderThan <= 0 {
		return res, j.errorf("prune: %w: the age must be more than zero (got %s)", ErrInvalid, o.OlderThan)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	runs, err := j.FindRuns(ctx, RunQuery{Status: o.Status, Before: o.Now.Add(-o.OlderThan)})
	if err != nil {
		return res, err
	}
	for _, r := range runs {
		if le := j.Live(r); le != nil {
			res.Live = append(res.Live, le)
			continue
		}
		if !o.DryRun {
			err := j.DeleteRun(ctx, r.ID)
			if le, ok := errors.AsType[*LockedError](err); ok { // taken since FindRuns
				res.Live = append(res.Live, le)
				continue
			}
			if err != nil && !errors.Is(err, ErrNotFound) { // ErrNotFound: another prune was first
				return res, err
			}
		}
		res.Deleted = append(res.Deleted, r)
	}
	return res, nil
}
