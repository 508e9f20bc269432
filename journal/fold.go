package journal

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Folding. A node's output is journaled twice: as the delta rows it was
// streamed in (one per coalesced window, each with its key, time and index
// entry), and again whole in nodes.output when it completes. Once a node has
// completed, its delta rows are only history, so Fold replaces the delta and
// reasoning rows of each of its ended attempts with one row of the folds
// table: the rows' seqs, times, provider seqs and lengths, packed (a few
// bytes a row), and their text, which for a delta row is a stretch of the
// node's output and is then not stored again but found there. A finished
// run's journal shrinks from ~3× the bytes of its outputs to ~1.2× (see
// BenchmarkFoldedJournal).
//
// Folding loses nothing: Events and RebuildOutput unfold on the fly and give
// back exactly the rows that were folded (seq, time, kind, provider seq,
// payload), in seq order among the others, so everything that reads a run
// (show, events, diagnose, report, resume) reads a folded run as it read it
// before. Fold checks that before it deletes a row. Only rows that can never
// change are folded: those of attempts that ended, of nodes that completed;
// a diagnostic or any other kind of event is never folded.

// foldKinds are the kinds Fold folds.
var foldKinds = []string{KindDelta, KindReasoning}

// FoldStats says what Fold did.
type FoldStats struct {
	Nodes  int   // nodes with rows folded
	Rows   int   // event rows folded
	Bytes  int64 // payload bytes in them
	Shared int64 // of those, bytes found in the node's output and not stored again
}

// Fold folds the delta and reasoning rows of every ended attempt of every
// completed node of a run (see above). Folding a folded run again does
// nothing. It runs one state change per node, so a long fold never holds
// the writer for long, and works on a run that is still going (its running
// nodes are left alone).
func (j *Journal) Fold(ctx context.Context, runID string) (FoldStats, error) {
	var st FoldStats
	nodes, err := j.Nodes(ctx, runID)
	if err != nil {
		return st, err
	}
	for _, n := range nodes {
		if n.State != NodeCompleted {
			continue
		}
		var ns FoldStats
		err := j.change(ctx, fmt.Sprintf("fold node %s/%s", runID, n.ID), func(ctx context.Context, tx stmtTx) error {
			ns = FoldStats{}
			return foldNode(ctx, tx, runID, n.ID, &ns)
		})
		if err != nil {
			return st, err
		}
		if ns.Rows > 0 {
			st.Nodes++
			st.Rows += ns.Rows
			st.Bytes += ns.Bytes
			st.Shared += ns.Shared
		}
	}
	return st, nil
}

const (
	// Arguments: run id, node id.
	foldNodeQuery = `SELECT r.key, n.state, CAST(n.output AS BLOB) FROM nodes n JOIN runs r ON r.id = n.run WHERE n.run = ? AND n.id = ?`
	// Arguments: run id, node id. Attempts that ended; a completed node's
	// events may name an attempt with no row, which is never folded.
	foldAttemptsQuery = `SELECT n FROM attempts WHERE run = ? AND node = ? AND outcome <> 'running' ORDER BY n`
	// Arguments: run key, node id, attempt, kind.
	foldRowsQuery = `SELECT seq, time, provider_seq, payload, chunks FROM events INDEXED BY events_by_node
		WHERE run = ? AND node = ? AND attempt = ? AND kind = ? AND code = '' ORDER BY seq`
	foldExistsQuery = `SELECT count(*) FROM folds WHERE run = ? AND node = ? AND attempt = ? AND kind = ?`
	foldInsertQuery = `INSERT INTO folds (run, node, attempt, kind, first_seq, last_seq, rows, bytes, out_off, text, idx, chunks)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	foldDeleteQuery = `DELETE FROM events WHERE run = ? AND node = ? AND attempt = ? AND kind = ? AND code = ''
		AND seq BETWEEN ? AND ?`
	// unshareQuery copies into the fold the stretch of the node's output its
	// text is, before that output changes (a node completed again):
	// arguments run id, node id. A node's output is set once today; this
	// keeps a fold whole if that ever changes.
	unshareQuery = `UPDATE folds SET text = substr((SELECT CAST(output AS BLOB) FROM nodes WHERE run = ?1 AND id = ?2), out_off + 1, bytes),
		out_off = -1 WHERE run = (SELECT key FROM runs WHERE id = ?1) AND node = ?2 AND out_off >= 0`
)

// foldedRow is one event row a fold holds.
type foldedRow struct {
	seq, time, providerSeq int64
	payload                []byte
	chunks                 int // the provider's chunks the row joined (Event.Chunks), at least 1
}

func foldNode(ctx context.Context, tx stmtTx, runID, nodeID string, st *FoldStats) error {
	var key int64
	var state string
	var output []byte
	if err := tx.QueryRowContext(ctx, foldNodeQuery, runID, nodeID).Scan(&key, &state, &output); err != nil {
		return err
	}
	if NodeState(state) != NodeCompleted {
		return nil // it changed since Fold listed it
	}
	var attempts []int
	rows, err := tx.QueryContext(ctx, foldAttemptsQuery, runID, nodeID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		attempts = append(attempts, n)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, a := range attempts {
		for _, kind := range foldKinds {
			if err := foldRows(ctx, tx, key, nodeID, a, kind, output, st); err != nil {
				return fmt.Errorf("attempt %d, %s rows: %w", a, kind, err)
			}
		}
	}
	return nil
}

func foldRows(ctx context.Context, tx stmtTx, key int64, nodeID string, attempt int, kind string, output []byte, st *FoldStats) error {
	var exists int
	if err := tx.QueryRowContext(ctx, foldExistsQuery, key, nodeID, attempt, kind).Scan(&exists); err != nil {
		return err
	}
	if exists > 0 {
		// Folded before; an ended attempt gets no rows after that. Should
		// one appear, it stays a row: folds are not merged.
		return nil
	}
	rows, err := tx.QueryContext(ctx, foldRowsQuery, key, nodeID, attempt, kind)
	if err != nil {
		return err
	}
	var got []foldedRow
	for rows.Next() {
		var r foldedRow
		if err := rows.Scan(&r.seq, &r.time, &r.providerSeq, &r.payload, &r.chunks); err != nil {
			rows.Close()
			return err
		}
		got = append(got, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if len(got) == 0 {
		return nil
	}
	f := packFold(got)
	// The text is stored once: where it is a stretch of the node's output
	// (a delta attempt that produced it), the fold points there.
	f.outOff = -1
	if kind == KindDelta && len(f.text) > 0 {
		f.outOff = int64(bytes.Index(output, f.text))
	}
	text := f.text
	if f.outOff >= 0 {
		text = []byte{}
		st.Shared += int64(len(f.text))
	}
	// Nothing is deleted that the fold does not give back, byte for byte.
	back, err := unpackFold(f.firstSeq, f.bytes, f.idx, f.text)
	if err == nil {
		err = setChunks(back, f.chunks)
	}
	if err != nil || !sameRows(back, got) {
		return fmt.Errorf("fold does not give its rows back (%v): nothing folded", err)
	}
	if _, err := tx.ExecContext(ctx, foldInsertQuery, key, nodeID, attempt, kind, f.firstSeq, f.lastSeq,
		len(got), f.bytes, f.outOff, text, f.idx, f.chunks); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, foldDeleteQuery, key, nodeID, attempt, kind, f.firstSeq, f.lastSeq)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(got)) {
		return fmt.Errorf("folded %d rows but deleted %d (%v)", len(got), n, err)
	}
	st.Rows += len(got)
	st.Bytes += f.bytes
	return nil
}

func sameRows(a, b []foldedRow) bool {
	return slices.EqualFunc(a, b, func(x, y foldedRow) bool {
		return x.seq == y.seq && x.time == y.time && x.providerSeq == y.providerSeq && bytes.Equal(x.payload, y.payload) &&
			max(x.chunks, 1) == max(y.chunks, 1)
	})
}

// fold is one folds row.
type fold struct {
	firstSeq, lastSeq int64
	bytes             int64
	outOff            int64
	text              []byte // every row's payload, in seq order
	idx               []byte
	chunks            []byte // every row's chunks less one (uvarints); nil: one each
}

// packFold packs rows (in seq order): per row, as varints, its seq after
// the previous one's (the first's after firstSeq: 0), its time after the
// previous one's (the first's after 0), its provider seq after the
// previous one's (the first's after -1) and its payload's length.
func packFold(rows []foldedRow) fold {
	f := fold{firstSeq: rows[0].seq, lastSeq: rows[len(rows)-1].seq}
	prevSeq, prevTime, prevPS := rows[0].seq, int64(0), int64(NoProviderSeq)
	for _, r := range rows {
		f.idx = binary.AppendUvarint(f.idx, uint64(r.seq-prevSeq))
		f.idx = binary.AppendVarint(f.idx, r.time-prevTime)
		f.idx = binary.AppendVarint(f.idx, r.providerSeq-prevPS)
		f.idx = binary.AppendUvarint(f.idx, uint64(len(r.payload)))
		prevSeq, prevTime, prevPS = r.seq, r.time, r.providerSeq
		f.text = append(f.text, r.payload...)
		f.chunks = binary.AppendUvarint(f.chunks, uint64(max(r.chunks, 1)-1))
	}
	f.bytes = int64(len(f.text))
	if !slices.ContainsFunc(f.chunks, func(b byte) bool { return b != 0 }) {
		f.chunks = nil // a chunk a row: the column's NULL says so
	}
	return f
}

// setChunks gives unpacked rows their chunk counts, from a folds row's
// chunks column (packFold); nil counts one a row.
func setChunks(rows []foldedRow, chunks []byte) error {
	for i := range rows {
		rows[i].chunks = 1
		if chunks == nil {
			continue
		}
		u, n := binary.Uvarint(chunks)
		if n <= 0 || u > math.MaxInt32 {
			return fmt.Errorf("%w: row %d's chunk count", errBadFold, i+1)
		}
		rows[i].chunks, chunks = int(u)+1, chunks[n:]
	}
	if len(chunks) > 0 {
		return fmt.Errorf("%w: %d bytes of chunk counts left over", errBadFold, len(chunks))
	}
	return nil
}

var errBadFold = errors.New("a folded row does not decode")

// unpackFold gives back the rows of a fold; the payloads are slices of text
// (with no room to append into the next).
func unpackFold(firstSeq, size int64, idx, text []byte) ([]foldedRow, error) {
	if int64(len(text)) != size {
		return nil, fmt.Errorf("%w: %d bytes of text, want %d", errBadFold, len(text), size)
	}
	var out []foldedRow
	seq, t, ps := firstSeq, int64(0), int64(NoProviderSeq)
	off := 0
	for len(idx) > 0 {
		var vals [4]int64
		for i := range vals {
			var n int
			if i == 0 || i == 3 {
				var u uint64
				u, n = binary.Uvarint(idx)
				vals[i] = int64(u)
			} else {
				vals[i], n = binary.Varint(idx)
			}
			if n <= 0 {
				return nil, errBadFold
			}
			idx = idx[n:]
		}
		seq, t, ps = seq+vals[0], t+vals[1], ps+vals[2]
		if vals[3] < 0 || vals[3] > int64(len(text)-off) {
			return nil, errBadFold
		}
		end := off + int(vals[3])
		out = append(out, foldedRow{seq: seq, time: t, providerSeq: ps, payload: text[off:end:end]})
		off = end
	}
	if off != len(text) {
		return nil, fmt.Errorf("%w: %d bytes of text left over", errBadFold, len(text)-off)
	}
	return out, nil
}

// foldedQuery selects the folds an event filter may need, with their text
// (from the node's output where the fold points there). Arguments: run id,
// after seq, then the node and kinds, as eventsQuery.
func foldedQuery(runID string, f EventFilter) (string, []any) {
	var q strings.Builder
	q.WriteString(`SELECT f.node, f.attempt, f.kind, f.first_seq, f.bytes, f.idx, f.chunks,
		CASE WHEN f.out_off >= 0
			THEN (SELECT substr(CAST(n.output AS BLOB), f.out_off + 1, f.bytes) FROM nodes n WHERE n.run = ?1 AND n.id = f.node)
			ELSE f.text END
		FROM folds f WHERE f.run = (SELECT key FROM runs WHERE id = ?1) AND f.last_seq > ?2`)
	args := []any{runID, f.AfterSeq}
	if f.Node != "" {
		q.WriteString(` AND f.node = ?3`)
		args = append(args, f.Node)
	}
	if len(f.Kinds) > 0 {
		q.WriteString(` AND f.kind IN (?` + strings.Repeat(`, ?`, len(f.Kinds)-1) + `)`)
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	return q.String(), args
}

// foldedEvents unfolds the folded rows that f selects, in seq order.
func (j *Journal) foldedEvents(ctx context.Context, runID string, f EventFilter) ([]Event, error) {
	query, args := foldedQuery(runID, f)
	rows, err := j.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var node, kind string
		var attempt int
		var first, size int64
		var idx, chunks, text []byte
		if err := rows.Scan(&node, &attempt, &kind, &first, &size, &idx, &chunks, &text); err != nil {
			return nil, err
		}
		back, err := unpackFold(first, size, idx, text)
		if err == nil {
			err = setChunks(back, chunks)
		}
		if err != nil {
			return nil, fmt.Errorf("folded %s rows of %s#%d: %w", kind, node, attempt, err)
		}
		for _, r := range back {
			if r.seq <= f.AfterSeq {
				continue
			}
			e := Event{RunID: runID, NodeID: node, Attempt: attempt, Seq: r.seq, Time: time.Unix(0, r.time),
				Kind: kind, ProviderSeq: r.providerSeq, Payload: r.payload, Chunks: r.chunks}
			if f.NoText && (kind == KindDelta || kind == KindReasoning) {
				e.Payload = []byte{}
			}
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// mergeEvents merges two lists in seq order. A seq in both is one row read
// before and after a fold moved it (the same row): it is kept once.
func mergeEvents(a, b []Event) []Event {
	return merge(a, b, func(e Event) int64 { return e.Seq })
}

// mergeRows is mergeEvents for rebuild's rows.
func mergeRows(a, b []foldedRow) []foldedRow {
	return merge(a, b, func(r foldedRow) int64 { return r.seq })
}

func merge[T any](a, b []T, seq func(T) int64) []T {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]T, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch sa, sb := seq(a[0]), seq(b[0]); {
		case sa < sb:
			out, a = append(out, a[0]), a[1:]
		case sa > sb:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// foldedRebuildQuery: the folds of a chain of attempts, for rebuild.
// Arguments: run id, node id, first and last attempt, the kind rebuilt.
const foldedRebuildQuery = `SELECT f.first_seq, f.bytes, f.idx, f.chunks,
	CASE WHEN f.out_off >= 0
		THEN (SELECT substr(CAST(n.output AS BLOB), f.out_off + 1, f.bytes) FROM nodes n WHERE n.run = ?1 AND n.id = f.node)
		ELSE f.text END
	FROM folds f WHERE f.run = (SELECT key FROM runs WHERE id = ?1) AND f.node = ?2 AND f.attempt BETWEEN ?3 AND ?4 AND f.kind = ?5`

// foldedRebuildRows are the folded rows of a chain of attempts, in seq order.
func (j *Journal) foldedRebuildRows(ctx context.Context, runID, nodeID string, first, last int, kind string) ([]foldedRow, error) {
	rows, err := j.query(ctx, foldedRebuildQuery, runID, nodeID, first, last, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []foldedRow
	for rows.Next() {
		var firstSeq, size int64
		var idx, chunks, text []byte
		if err := rows.Scan(&firstSeq, &size, &idx, &chunks, &text); err != nil {
			return nil, err
		}
		back, err := unpackFold(firstSeq, size, idx, text)
		if err == nil {
			err = setChunks(back, chunks)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, back...)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b foldedRow) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// Vacuum gives the file system back the pages that folding (or anything
// else) freed: SQLite keeps freed pages in the file for reuse, so a folded
// journal is no smaller on disk until VACUUM rewrites it. It then empties
// the WAL. It waits for the writer (it runs on the writer's connection,
// between two of its transactions) and holds up this journal's writes while
// it runs: rewriting the file takes about as long as reading it. It never
// holds up another process's writer: it returns ErrInUse when another
// process has the journal open for writing, and one that opens meanwhile
// waits for it (maint.go).
func (j *Journal) Vacuum(ctx context.Context) error {
	if j.readOnly {
		return j.errorf("vacuum: %w", ErrReadOnly)
	}
	if err := j.Flush(ctx); err != nil {
		return err
	}
	return j.exclusive(ctx, "vacuum", func() error {
		if _, err := j.wdb.ExecContext(ctx, "VACUUM"); err != nil {
			return j.errorf("vacuum: %w", err)
		}
		return j.truncateWAL(ctx)
	})
}

// truncateWALFor bounds how long Vacuum waits for the WAL to be free.
const truncateWALFor = 10 * time.Second

// truncateWAL checkpoints the WAL, where VACUUM wrote the whole database,
// and truncates it. Readers it waits for (through the busy handler), but
// SQLite refuses it at once while another connection checkpoints (the
// pragma's first column, busy, is 1, and there is no error): this journal's
// checkpointer, after the commits that came before, was doing so under
// load, and the WAL kept a second copy of the file. So it is tried again,
// for truncateWALFor at most (another process cannot hold it: Vacuum holds
// the maintenance lock).
func (j *Journal) truncateWAL(ctx context.Context) error {
	deadline := time.Now().Add(truncateWALFor)
	for {
		var busy, walPages, copied int
		if err := j.wdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &walPages, &copied); err != nil {
			return j.errorf("vacuum: checkpoint: %w", err)
		}
		if busy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return j.errorf("vacuum: checkpoint: the WAL (%d pages) was still in use after %s", walPages, truncateWALFor)
		}
		select {
		case <-ctx.Done():
			return j.errorf("vacuum: checkpoint: %w", context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
