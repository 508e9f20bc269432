package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
)

// twoNodeGraph writes a graph of two simulated nodes, b after a.
func twoNodeGraph(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	src := "name: " + name + "\nproviders:\n  local: {kind: sim}\nnodes:\n  - {id: alpha, prompt: Say a.}\n" +
		"  - {id: beta, needs: [alpha], prompt: 'Then {{ output \"alpha\" }}'}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawDB opens the journal file with SQLite alone, to count what it holds.
func rawDB(t *testing.T, db string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func scalar[T any](t *testing.T, raw *sql.DB, query string, args ...any) T {
	t.Helper()
	var v T
	if err := raw.QueryRow(query, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// rowsOf counts a run's rows (all runs' for "") in every table that holds
// them: runs, nodes, attempts, events, provider_seq_tops, folds.
func rowsOf(t *testing.T, raw *sql.DB, id string) (n [6]int) {
	t.Helper()
	for i, tb := range []string{"runs", "nodes", "attempts", "events", "provider_seq_tops", "folds"} {
		col := "run IN (SELECT id FROM runs WHERE id = ?1) OR ?1 = ''"
		switch tb {
		case "runs":
			col = "id = ?1 OR ?1 = ''"
		case "events", "provider_seq_tops", "folds":
			col = "run IN (SELECT key FROM runs WHERE id = ?1) OR ?1 = ''"
		}
		n[i] = scalar[int](t, raw, `SELECT count(*) FROM `+tb+` WHERE `+col, id)
	}
	return n
}

// runIDs lists the journal's runs, newest first, as status --json does.
func runIDs(t *testing.T, db string, filter ...string) []string {
	t.Helper()
	var doc struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, append([]string{"status", "--json", "--db", db}, filter...)...)), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range doc.Runs {
		out = append(out, r["run_id"].(string))
	}
	return out
}

// delete and prune remove runs whole: dry-run deletes nothing, the journal
// stays intact (integrity and foreign keys), and compact gives the space
// back.
func TestDeleteAndPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	g := twoNodeGraph(t, dir, "pair")
	for range 4 {
		mustRun(t, "run", "--sim", "--db", db, g)
	}
	all := runIDs(t, db, "--limit", "0")
	if len(all) != 4 {
		t.Fatalf("%d runs", len(all))
	}
	raw := rawDB(t, db)
	// The two oldest runs started 9 and 10 days ago (their order kept).
	for i, id := range all[2:] {
		if _, err := raw.Exec(`UPDATE runs SET started = ? WHERE id = ?`, time.Now().Add(-time.Duration(9+i)*24*time.Hour).UnixNano(), id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(`UPDATE runs SET status = 'failed' WHERE id = ?`, all[3]); err != nil {
		t.Fatal(err)
	}
	events0 := scalar[int](t, raw, `SELECT count(*) FROM events`)
	kept := rowsOf(t, raw, all[0])
	if kept[0] != 1 || kept[1] == 0 || kept[3] == 0 {
		t.Fatalf("the run's rows (runs, nodes, attempts, events, tops, folds): %v", kept)
	}

	out := mustRun(t, "prune", "--older-than", "7d", "--dry-run", "--db", db)
	for i, id := range all {
		if strings.Contains(out, id) != (i >= 2) {
			t.Errorf("prune --dry-run lists %s: %v (i=%d)\n%s", id, strings.Contains(out, id), i, out)
		}
	}
	if got := runIDs(t, db, "--limit", "0"); !slices.Equal(got, all) || scalar[int](t, raw, `SELECT count(*) FROM events`) != events0 {
		t.Fatalf("a dry run deleted something: %v left", got)
	}
	for _, bad := range [][]string{{"--older-than", "0d"}, {"--older-than", "-3h"}, {"--older-than", "soon"}, {}, {"--older-than", "7d", "--status", "done"}} {
		if code, _, stderr := runCLI(t, append([]string{"prune", "--db", db}, bad...)...); code != exitUsage {
			t.Errorf("prune %v: exit %d, want 2\n%s", bad, code, stderr)
		}
	}

	out = mustRun(t, "prune", "--older-than", "7d", "--status", "failed", "--db", db)
	if !strings.Contains(out, all[3]) || strings.Contains(out, all[2]) {
		t.Errorf("prune --status failed:\n%s", out)
	}
	mustRun(t, "prune", "--older-than", "7d", "--db", db)
	if got := runIDs(t, db, "--limit", "0"); !slices.Equal(got, all[:2]) {
		t.Fatalf("after prune: %v, want %v", got, all[:2])
	}

	// delete takes what the other commands take: a unique prefix, last.
	out = mustRun(t, "delete", all[1][:8], "--db", db)
	if !strings.Contains(out, "deleted run "+all[1]) {
		t.Errorf("delete said: %s", out)
	}
	if code, _, stderr := runCLI(t, "delete", "nosuch", "--db", db); code != exitUsage {
		t.Errorf("delete of an unknown run: exit %d\n%s", code, stderr)
	}
	// Every row of the deleted runs is gone; the remaining run's are whole.
	if got := rowsOf(t, raw, all[0]); got != kept {
		t.Errorf("the kept run's rows: %v, were %v", got, kept)
	}
	if got := rowsOf(t, raw, ""); got != kept {
		t.Errorf("the journal's rows: %v, want the kept run's alone: %v", got, kept)
	}
	if ok := scalar[string](t, raw, `PRAGMA integrity_check`); ok != "ok" {
		t.Errorf("integrity_check: %s", ok)
	}
	if rows, err := raw.Query(`PRAGMA foreign_key_check`); err != nil || rows.Next() {
		t.Errorf("foreign_key_check found dangling rows (%v)", err)
	} else {
		rows.Close()
	}
	if out := mustRun(t, "show", "last", "beta", "--db", db); out == "" {
		t.Error("the kept run's output is gone")
	}

	free := scalar[int](t, raw, `PRAGMA freelist_count`)
	size := journal.DiskSize(db)
	if free == 0 {
		t.Fatal("no page was freed by deleting three runs")
	}
	raw.Close()
	mustRun(t, "compact", "--db", db)
	raw = rawDB(t, db)
	if n := scalar[int](t, raw, `PRAGMA freelist_count`); n >= free {
		t.Errorf("free pages after compact: %d, before %d", n, free)
	}
	if n := journal.DiskSize(db); n >= size {
		t.Errorf("file size after compact: %d, before %d", n, size)
	}
	mustRun(t, "delete", "last", "--db", db)
	if got := runIDs(t, db); len(got) != 0 {
		t.Errorf("after deleting the last run: %v", got)
	}
}

// A run that a live process runs is refused, naming the process, and so
// is every other run named with it.
func TestDeleteRefusesALiveRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	mustRun(t, "run", "--sim", "--db", db, twoNodeGraph(t, dir, "pair"))
	done := runIDs(t, db)[0]
	ctx := context.Background()
	j, err := journal.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	o := journal.NewOwner() // this process runs it: alive
	if err := j.CreateRun(ctx, journal.Run{ID: "live-run", Graph: "pair", GraphText: []byte("x"), Owner: o}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "delete", done, "live-run", "--db", db)
	if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("pid %d on host %s", os.Getpid(), o.Host)) {
		t.Fatalf("delete of a live run: exit %d\n%s", code, stderr)
	}
	if got := runIDs(t, db); len(got) != 2 {
		t.Fatalf("runs after a refused delete: %v", got)
	}
	out := mustRun(t, "prune", "--older-than", "1ns", "--db", db)
	if !strings.Contains(out, done) || strings.Contains(out, "live-run") {
		t.Errorf("prune beside a live run:\n%s", out)
	}
	if got := runIDs(t, db); !slices.Equal(got, []string{"live-run"}) {
		t.Errorf("after prune: %v", got)
	}
}

// The runs list filters, in the table and in JSON, each run's document as
// the unfiltered list has it.
func TestStatusFilters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	mustRun(t, "run", "--sim", "--db", db, twoNodeGraph(t, dir, "first"))
	for range 3 {
		mustRun(t, "run", "--sim", "--db", db, twoNodeGraph(t, dir, "second"))
	}
	all := runIDs(t, db)
	raw := rawDB(t, db)
	if _, err := raw.Exec(`UPDATE runs SET status = 'failed', started = ? WHERE id = ?`, time.Now().Add(-72*time.Hour).UnixNano(), all[3]); err != nil {
		t.Fatal(err)
	}
	all = runIDs(t, db) // all[3] is still the oldest
	for _, c := range []struct {
		filter []string
		want   []string
	}{
		{[]string{"--graph", "second"}, all[:3]},
		{[]string{"--graph", "first"}, all[3:]},
		{[]string{"--status", "failed"}, all[3:]},
		{[]string{"--status", "completed", "--limit", "2"}, all[:2]},
		{[]string{"--since", "1d"}, all[:3]},
		{[]string{"--since", "1d", "--graph", "first"}, nil},
		{[]string{"--status", "interrupted"}, nil},
	} {
		if got := runIDs(t, db, c.filter...); !slices.Equal(got, c.want) {
			t.Errorf("status --json %v: %v, want %v", c.filter, got, c.want)
		}
		table := mustRun(t, append([]string{"status", "--db", db}, c.filter...)...)
		if n := strings.Count(table, "\n") - 1; n != len(c.want) {
			t.Errorf("status %v: %d rows, want %d\n%s", c.filter, n, len(c.want), table)
		}
		for _, id := range c.want {
			if !strings.Contains(table, id) {
				t.Errorf("status %v: no %s\n%s", c.filter, id, table)
			}
		}
	}
	// A filtered run's document is the unfiltered list's.
	whole := mustRun(t, "status", "--json", "--db", db)
	one := mustRun(t, "status", "--json", "--status", "failed", "--db", db)
	var a, b struct{ Runs []json.RawMessage }
	if json.Unmarshal([]byte(whole), &a) != nil || json.Unmarshal([]byte(one), &b) != nil || len(b.Runs) != 1 || string(b.Runs[0]) != string(a.Runs[3]) {
		t.Errorf("the filtered document differs:\n%s\n%s", one, whole)
	}
	for _, bad := range [][]string{{"--status", "complete"}, {"--limit", "-1"}, {"--since", "yesterday"}, {"last", "--limit", "3"}} {
		code, _, stderr := runCLI(t, append([]string{"status", "--db", db}, bad...)...)
		if code != exitUsage {
			t.Errorf("status %v: exit %d, want 2\n%s", bad, code, stderr)
		}
		if bad[1] == "complete" && !strings.Contains(stderr, "running, completed, failed, interrupted") {
			t.Errorf("an unknown status does not name the valid ones: %s", stderr)
		}
	}
}

// run --print writes the nodes' outputs, and nothing else, on stdout.
func TestRunPrint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	g := twoNodeGraph(t, dir, "pair")
	code, stdout, stderr := runCLI(t, "run", "--sim", "--db", db, g, "--print", "beta")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	beta := mustRun(t, "show", "last", "beta", "--db", db)
	if beta == "" || stdout != beta {
		t.Errorf("run --print beta wrote %q; show prints %q", stdout, beta)
	}
	if !strings.Contains(stderr, "NODE") || !strings.Contains(stderr, "completed") {
		t.Errorf("the result table is not on stderr:\n%s", stderr)
	}
	code, stdout, _ = runCLI(t, "run", "--sim", "--db", db, g, "--print", "alpha", "--print", "beta")
	alpha, beta := mustRun(t, "show", "last", "alpha", "--db", db), mustRun(t, "show", "last", "beta", "--db", db)
	sep := ""
	if !strings.HasSuffix(alpha, "\n") {
		sep = "\n"
	}
	if code != exitOK || stdout != alpha+sep+beta {
		t.Errorf("run --print alpha --print beta: exit %d, wrote %q", code, stdout)
	}
	fresh := filepath.Join(dir, "fresh.db")
	code, stdout, stderr = runCLI(t, "run", "--sim", "--db", fresh, g, "--print", "bta")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, `did you mean "beta"?`) {
		t.Errorf("--print of an unknown node: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("the refused run created its journal")
	}
	if code, _, _ := runCLI(t, "run", "--sim", "--db", fresh, g, "--print", "beta", "--json"); code != exitUsage {
		t.Errorf("--print with --json: exit %d", code)
	}
}
