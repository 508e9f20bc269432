package journal

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
)

// migrations are applied in order; the database's PRAGMA user_version is the
// number already applied. Never edit or reorder an applied migration: append
// a new one, then rewrite schema.sql, the schema they leave, which a new
// journal is made with (go test ./journal -run TestSchemaIsTheMigrations
// -update). Each runs in the same transaction as its version bump, so a
// crash mid-migration leaves the previous version intact.
//
// Conventions: times are unix nanoseconds, 0 meaning "not yet"; text columns
// are NOT NULL with an empty string for "none", so reads need no NULL
// handling.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE runs (
	key          INTEGER PRIMARY KEY, -- the run in events: an integer keeps the hot indexes small and fast
	id           TEXT NOT NULL UNIQUE,
	graph        TEXT NOT NULL,
	graph_path   TEXT NOT NULL DEFAULT '',
	graph_text   BLOB NOT NULL DEFAULT x'',
	graph_sha256 TEXT NOT NULL,
	profile      TEXT NOT NULL DEFAULT '',
	status       TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
	started      INTEGER NOT NULL,
	finished     INTEGER NOT NULL DEFAULT 0,
	-- The run lock (see lock.go): who runs it, and when it last said so.
	owner_pid    INTEGER NOT NULL DEFAULT 0,
	owner_host   TEXT NOT NULL DEFAULT '',
	owner_token  TEXT NOT NULL DEFAULT '',
	heartbeat    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_start ON runs (started);

-- rowid order is creation order, which is the order Nodes lists them in.
CREATE TABLE nodes (
	run       TEXT NOT NULL REFERENCES runs (id),
	id        TEXT NOT NULL,
	state     TEXT NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'failed', 'skipped', 'attention', 'canceled')),
	output    TEXT NOT NULL DEFAULT '',
	err_class TEXT NOT NULL DEFAULT '',
	error     TEXT NOT NULL DEFAULT '',
	reason    TEXT NOT NULL DEFAULT '',
	attempts  INTEGER NOT NULL DEFAULT 0,
	started   INTEGER NOT NULL DEFAULT 0,
	finished  INTEGER NOT NULL DEFAULT 0,
	UNIQUE (run, id)
);

CREATE TABLE attempts (
	run       TEXT NOT NULL,
	node      TEXT NOT NULL,
	n         INTEGER NOT NULL CHECK (n >= 1),
	mode      TEXT NOT NULL CHECK (mode IN ('start', 'retry', 'resume', 'reattach')),
	provider  TEXT NOT NULL DEFAULT '',
	ref       TEXT NOT NULL DEFAULT '',
	cursor    INTEGER NOT NULL DEFAULT -1,
	outcome   TEXT NOT NULL CHECK (outcome IN ('running', 'ok', 'error')),
	err_class TEXT NOT NULL DEFAULT '',
	error     TEXT NOT NULL DEFAULT '',
	started   INTEGER NOT NULL,
	ended     INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run, node, n),
	FOREIGN KEY (run, node) REFERENCES nodes (run, id)
) WITHOUT ROWID;

-- The append-only event log. seq is assigned by the journal, gap-free and
-- increasing per run. run is runs.key. The writer checks that the run
-- exists; a foreign key would only add a lookup per event.
CREATE TABLE events (
	run          INTEGER NOT NULL,
	seq          INTEGER NOT NULL,
	node         TEXT NOT NULL DEFAULT '',
	attempt      INTEGER NOT NULL DEFAULT 0,
	time         INTEGER NOT NULL,
	kind         TEXT NOT NULL,
	code         TEXT NOT NULL DEFAULT '',
	provider_seq INTEGER NOT NULL DEFAULT -1,
	payload      BLOB NOT NULL DEFAULT x'',
	PRIMARY KEY (run, seq)
) WITHOUT ROWID;
CREATE INDEX events_by_node ON events (run, node, seq);
-- A provider event (one with a sequence number, inside an attempt) is
-- journaled at most once, however often a resumed stream repeats it. (Across
-- a chain of reattach attempts, the writer checks before inserting.)
CREATE UNIQUE INDEX events_provider_seq ON events (run, node, attempt, provider_seq)
	WHERE provider_seq >= 0 AND attempt > 0;
`,
	// 2: the inputs a run was started with (a JSON object of strings), which
	// a resume reuses.
	`ALTER TABLE runs ADD COLUMN inputs TEXT NOT NULL DEFAULT '';`,
	// 3: the unique partial index events_provider_seq goes: maintaining it
	// on every provider event was most of what kept ingest from the raw
	// insert (BenchmarkIngestVsRaw, rows=responses). What it served (the
	// resume cursor, and the writer's duplicate checks) needs only each
	// attempt's highest provider seq, kept here by the writer in the same
	// transaction as the events, and, for the rare event at or below it (a
	// resumed stream repeating itself), a scan of the attempt's events from
	// first_seq. A table of its own, not a column of attempts: events may
	// name an attempt that has no row there, and must be deduplicated all
	// the same.
	`
CREATE TABLE provider_seq_tops (
	run       INTEGER NOT NULL, -- runs.key
	node      TEXT NOT NULL,
	attempt   INTEGER NOT NULL CHECK (attempt > 0),
	top       INTEGER NOT NULL, -- the highest provider_seq journaled in the attempt
	first_seq INTEGER NOT NULL, -- the lowest seq of those events: where a duplicate check starts
	PRIMARY KEY (run, node, attempt)
) WITHOUT ROWID;
INSERT INTO provider_seq_tops (run, node, attempt, top, first_seq)
	SELECT run, node, attempt, MAX(provider_seq), MIN(seq) FROM events
	WHERE provider_seq >= 0 AND attempt > 0 GROUP BY run, node, attempt;
DROP INDEX events_provider_seq;
`,
	// 4: the node cache (issue 27). cache_key is the hash of what determines
	// a node's answer (set when the node starts, so a completed node of a
	// crashed run is found too); cache_origin is, for a node completed from
	// the cache, where its output was first produced (JSON, see
	// CacheOrigin), '' for a node that called its provider. The index is
	// partial: nodes that are never cached cost it nothing.
	`
ALTER TABLE nodes ADD COLUMN cache_key TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN cache_origin TEXT NOT NULL DEFAULT '';
CREATE INDEX nodes_by_cache_key ON nodes (cache_key) WHERE cache_key != '';
`,
	// 5: folded event rows (fold.go): the delta and reasoning rows of an
	// ended attempt of a completed node, packed into one row per attempt
	// and kind. idx holds each row's seq, time, provider seq and payload
	// length (varints, each after the previous row's); the payloads are
	// text, or, where out_off >= 0, the bytes of the node's output from
	// out_off on (not stored twice). run is runs.key.
	`
CREATE TABLE folds (
	run       INTEGER NOT NULL,
	node      TEXT NOT NULL,
	attempt   INTEGER NOT NULL,
	kind      TEXT NOT NULL,
	first_seq INTEGER NOT NULL,
	last_seq  INTEGER NOT NULL,
	rows      INTEGER NOT NULL,
	bytes     INTEGER NOT NULL,
	out_off   INTEGER NOT NULL,
	text      BLOB NOT NULL,
	idx       BLOB NOT NULL,
	PRIMARY KEY (run, node, attempt, kind)
) WITHOUT ROWID;
`,
	// 6: how many of the provider's chunks a delta or reasoning row joins
	// (the runner merges chunks that arrive within a few milliseconds): a
	// stream's count of chunks (a token each in the chat and Responses
	// protocols), which a resume after a crash reads instead of estimating
	// it from the text.
	`ALTER TABLE events ADD COLUMN chunks INTEGER NOT NULL DEFAULT 1;`,
	// 7: folds becomes a rowid table (the same columns, its key a unique
	// index). A WITHOUT ROWID table is an index b-tree, whose rows keep at
	// most ~1,000 bytes in their page (at 4 KiB pages) and spill the rest
	// into overflow pages of their own: a fold's idx is often 1-20 KiB, so
	// most folds left a mostly empty overflow page behind, 78% of the folds
	// table's pages unused after a compact (BenchmarkFoldRatio: 1.54x the
	// outputs at 16 tokens a row). A rowid table keeps up to ~4,000 bytes of
	// a row in its leaf and fills its overflow pages.
	`
CREATE TABLE folds_rowid (
	run       INTEGER NOT NULL,
	node      TEXT NOT NULL,
	attempt   INTEGER NOT NULL,
	kind      TEXT NOT NULL,
	first_seq INTEGER NOT NULL,
	last_seq  INTEGER NOT NULL,
	rows      INTEGER NOT NULL,
	bytes     INTEGER NOT NULL,
	out_off   INTEGER NOT NULL,
	text      BLOB NOT NULL,
	idx       BLOB NOT NULL
);
INSERT INTO folds_rowid (run, node, attempt, kind, first_seq, last_seq, rows, bytes, out_off, text, idx)
	SELECT run, node, attempt, kind, first_seq, last_seq, rows, bytes, out_off, text, idx FROM folds;
DROP TABLE folds;
ALTER TABLE folds_rowid RENAME TO folds;
CREATE UNIQUE INDEX folds_key ON folds (run, node, attempt, kind);
`,
	// 8: how many chunks each folded row joined (6), so that a folded
	// attempt counts what it streamed as its rows did: per row, in seq
	// order, its chunks less one as a uvarint (a byte a row); NULL when every
	// row is one chunk. Folds made before this count one a row.
	`ALTER TABLE folds ADD COLUMN chunks BLOB;`,
	// 9: the run's records (diagnostics, usage, marks: a few a node), apart
	// from its chunks, which are most of its log. Every account of a run,
	// and every run's result, reads them by kind, and without this index
	// that walked every chunk the run streamed, payloads and all: three
	// times at the end of each run, 4.5 MB at 1,000 trickling nodes (issue
	// 45). Partial: a chunk costs it nothing.
	`CREATE INDEX events_records ON events (run, seq) WHERE ` + recordsTerm + `;`,
}

// recordsTerm is the condition of the partial index events_records. SQLite
// uses a partial index only for a query whose WHERE has this very term, so
// eventsQuery adds it to a read of records by kind.
const recordsTerm = `kind NOT IN ('delta', 'reasoning')`

// errForeignDB: an SQLite database with tables but no journal schema.
var errForeignDB = errors.New("an SQLite database without noderun's tables")

// schema is the schema the migrations leave a new journal with
// (schema.sql): the text SQLite keeps of each table and index
// (sqlite_master.sql) after all of them, in their order. A new journal is
// made with it in one statement instead of by replaying every migration,
// which re-reads the schema after each ALTER and copies a table in 7: ~4 ms
// of every run's start in a new journal (BenchmarkOpen), and of every test
// that opens one. The migrations stay the history that brings an older
// journal here; TestSchemaIsTheMigrations checks, object by object, that
// both make the very same schema; when a migration is added it fails, and
// `go test ./journal -run TestSchemaIsTheMigrations -update` rewrites
// schema.sql from the migrations.
//
//go:embed schema.sql
var schema string

// migrate brings db up to len(list) applied migrations. It runs in one
// IMMEDIATE transaction, so two processes opening a new file at once
// serialize here and the second finds the work done. fresh, when set, is
// the schema list leaves (schema for migrations): a database with no
// tables gets it at once instead of each step.
func migrate(ctx context.Context, db *sql.DB, list []string, fresh string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if v > len(list) {
		return &SchemaError{Have: v, Want: len(list)}
	}
	if v == len(list) {
		return nil
	}
	if v == 0 {
		// A new journal is empty: tables here are another program's.
		var tables int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
			return fmt.Errorf("migrate: read schema: %w", err)
		}
		if tables > 0 {
			return errForeignDB
		}
	}
	if v == 0 && fresh != "" {
		if _, err := tx.ExecContext(ctx, fresh); err != nil {
			return fmt.Errorf("migrate: create the schema: %w", err)
		}
		v = len(list)
	}
	for i := v; i < len(list); i++ {
		if _, err := tx.ExecContext(ctx, list[i]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no bound parameters; len(list) is ours.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(list))); err != nil {
		return fmt.Errorf("migrate: set version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
