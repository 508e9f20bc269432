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
, inputs TEXT NOT NULL DEFAULT '');
CREATE INDEX runs_by_start ON runs (started);
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
	finished  INTEGER NOT NULL DEFAULT 0, cache_key TEXT NOT NULL DEFAULT '', cache_origin TEXT NOT NULL DEFAULT '',
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
CREATE TABLE events (
	run          INTEGER NOT NULL,
	seq          INTEGER NOT NULL,
	node         TEXT NOT NULL DEFAULT '',
	attempt      INTEGER NOT NULL DEFAULT 0,
	time         INTEGER NOT NULL,
	kind         TEXT NOT NULL,
	code         TEXT NOT NULL DEFAULT '',
	provider_seq INTEGER NOT NULL DEFAULT -1,
	payload      BLOB NOT NULL DEFAULT x'', chunks INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (run, seq)
) WITHOUT ROWID;
CREATE INDEX events_by_node ON events (run, node, seq);
CREATE TABLE provider_seq_tops (
	run       INTEGER NOT NULL, -- runs.key
	node      TEXT NOT NULL,
	attempt   INTEGER NOT NULL CHECK (attempt > 0),
	top       INTEGER NOT NULL, -- the highest provider_seq journaled in the attempt
	first_seq INTEGER NOT NULL, -- the lowest seq of those events: where a duplicate check starts
	PRIMARY KEY (run, node, attempt)
) WITHOUT ROWID;
CREATE INDEX nodes_by_cache_key ON nodes (cache_key) WHERE cache_key != '';
CREATE TABLE "folds" (
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
, chunks BLOB);
CREATE UNIQUE INDEX folds_key ON folds (run, node, attempt, kind);
CREATE INDEX events_records ON events (run, seq) WHERE kind NOT IN ('delta', 'reasoning');
