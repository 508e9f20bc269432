package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// CacheOrigin is where a cached output was first produced: the run and
// node whose provider call generated it, when, and what that call cost
// (what a cache hit does not pay again).
type CacheOrigin struct {
	Run      string    `json:"run"`
	Node     string    `json:"node"`
	Produced time.Time `json:"produced"`
	// Usage is the completing attempt's, as journaled (zero when that
	// attempt's usage was never recorded: its runner died first).
	Usage Usage `json:"usage"`
	// Journal is the other journal the output was found in (--cache-from),
	// empty for this one's.
	Journal string `json:"journal,omitempty"`
}

// CacheEntry is a completed node's output found by its cache key.
type CacheEntry struct {
	Output string
	Origin CacheOrigin
	// Journal is the path of the journal it was found in.
	Journal string
}

// StartNode moves a node to running and records its cache key
// (runner/cache.go), which a later run looks its output up by once the
// node has completed: one state change, as every other of a node's.
func (j *Journal) StartNode(ctx context.Context, runID, nodeID, key string) error {
	what := fmt.Sprintf("start node %s/%s", runID, nodeID)
	if runID == "" || nodeID == "" {
		return j.errorf("%s: %w", what, ErrInvalid)
	}
	now := time.Now().UnixNano()
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		return updateNode(ctx, tx, startNodeQuery, nil, runID, nodeID, NodeRunning, now, key)
	})
}

// CompleteNodeFromCache completes a node with a cached output, keeping its
// key and origin so that a later run finds it (with its first production
// time and cost) as it would the original.
func (j *Journal) CompleteNodeFromCache(ctx context.Context, runID, nodeID, key string, e CacheEntry) error {
	what := fmt.Sprintf("complete node %s/%s from the cache", runID, nodeID)
	if runID == "" || nodeID == "" || key == "" {
		return j.errorf("%s: %w", what, ErrInvalid)
	}
	origin, err := json.Marshal(e.Origin)
	if err != nil {
		return j.errorf("%s: %w", what, err)
	}
	now := time.Now().UnixNano()
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		if _, err := tx.ExecContext(ctx, unshareQuery, runID, nodeID); err != nil {
			return err
		}
		if err := updateNode(ctx, tx, completeNodeQuery, nil, runID, nodeID, NodeCompleted, now, e.Output); err != nil {
			return err
		}
		return mustAffect(tx.ExecContext(ctx, `UPDATE nodes SET cache_key = ?, cache_origin = ? WHERE run = ? AND id = ?`,
			key, string(origin), runID, nodeID))
	})
}

// SetCacheKey changes the key a node's output will be found by: a node that
// moved to a fallback provider is found by the fallback's key, or by none
// ("").
func (j *Journal) SetCacheKey(ctx context.Context, runID, nodeID, key string) error {
	return j.change(ctx, "set cache key", func(ctx context.Context, tx stmtTx) error {
		return mustAffect(tx.ExecContext(ctx, `UPDATE nodes SET cache_key = ? WHERE run = ? AND id = ?`, key, runID, nodeID))
	})
}

// InFlight is a node of another live run computing the same cache key: a
// run that would send the same request waits for its answer instead
// (runner/cache.go, in-flight sharing).
type InFlight struct {
	Run, Node string
	Owner     Owner
}

// inFlightQuery finds the nodes that claimed a key in other runs that say
// running; ClaimKey checks in Go that their runner is alive.
const inFlightQuery = `SELECT n.run, n.id, r.owner_pid, r.owner_host, r.owner_token, r.heartbeat
	FROM nodes n JOIN runs r ON r.id = n.run
	WHERE n.cache_key = ? AND n.cache_key != '' AND n.state IN ('pending', 'running') AND n.run != ? AND r.status = 'running'
	ORDER BY n.started, n.run LIMIT 16`

// ClaimKey claims a cache key for a node that is about to compute it,
// unless a node of another live run (its runner alive by AcquireRun's
// rules) has claimed it and not yet ended: then it returns that node and
// claims nothing. Checking and claiming are one transaction, which holds
// the file's write lock: of two runs claiming one key at once, in one
// process or two, exactly one gets it.
func (j *Journal) ClaimKey(ctx context.Context, runID, nodeID, key string) (*InFlight, error) {
	what := fmt.Sprintf("claim cache key of node %s/%s", runID, nodeID)
	if runID == "" || nodeID == "" || key == "" {
		return nil, j.errorf("%s: %w", what, ErrInvalid)
	}
	var other *InFlight
	err := j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		rows, err := tx.QueryContext(ctx, inFlightQuery, key, runID)
		if err != nil {
			return err
		}
		if other, err = j.firstLive(rows); err != nil || other != nil {
			return err
		}
		return mustAffect(tx.ExecContext(ctx, `UPDATE nodes SET cache_key = ? WHERE run = ? AND id = ?`, key, runID, nodeID))
	})
	return other, err
}

// InFlightOf is the node of another live run that has claimed key and not
// yet ended, or nil: what ClaimKey would wait for, read without claiming
// (a node that waits polls it).
func (j *Journal) InFlightOf(ctx context.Context, runID, key string) (*InFlight, error) {
	rows, err := j.query(ctx, inFlightQuery, key, runID)
	if err != nil {
		return nil, j.errorf("in-flight lookup: %w", err)
	}
	f, err := j.firstLive(rows)
	if err != nil {
		return nil, j.errorf("in-flight lookup: %w", err)
	}
	return f, nil
}

// firstLive is the first of inFlightQuery's rows whose runner is alive; it
// closes rows.
func (j *Journal) firstLive(rows *sql.Rows) (*InFlight, error) {
	defer rows.Close()
	now := time.Now()
	for rows.Next() {
		var f InFlight
		var hb int64
		if err := rows.Scan(&f.Run, &f.Node, &f.Owner.PID, &f.Owner.Host, &f.Owner.Token, &hb); err != nil {
			return nil, err
		}
		if f.Owner.Token != "" && j.ownerGone(f.Owner, fromNanos(hb), now) == "" {
			return &f, nil
		}
	}
	return nil, rows.Err()
}

// cacheCandidates bounds the completed nodes of one key a lookup reads: a
// key shared by many runs (a graph rerun daily) needs only the newest.
const cacheCandidates = 16

// lookupCacheQuery reads a key's newest candidates. It repeats the partial
// index's own condition, that the key is not empty: SQLite uses a partial
// index only for a query whose WHERE says as much, and without it every
// lookup, one for each node a run starts, walked every node of every run
// the journal holds.
const lookupCacheQuery = `SELECT run, id, output, finished, cache_origin FROM nodes
	WHERE cache_key = ? AND cache_key != '' AND state = 'completed' AND run != ? ORDER BY finished DESC LIMIT ?`

// LookupCache finds the newest completed output of key produced at or after
// notBefore (zero: any age), skipping the nodes of run exclude (the run
// looking: its own nodes are not its cache). ok is false when there is none.
func (j *Journal) LookupCache(ctx context.Context, key, exclude string, notBefore time.Time) (e CacheEntry, ok bool, err error) {
	rows, err := j.query(ctx, lookupCacheQuery, key, exclude, cacheCandidates)
	if err != nil {
		return CacheEntry{}, false, j.errorf("cache lookup: %w", err)
	}
	type cand struct {
		e      CacheEntry
		origin string
	}
	var cands []cand
	for rows.Next() {
		var c cand
		var finished int64
		if err := rows.Scan(&c.e.Origin.Run, &c.e.Origin.Node, &c.e.Output, &finished, &c.origin); err != nil {
			rows.Close()
			return CacheEntry{}, false, j.errorf("cache lookup: %w", err)
		}
		c.e.Origin.Produced = fromNanos(finished)
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return CacheEntry{}, false, j.errorf("cache lookup: %w", err)
	}
	var best *CacheEntry
	for i := range cands {
		c := &cands[i]
		if c.origin != "" {
			// A copy: its age and cost are its origin's.
			if err := json.Unmarshal([]byte(c.origin), &c.e.Origin); err != nil {
				continue // not ours to fail a run over: that entry is a miss
			}
		}
		if c.e.Origin.Produced.Before(notBefore) {
			continue
		}
		if best == nil || c.e.Origin.Produced.After(best.Origin.Produced) {
			best = &c.e
		}
	}
	if best == nil {
		return CacheEntry{}, false, nil
	}
	if best.Origin.Usage == (Usage{}) {
		if best.Origin.Usage, err = j.completingUsage(ctx, best.Origin.Run, best.Origin.Node); err != nil {
			return CacheEntry{}, false, err
		}
	}
	best.Journal = j.path
	return *best, true, nil
}

// completingUsage is the usage of a node's last attempt: the one that
// produced its output.
func (j *Journal) completingUsage(ctx context.Context, runID, nodeID string) (Usage, error) {
	var n sql.NullInt64
	if err := j.queryRow(ctx, `SELECT max(n) FROM attempts WHERE run = ? AND node = ?`, runID, nodeID).Scan(&n); err != nil {
		return Usage{}, j.errorf("cache lookup: attempts of %s/%s: %w", runID, nodeID, err)
	}
	if !n.Valid {
		return Usage{}, nil
	}
	by, err := j.AttemptUsage(ctx, runID, nodeID)
	if err != nil {
		return Usage{}, err
	}
	return by[nodeID][int(n.Int64)], nil
}

// CacheOrigins returns, for each node of a run completed from the cache,
// where its output was first produced.
func (j *Journal) CacheOrigins(ctx context.Context, runID string) (map[string]CacheOrigin, error) {
	rows, err := j.query(ctx, `SELECT id, cache_origin FROM nodes WHERE run = ? AND cache_origin != ''`, runID)
	if err != nil {
		return nil, j.errorf("cache origins of run %q: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]CacheOrigin{}
	for rows.Next() {
		var id, origin string
		if err := rows.Scan(&id, &origin); err != nil {
			return nil, j.errorf("cache origins of run %q: %w", runID, err)
		}
		var o CacheOrigin
		if json.Unmarshal([]byte(origin), &o) == nil {
			out[id] = o
		}
	}
	if err := rows.Err(); err != nil {
		return nil, j.errorf("cache origins of run %q: %w", runID, err)
	}
	return out, nil
}
