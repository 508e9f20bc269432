package journal

import (
	"context"
	"database/sql"
	"sync"
)

// Prepared reads.
//
// Parsing its SQL is a large part of a short read's cost: a worker running
// a thousand short nodes spent ~22% of its CPU in SQLite's prepare, every
// read preparing its statement again. So a Journal keeps its read queries
// prepared on rdb, by SQL text. database/sql prepares a *sql.Stmt again on
// each pooled connection the first time it runs there and keeps it with
// that connection; modernc.org/sqlite keeps the compiled statement and
// resets it between runs. SQLite compiles a statement again by itself when
// the schema changed under it (SQLITE_SCHEMA: a migration by another
// process, a VACUUM), so the cache needs no invalidation.
//
// A query whose statement cannot be had (the cache is full, or closed, or
// preparing failed) runs unprepared, as before: its error, if any, is the
// one the query would have returned.

// maxReadStmts bounds the statements a Journal keeps. The read queries are
// a few dozen texts (Events' filters make a few shapes each); a caller
// that made texts without end would otherwise hold a statement per text
// per connection.
const maxReadStmts = 128

// readStmts is a Journal's cache of prepared read statements.
type readStmts struct {
	mu     sync.Mutex
	closed bool // Close has begun: prepare nothing more
	stmts  map[string]*sql.Stmt
}

// readStmt returns query's statement on rdb, prepared on first use, or nil
// when query is to run unprepared. It does not hold the lock while it
// prepares: preparing may wait for a pooled connection, held perhaps by a
// reader that waits for the lock.
//
// A read-only journal (OpenReadOnly) prepares nothing: on a live WAL its
// connections are closed after each use (readonly.go), so a prepared
// statement would be prepared again on every query, on a connection of its
// own; each such connection opening is one more chance to open the WAL in
// place just as its writer removes it, leaving an empty -wal and -shm.
func (j *Journal) readStmt(ctx context.Context, query string) *sql.Stmt {
	if j.readOnly {
		return nil
	}
	c := &j.reads
	c.mu.Lock()
	st, ok := c.stmts[query]
	full := c.closed || len(c.stmts) >= maxReadStmts
	c.mu.Unlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := j.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok {
		// Another reader prepared it meanwhile.
		st.Close()
		return prev
	}
	if c.closed || len(c.stmts) >= maxReadStmts {
		st.Close()
		return nil
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	c.stmts[query] = st
	return st
}

// readsClosed tells whether closeReads has begun.
func (j *Journal) readsClosed() bool {
	j.reads.mu.Lock()
	defer j.reads.mu.Unlock()
	return j.reads.closed
}

// closeReads closes the prepared statements, before rdb closes. A
// statement still in use closes when its rows do (database/sql waits).
func (j *Journal) closeReads() error {
	c := &j.reads
	c.mu.Lock()
	c.closed = true
	stmts := c.stmts
	c.stmts = nil
	c.mu.Unlock()
	var first error
	for _, st := range stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// query is j.rdb.QueryContext through the statement cache.
func (j *Journal) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := j.readStmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		// A statement closed under the query by Close: the query's error
		// is the closed database's, as it was before the cache.
		if err == nil || !j.readsClosed() {
			return rows, err
		}
	}
	return j.rdb.QueryContext(ctx, query, args...)
}

// queryRow is j.rdb.QueryRowContext through the statement cache.
func (j *Journal) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := j.readStmt(ctx, query); st != nil {
		row := st.QueryRowContext(ctx, args...)
		if row.Err() == nil || !j.readsClosed() {
			return row
		}
	}
	return j.rdb.QueryRowContext(ctx, query, args...)
}
