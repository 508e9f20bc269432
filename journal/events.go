package journal

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"
)

// Event kinds the journal itself interprets. Other kinds are the caller's.
const (
	// KindDelta: the payload is a piece of the node's output.
	KindDelta = "delta"
	// KindReasoning: the payload is a piece of the node's reasoning
	// summary, never part of its output.
	KindReasoning = "reasoning"
	// KindDiagnostic: the payload is a diagnostic record
	// (diagnostics.Record: code, name, message, attrs; read it with
	// diagnostics.Decode). Event.Code is its code's ID. A finished run's
	// records are decoded in runner.NodeResult.Diagnostics.
	KindDiagnostic = "diagnostic"
	// KindReset: every earlier delta of the attempt (and of the attempts it
	// continues) is void: the work restarted, or its whole output came from
	// elsewhere.
	KindReset = "reset"
	// KindMark: the payload is a provider's token for a point of its
	// stream (JSON: seq, token), for a resume from the journal (LastMark).
	KindMark = "mark"
)

// NoProviderSeq is Event.ProviderSeq for events that carry no provider
// sequence number.
const NoProviderSeq int64 = -1

// Event is one entry of a run's append-only event log.
type Event struct {
	RunID   string
	NodeID  string // "" for run-level events
	Attempt int    // 0 when the event belongs to no attempt
	// Seq is assigned by the journal: 1, 2, 3... per run, gap-free, in
	// append order. Append ignores the caller's value.
	Seq  int64
	Time time.Time // Append sets it to now if zero
	Kind string
	Code string // a diagnostic code, or ""
	// ProviderSeq is the provider's sequence number (Responses
	// sequence_number), or NoProviderSeq. Caution: 0 is a real sequence
	// number, so an event that has none must say -1. In an attempt
	// (Attempt > 0), an event whose ProviderSeq is already journaled for the
	// attempt or for the attempts it continues (ModeReattach) is dropped: a
	// resumed stream cannot duplicate events.
	ProviderSeq int64
	Payload     []byte
	// Chunks is how many of the provider's chunks a delta or reasoning
	// event joins (the runner merges those that arrive close together);
	// 0 is taken as 1.
	Chunks int
}

// EventFilter selects events for Events.
type EventFilter struct {
	Node     string   // only this node's events; "" for all
	AfterSeq int64    // only events with Seq > AfterSeq (poll with the last Seq seen)
	Limit    int      // at most this many; <= 0 for all
	Kinds    []string // only these kinds; empty for all
	// NoText: delta and reasoning events come without their payload (the
	// text), for a reader that needs only when and how often they came
	// (an account of a run): a node's answer is read back once, not once
	// more per reader, and a 32 MiB answer costs such a reader its rows'
	// headers, not its text.
	NoText bool
}

// Append queues an event for the writer and returns at once, unless the
// queue is full, in which case it waits: that is the journal's backpressure
// (and why it takes no context: it never waits for anything else). It copies
// the payload. It returns an error only for an unusable event, a closed
// journal, or a writer that has failed; a nil error does not mean committed
// (see Flush). The run must exist: an event for an unknown run is a bug that
// fails the writer (every later call returns the error).
func (j *Journal) Append(e Event) error {
	if err := j.prepare(&e); err != nil {
		return err
	}
	e.Payload = bytes.Clone(e.Payload)
	return j.send(op{kind: opEvent, ev: e})
}

// AppendAll is Append for several events at once, journaled in order and in
// one transaction: a run's flusher (runner) hands the journal every node's
// pending row each second as one batch. Appended one by one, they were
// spread over many small transactions (a node's start or end, which its
// caller waits for, commits what is queued at once), and each transaction
// rewrites every page of the node index that it touches: at 10,000 nodes
// streaming, a row's index page went to the WAL for almost every row. In
// one transaction, a page is written once for all of its rows. It copies
// the events and their payloads (into one buffer).
func (j *Journal) AppendAll(evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	own := slices.Clone(evs)
	size := 0
	for i := range own {
		if err := j.prepare(&own[i]); err != nil {
			return err
		}
		size += len(own[i].Payload)
	}
	buf := make([]byte, 0, size)
	for i := range own {
		if p := own[i].Payload; p != nil {
			start := len(buf)
			buf = append(buf, p...)
			own[i].Payload = buf[start:len(buf):len(buf)]
		}
	}
	return j.send(op{kind: opEvents, evs: own})
}

// prepare checks an appended event and sets what the journal does: its
// time, if it has none, and its seq cleared (the writer assigns it).
func (j *Journal) prepare(e *Event) error {
	if e.RunID == "" || e.Kind == "" || e.Attempt < 0 {
		return j.errorf("append: %w: event needs a run id, a kind and attempt >= 0", ErrInvalid)
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Seq = 0
	return nil
}

// send queues appended events for the writer, within the bytes it may hold.
func (j *Journal) send(o op) error {
	n := o.payloadBytes()
	j.queued.take(n)
	if err := j.enqueue(context.Background(), o); err != nil {
		j.queued.give(n)
		return j.errorf("append: %w", err)
	}
	return nil
}

// Events returns a run's events in seq order, as filtered by f. While a run
// goes, poll it with f.AfterSeq set to the last Seq seen: events become
// visible in seq order, whole batches at a time, so nothing is skipped.
func (j *Journal) Events(ctx context.Context, runID string, f EventFilter) ([]Event, error) {
	query, args := eventsQuery(runID, f)
	rows, err := j.query(ctx, query, args...)
	if err != nil {
		return nil, j.errorf("events of run %q: %w", runID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{RunID: runID}
		var t int64
		if err := rows.Scan(&e.Seq, &e.NodeID, &e.Attempt, &t, &e.Kind, &e.Code, &e.ProviderSeq, &e.Chunks, &e.Payload); err != nil {
			return nil, j.errorf("events of run %q: %w", runID, err)
		}
		e.Time = time.Unix(0, t)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, j.errorf("events of run %q: %w", runID, err)
	}
	// Folded rows (fold.go) come back among the others, as they were. The
	// folds are read after the rows: a fold that commits in between moves
	// rows from one to the other, seen twice (and merged), never missed.
	folded, err := j.foldedEvents(ctx, runID, f)
	if err != nil {
		return nil, j.errorf("events of run %q: %w", runID, err)
	}
	out = mergeEvents(out, folded)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// eventsQuery builds the query behind Events.
func eventsQuery(runID string, f EventFilter) (string, []any) {
	var q strings.Builder
	q.WriteString(`SELECT seq, node, attempt, time, kind, code, provider_seq, chunks, `)
	if f.NoText {
		q.WriteString(`CASE WHEN kind IN ('delta', 'reasoning') THEN x'' ELSE payload END FROM events`)
	} else {
		q.WriteString(`payload FROM events`)
	}
	// The records of a run (no chunk asked for) are the few rows of the
	// partial index events_records (schema.go).
	records := f.Node == "" && len(f.Kinds) > 0 && !slices.ContainsFunc(f.Kinds, func(k string) bool { return k == KindDelta || k == KindReasoning })
	switch {
	case f.Node != "":
		// A node's events are a small part of a long run's log: never let the
		// planner walk the whole run in seq order instead.
		q.WriteString(` INDEXED BY events_by_node`)
	case records:
		q.WriteString(` INDEXED BY events_records`) // as above: the planner, without statistics, took the primary key
	}
	q.WriteString(` WHERE run = (SELECT key FROM runs WHERE id = ?) AND seq > ?`)
	args := []any{runID, f.AfterSeq}
	if f.Node != "" {
		q.WriteString(` AND node = ?`)
		args = append(args, f.Node)
	}
	if len(f.Kinds) > 0 {
		q.WriteString(` AND kind IN (?` + strings.Repeat(`, ?`, len(f.Kinds)-1) + `)`)
		for _, k := range f.Kinds {
			args = append(args, k)
		}
		if records {
			q.WriteString(` AND ` + recordsTerm) // the index's own term, which SQLite needs to use it
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	q.WriteString(` ORDER BY seq LIMIT ?`)
	return q.String(), append(args, limit)
}

// chainStartQuery finds where an attempt's chain starts. A reattach attempt
// continues the response of the attempt before it: same output, same
// provider sequence numbers. So the chain of attempt n is n itself, or, if n
// is a reattach, every attempt back to the last one that was not. Arguments:
// run id, node id, attempt.
const chainStartQuery = `SELECT CASE
	WHEN (SELECT mode FROM attempts WHERE run = ?1 AND node = ?2 AND n = ?3) = 'reattach'
	THEN COALESCE((SELECT MAX(n) FROM attempts WHERE run = ?1 AND node = ?2 AND n < ?3 AND mode <> 'reattach'), 1)
	ELSE ?3 END`

const (
	// Arguments: run id, node id, first and last attempt, the kind rebuilt.
	rebuildQuery = `SELECT seq, kind, payload FROM events INDEXED BY events_by_node
		WHERE run = (SELECT key FROM runs WHERE id = ?) AND node = ? AND attempt BETWEEN ? AND ?
			AND kind IN (?, 'reset')
		ORDER BY seq`
	// Arguments: run id, node id, first and last attempt.
	lastMarkQuery = `SELECT payload FROM events INDEXED BY events_by_node
		WHERE run = (SELECT key FROM runs WHERE id = ?) AND node = ? AND attempt BETWEEN ? AND ? AND kind = 'mark'
		ORDER BY seq DESC LIMIT 1`
	// The writer keeps each attempt's highest provider seq in
	// provider_seq_tops, in the transaction that journals the events.
	maxProviderSeqQuery = `SELECT COALESCE(MAX(top), -1) FROM provider_seq_tops
		WHERE run = (SELECT key FROM runs WHERE id = ?) AND node = ? AND attempt BETWEEN ? AND ?`
)

// chainStart returns where the chain of an attempt starts (chainStartQuery).
func (j *Journal) chainStart(ctx context.Context, runID, nodeID string, attempt int) (int, error) {
	var start int
	err := j.queryRow(ctx, chainStartQuery, runID, nodeID, attempt).Scan(&start)
	return start, err
}

// RebuildOutput rebuilds what an attempt of a node has produced: the delta
// payloads of its chain (the attempt, and if it is a reattach, the attempts
// it continues) concatenated in seq order, starting after the last reset.
// It reads committed events only.
func (j *Journal) RebuildOutput(ctx context.Context, runID, nodeID string, attempt int) (string, error) {
	return j.rebuild(ctx, runID, nodeID, attempt, KindDelta)
}

// RebuildReasoning is RebuildOutput for the reasoning the attempt streamed
// apart from its output (thinking, thought summaries): what went with the
// output it rebuilds, after the same last reset.
func (j *Journal) RebuildReasoning(ctx context.Context, runID, nodeID string, attempt int) (string, error) {
	return j.rebuild(ctx, runID, nodeID, attempt, KindReasoning)
}

func (j *Journal) rebuild(ctx context.Context, runID, nodeID string, attempt int, kind string) (string, error) {
	start, err := j.chainStart(ctx, runID, nodeID, attempt)
	if err != nil {
		return "", j.errorf("rebuild %s of %s/%s#%d: %w", kind, runID, nodeID, attempt, err)
	}
	// The rows first, then the folds: a fold that commits in between (from
	// another process) moves rows from one to the other, and read in this
	// order they are seen twice (and merged), never missed.
	rows, err := j.query(ctx, rebuildQuery, runID, nodeID, start, attempt, kind)
	if err != nil {
		return "", j.errorf("rebuild %s of %s/%s#%d: %w", kind, runID, nodeID, attempt, err)
	}
	defer rows.Close()
	var evs []foldedRow // payload nil: a reset
	for rows.Next() {
		var r foldedRow
		var got string
		if err := rows.Scan(&r.seq, &got, &r.payload); err != nil {
			return "", j.errorf("rebuild %s of %s/%s#%d: %w", kind, runID, nodeID, attempt, err)
		}
		if got == KindReset {
			r.payload = nil
		} else if r.payload == nil {
			r.payload = []byte{}
		}
		evs = append(evs, r)
	}
	if err := rows.Err(); err != nil {
		return "", j.errorf("rebuild %s of %s/%s#%d: %w", kind, runID, nodeID, attempt, err)
	}
	folded, err := j.foldedRebuildRows(ctx, runID, nodeID, start, attempt, kind)
	if err != nil {
		return "", j.errorf("rebuild %s of %s/%s#%d: %w", kind, runID, nodeID, attempt, err)
	}
	all := mergeRows(evs, folded)
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].payload == nil { // a reset: what counts comes after the last
			all = all[i+1:]
			break
		}
	}
	// Sized first: a doubling builder would hold a long answer up to three
	// times while it copies (issue 42: a 32 MiB answer's account).
	n := 0
	for _, r := range all {
		n += len(r.payload)
	}
	var b strings.Builder
	b.Grow(n)
	for _, r := range all {
		b.Write(r.payload)
	}
	return b.String(), nil
}

// streamedQuery is how many chunks and bytes of output an attempt's chain
// has streamed since its last reset. Arguments: run id, node id, first and
// last attempt.
const streamedQuery = `SELECT COALESCE(SUM(chunks), 0), COALESCE(SUM(length(CAST(payload AS BLOB))), 0), ` + lastReset + `
	FROM events INDEXED BY events_by_node
	WHERE run = (SELECT key FROM runs WHERE id = ?1) AND node = ?2 AND attempt BETWEEN ?3 AND ?4 AND kind = 'delta'
		AND seq > ` + lastReset

// lastReset is the seq of the chain's last reset, 0 if none (a reset is
// never folded). Arguments as streamedQuery.
const lastReset = `COALESCE((SELECT MAX(seq) FROM events INDEXED BY events_by_node
			WHERE run = (SELECT key FROM runs WHERE id = ?1) AND node = ?2 AND attempt BETWEEN ?3 AND ?4 AND kind = 'reset'), 0)`

// Streamed is what an attempt's chain streamed since its last reset (see
// Journal.Streamed).
type Streamed struct {
	// Chunks are the output's tokens as they came (a token a chunk), not
	// estimated from the text; folded rows count theirs too (a row folded
	// before schema 8 counts one).
	Chunks int
	// Bytes is len(RebuildOutput(...)), counted without reading the text
	// into memory (a 32 MiB partial answer is 32 MiB less to hold).
	Bytes int
}

// Streamed counts the output an attempt (and the attempts it continues, as
// RebuildOutput) has streamed since its last reset: what a crash resume
// goes on from, and an unfinished node's size in an account.
func (j *Journal) Streamed(ctx context.Context, runID, nodeID string, attempt int) (Streamed, error) {
	var st Streamed
	start, err := j.chainStart(ctx, runID, nodeID, attempt)
	if err != nil {
		return st, j.errorf("streamed output of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	var reset int64
	if err := j.queryRow(ctx, streamedQuery, runID, nodeID, start, attempt).Scan(&st.Chunks, &st.Bytes, &reset); err != nil {
		return st, j.errorf("streamed output of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	folded, err := j.foldedRebuildRows(ctx, runID, nodeID, start, attempt, KindDelta)
	if err != nil {
		return st, j.errorf("streamed output of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	for _, r := range folded {
		if r.seq > reset { // what a reset voided does not count, folded or not
			st.Chunks += r.chunks
			st.Bytes += len(r.payload)
		}
	}
	return st, nil
}

// LastMark returns the payload of the last mark (KindMark) journaled for an
// attempt and the attempts it continues (see RebuildOutput), nil if none.
// It reads committed events only: a mark is journaled after the events it
// names, so the events up to it are there.
func (j *Journal) LastMark(ctx context.Context, runID, nodeID string, attempt int) ([]byte, error) {
	start, err := j.chainStart(ctx, runID, nodeID, attempt)
	if err != nil {
		return nil, j.errorf("last mark of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	var payload []byte
	err = j.queryRow(ctx, lastMarkQuery, runID, nodeID, start, attempt).Scan(&payload)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, j.errorf("last mark of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	return payload, nil
}

// MaxProviderSeq returns the highest provider sequence number journaled for
// an attempt (attempt >= 1) and the attempts it continues (see
// RebuildOutput), or NoProviderSeq if none: the cursor a re-attachment
// resumes after (Responses starting_after). It reads committed events only:
// after a crash that is everything there is.
func (j *Journal) MaxProviderSeq(ctx context.Context, runID, nodeID string, attempt int) (int64, error) {
	start, err := j.chainStart(ctx, runID, nodeID, attempt)
	if err != nil {
		return 0, j.errorf("max provider seq of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	var top int64
	if err := j.queryRow(ctx, maxProviderSeqQuery, runID, nodeID, start, attempt).Scan(&top); err != nil {
		return 0, j.errorf("max provider seq of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	return top, nil
}

// nodeLastSeqQuery is the highest seq journaled for a node of a run (” for the
// whole run), among its rows and its folds (fold.go). Arguments: run id,
// node id.
const nodeLastSeqQuery = `SELECT MAX(
	COALESCE((SELECT MAX(seq) FROM events INDEXED BY events_by_node
		WHERE run = (SELECT key FROM runs WHERE id = ?1) AND node = ?2), 0),
	COALESCE((SELECT MAX(last_seq) FROM folds
		WHERE run = (SELECT key FROM runs WHERE id = ?1) AND node = ?2), 0))`

// lastRunSeqQuery is the highest seq of a run (seq is gap-free per run, and
// folds only move rows whose later events stay). Argument: run id.
const lastRunSeqQuery = `SELECT MAX(
	COALESCE((SELECT MAX(seq) FROM events WHERE run = (SELECT key FROM runs WHERE id = ?1)), 0),
	COALESCE((SELECT MAX(last_seq) FROM folds WHERE run = (SELECT key FROM runs WHERE id = ?1)), 0))`

// LastSeq returns the seq of the last committed event of a node of a run, or
// of the whole run when nodeID is "" (0: none yet): what a watcher that has
// seen it has seen of them.
func (j *Journal) LastSeq(ctx context.Context, runID, nodeID string) (int64, error) {
	var seq int64
	var err error
	if nodeID == "" {
		err = j.queryRow(ctx, lastRunSeqQuery, runID).Scan(&seq)
	} else {
		err = j.queryRow(ctx, nodeLastSeqQuery, runID, nodeID).Scan(&seq)
	}
	if err != nil {
		return 0, j.errorf("last seq of %s/%s: %w", runID, nodeID, err)
	}
	return seq, nil
}
