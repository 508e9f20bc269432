package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// quiet keeps expected warnings (takeovers, failures) out of test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openTest(t testing.TB, path string, opts ...Option) *Journal {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "journal.db")
	}
	j, err := Open(context.Background(), path, append([]Option{WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func createRun(t testing.TB, j *Journal, id string) {
	t.Helper()
	if err := j.CreateRun(context.Background(), Run{ID: id, Graph: "g", GraphText: []byte("name: g\n")}); err != nil {
		t.Fatal(err)
	}
}

func userVersion(t *testing.T, j *Journal) int {
	t.Helper()
	var v int
	if err := j.rdb.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMigrateFromEmptyAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	if v := userVersion(t, j); v != len(migrations) {
		t.Fatalf("user_version = %d, want %d", v, len(migrations))
	}
	var mode string
	if err := j.rdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	createRun(t, j, "r1")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j = openTest(t, path)
	if v := userVersion(t, j); v != len(migrations) {
		t.Fatalf("after reopen user_version = %d, want %d", v, len(migrations))
	}
	if _, err := j.Run(ctx, "r1"); err != nil {
		t.Fatalf("run lost across reopen: %v", err)
	}
}

// TestSchemaIsTheMigrations checks that a new journal made with schema in
// one statement has the schema the migrations make step by step: every
// table and index, in order, with the very text SQLite keeps of it, and the
// same version.
func TestSchemaIsTheMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	made := func(fresh string) (objects []string, text string, version int) {
		db, err := openDB(filepath.Join(t.TempDir(), "j.db"), writerParams)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := migrate(ctx, db, migrations, fresh); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query("SELECT type, name, tbl_name, ifnull(sql, '') FROM sqlite_master ORDER BY rowid")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var typ, name, table, sql string
			if err := rows.Scan(&typ, &name, &table, &sql); err != nil {
				t.Fatal(err)
			}
			objects = append(objects, fmt.Sprintf("%s %s on %s: %s", typ, name, table, sql))
			if sql != "" {
				b.WriteString(sql + ";\n")
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
			t.Fatal(err)
		}
		return objects, b.String(), version
	}
	stepped, text, v := made("")
	if len(stepped) < 10 || v != len(migrations) {
		t.Fatalf("the migrations made %d objects, version %d", len(stepped), v)
	}
	if *updateSchema {
		if err := os.WriteFile("schema.sql", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote schema.sql: run the test again, without -update")
		return
	}
	got, _, gotV := made(schema)
	if !slices.Equal(got, stepped) || gotV != v {
		t.Fatalf("schema.sql makes:\n%s\nversion %d; the migrations make:\n%s\nversion %d\n\nrewrite schema.sql from the migrations: go test ./journal -run TestSchemaIsTheMigrations -update",
			strings.Join(got, "\n"), gotV, strings.Join(stepped, "\n"), v)
	}
}

var updateSchema = flag.Bool("update", false, "rewrite schema.sql from the migrations (TestSchemaIsTheMigrations)")

func TestMigrateAppliesOnlyNewSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path)
	createRun(t, j, "r1")
	j.Close()

	db, err := openDB(path, writerParams)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	next := append(append([]string(nil), migrations...),
		`ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT 'v2'`)
	for range 2 { // the second pass must be a no-op (the ALTER would fail)
		if err := migrate(ctx, db, next, ""); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	var note, id string
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(next) {
		t.Fatalf("user_version = %d, %v; want %d", v, err, len(next))
	}
	if err := db.QueryRow("SELECT id, note FROM runs").Scan(&id, &note); err != nil || id != "r1" || note != "v2" {
		t.Fatalf("migrated row = %q %q %v", id, note, err)
	}

	// A failing step leaves the previous version and data intact.
	bad := append(append([]string(nil), next...), `CREATE TABLE x (a); THIS IS NOT SQL`)
	if err := migrate(ctx, db, bad, ""); err == nil {
		t.Fatal("bad migration succeeded")
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(next) {
		t.Fatalf("after failed step user_version = %d, %v; want %d", v, err, len(next))
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'x'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed step left table x behind (n=%d, %v)", n, err)
	}

	// This build must refuse a schema newer than it knows.
	_, err = Open(ctx, path, WithLogger(quiet))
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a newer schema: %v; want an error naming the path and saying newer", err)
	}
}

func TestOpenErrorNamesPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing-dir", "j.db")
	_, err := Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open in a missing directory: %v; want an error naming %s", err, path)
	}
}

func TestPathWithURICharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "we?ird#na%20me.db")
	j := openTest(t, path)
	createRun(t, j, "r1")
	j.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("journal not at the path given: %v", err)
	}
	j = openTest(t, path)
	if _, err := j.Run(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
}

func TestCloseFlushesAndRefusesLaterCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := openTest(t, path, WithBatch(DefaultBatchOps, time.Hour)) // only Close commits
	createRun(t, j, "r")
	for i := range 1000 {
		j.Append(Event{RunID: "r", Kind: "k", ProviderSeq: -1, Payload: []byte(fmt.Sprint(i))})
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Errorf("the WAL outlives Close (%v): the last connection should checkpoint and remove it", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := j.Append(Event{RunID: "r", Kind: "k"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if err := j.SetRunStatus(ctx, "r", RunCompleted); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetRunStatus after Close: %v, want ErrClosed", err)
	}
	j = openTest(t, path)
	evs, err := j.Events(ctx, "r", EventFilter{})
	if err != nil || len(evs) != 1000 {
		t.Fatalf("after Close: %d events, %v; want 1000", len(evs), err)
	}
}

func TestRunNodeAttemptRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	text := []byte("name: demo\nnodes: []\n")
	if err := j.CreateRun(ctx, Run{ID: "r1", Graph: "demo", GraphPath: "demo.yaml", GraphText: text, Profile: "ci",
		Started: time.Unix(100, 0), Inputs: map[string]string{"goal": "a \"quoted\"\ngoal", "n": "3"}}); err != nil {
		t.Fatal(err)
	}
	createRun(t, j, "r2") // started now: newer
	for _, id := range []string{"plan", "write", "review", "publish"} {
		if err := j.SetNodeState(ctx, "r1", id, NodePending, ""); err != nil {
			t.Fatal(err)
		}
	}

	n, err := j.BeginAttempt(ctx, "r1", "plan", ModeStart, "sim")
	if err != nil || n != 1 {
		t.Fatalf("BeginAttempt = %d, %v", n, err)
	}
	check(t, j.SetAttemptRef(ctx, "r1", "plan", 1, "resp_1"))
	check(t, j.SetAttemptCursor(ctx, "r1", "plan", 1, 40))
	check(t, j.EndAttempt(ctx, "r1", "plan", 1, AttemptEnd{Outcome: OutcomeError, ErrClass: "disconnect",
		Error: "stream disconnected before completion", Cursor: 41}))
	n, err = j.BeginAttempt(ctx, "r1", "plan", ModeReattach, "sim")
	if err != nil || n != 2 {
		t.Fatalf("second BeginAttempt = %d, %v", n, err)
	}
	check(t, j.EndAttempt(ctx, "r1", "plan", 2, AttemptEnd{Outcome: OutcomeOK, Cursor: NoProviderSeq}))
	check(t, j.CompleteNode(ctx, "r1", "plan", "the plan"))
	if _, err := j.BeginAttempt(ctx, "r1", "write", ModeStart, "sim"); err != nil {
		t.Fatal(err)
	}
	check(t, j.FailNode(ctx, "r1", "write", "deterministic", "401 unauthorized"))
	check(t, j.SetNodeState(ctx, "r1", "review", NodeSkipped, "needs write, which failed"))
	check(t, j.SetNodeState(ctx, "r1", "publish", NodeAttention, "unsafe request may have been sent"))
	check(t, j.SetRunStatus(ctx, "r1", RunFailed))

	runs, err := j.Runs(ctx, 0)
	if err != nil || len(runs) != 2 || runs[0].ID != "r2" || runs[1].ID != "r1" {
		t.Fatalf("Runs = %+v, %v; want r2 then r1", runs, err)
	}
	if runs[1].GraphText != nil {
		t.Errorf("Runs carries graph text")
	}
	if one, _ := j.Runs(ctx, 1); len(one) != 1 || one[0].ID != "r2" {
		t.Errorf("Runs(1) = %+v", one)
	}
	r, err := j.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Inputs["goal"] != "a \"quoted\"\ngoal" || r.Inputs["n"] != "3" || len(r.Inputs) != 2 {
		t.Fatalf("inputs = %q", r.Inputs)
	}
	if r2, err := j.Run(ctx, "r2"); err != nil || r2.Inputs != nil {
		t.Fatalf("run without inputs: %q, %v", r2.Inputs, err)
	}
	if r.Graph != "demo" || r.GraphPath != "demo.yaml" || string(r.GraphText) != string(text) || r.Profile != "ci" ||
		r.Status != RunFailed || !r.Started.Equal(time.Unix(100, 0)) || r.Finished.IsZero() ||
		r.GraphHash != fmt.Sprintf("%x", sha256.Sum256(text)) {
		t.Errorf("Run = %+v", r)
	}
	if _, err := j.Run(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Run(nope) = %v, want ErrNotFound", err)
	}

	nodes, err := j.Nodes(ctx, "r1")
	if err != nil || len(nodes) != 4 {
		t.Fatalf("Nodes = %+v, %v", nodes, err)
	}
	want := []struct {
		id       string
		state    NodeState
		attempts int
	}{{"plan", NodeCompleted, 2}, {"write", NodeFailed, 1}, {"review", NodeSkipped, 0}, {"publish", NodeAttention, 0}}
	for i, w := range want {
		if nodes[i].ID != w.id || nodes[i].State != w.state || nodes[i].Attempts != w.attempts || nodes[i].Finished.IsZero() {
			t.Errorf("node %d = %+v, want %v %v attempts %d, finished", i, nodes[i], w.id, w.state, w.attempts)
		}
	}
	if nodes[0].Output != "the plan" || nodes[0].Started.IsZero() {
		t.Errorf("plan = %+v", nodes[0])
	}
	states, err := j.NodeStates(ctx, "r1")
	if err != nil || len(states) != len(nodes) || states[0].Output != "" {
		t.Fatalf("NodeStates = %+v, %v", states, err)
	}
	for i := range states {
		if states[i].Output = nodes[i].Output; states[i] != nodes[i] {
			t.Errorf("NodeStates[%d] = %+v, Nodes has %+v", i, states[i], nodes[i])
		}
	}
	if nodes[1].ErrClass != "deterministic" || nodes[1].Error != "401 unauthorized" {
		t.Errorf("write = %+v", nodes[1])
	}
	if nodes[2].Reason != "needs write, which failed" || !nodes[2].Started.IsZero() {
		t.Errorf("review = %+v", nodes[2])
	}
	if node, err := j.Node(ctx, "r1", "publish"); err != nil || node.Reason != "unsafe request may have been sent" {
		t.Errorf("Node(publish) = %+v, %v", node, err)
	}
	if _, err := j.Node(ctx, "r1", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Node(nope) = %v, want ErrNotFound", err)
	}

	atts, err := j.Attempts(ctx, "r1", "plan")
	if err != nil || len(atts) != 2 {
		t.Fatalf("Attempts = %+v, %v", atts, err)
	}
	a := atts[0]
	if a.N != 1 || a.Mode != ModeStart || a.Provider != "sim" || a.Ref != "resp_1" || a.Cursor != 41 ||
		a.Outcome != OutcomeError || a.ErrClass != "disconnect" || a.Ended.IsZero() {
		t.Errorf("attempt 1 = %+v", a)
	}
	if a := atts[1]; a.N != 2 || a.Mode != ModeReattach || a.Cursor != -1 || a.Outcome != OutcomeOK {
		t.Errorf("attempt 2 = %+v", a)
	}
	if all, err := j.Attempts(ctx, "r1", ""); err != nil || len(all) != 3 || all[2].NodeID != "write" {
		t.Errorf("all attempts = %+v, %v", all, err)
	}

	// A resume moves the run back to running and clears Finished; a retried
	// node forgets its old error.
	check(t, j.SetRunStatus(ctx, "r1", RunRunning))
	if r, _ := j.Run(ctx, "r1"); r.Status != RunRunning || !r.Finished.IsZero() {
		t.Errorf("resumed run = %+v", r)
	}
	if _, err := j.BeginAttempt(ctx, "r1", "write", ModeRetry, "sim"); err != nil {
		t.Fatal(err)
	}
	if node, _ := j.Node(ctx, "r1", "write"); node.State != NodeRunning || node.Error != "" || !node.Finished.IsZero() {
		t.Errorf("retried node = %+v", node)
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStateChangeErrorsAreTheCallersOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openTest(t, "")
	createRun(t, j, "r")

	j.Append(Event{RunID: "r", Kind: "before", ProviderSeq: -1})
	if err := j.SetAttemptRef(ctx, "r", "n", 1, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetAttemptRef of a missing attempt = %v, want ErrNotFound", err)
	}
	if err := j.CreateRun(ctx, Run{ID: "r"}); err == nil || !strings.Contains(err.Error(), j.Path()) {
		t.Errorf("duplicate CreateRun = %v, want an error naming the path", err)
	}
	if _, err := j.BeginAttempt(ctx, "no-such-run", "n", ModeStart, "sim"); err == nil {
		t.Error("BeginAttempt in a missing run succeeded")
	}
	if err := j.SetRunStatus(ctx, "r", "bogus"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bogus status = %v, want ErrInvalid", err)
	}
	if err := j.SetRunStatus(ctx, "nope", RunFailed); !errors.Is(err, ErrNotFound) {
		t.Errorf("status of a missing run = %v, want ErrNotFound", err)
	}
	if err := j.Append(Event{RunID: "r"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Append without kind = %v, want ErrInvalid", err)
	}
	j.Append(Event{RunID: "r", Kind: "after", ProviderSeq: -1})
	check(t, j.Flush(ctx))
	evs, err := j.Events(ctx, "r", EventFilter{})
	if err != nil || len(evs) != 2 || evs[0].Kind != "before" || evs[1].Kind != "after" {
		t.Fatalf("events around failed changes = %+v, %v", evs, err)
	}
}

// Append waits while the queued payloads pass their bound, and goes on as
// the writer commits: a stream faster than the disk holds at most the
// bound (and one event) in memory, and loses nothing.
func TestQueuedBytesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), WithQueueBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.CreateRun(ctx, Run{ID: "r", Graph: "g", Status: RunRunning, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 64<<10)
	var peak int64
	const n = 400 // 25 MiB through a 1 MiB queue
	for i := range n {
		if err := j.Append(Event{RunID: "r", NodeID: "a", Attempt: 1, Kind: "delta", ProviderSeq: int64(i), Payload: payload}); err != nil {
			t.Fatal(err)
		}
		j.queued.mu.Lock()
		peak = max(peak, j.queued.n)
		j.queued.mu.Unlock()
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := j.Events(ctx, "r", EventFilter{})
	if err != nil || len(evs) != n {
		t.Fatalf("%d events (%v), want %d", len(evs), err, n)
	}
	if peak > 1<<20 {
		t.Errorf("%d bytes queued at most, want at most the 1 MiB bound", peak)
	}
	j.queued.mu.Lock()
	left := j.queued.n
	j.queued.mu.Unlock()
	if left != 0 {
		t.Errorf("%d bytes still counted as queued after the flush", left)
	}
}
