package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/dirstate"
)

func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	if _, err := OpenReadOnly(ctx, path); err == nil {
		t.Fatal("opened a journal that does not exist")
	}
	j, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.CreateRun(ctx, Run{ID: "r", Graph: "g", Status: RunRunning}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, err := ro.Run(ctx, "r"); err != nil || r.Graph != "g" {
		t.Fatalf("read %+v, %v", r, err)
	}
	if !ro.Abandoned(Run{ID: "r", Status: RunRunning}) {
		t.Error("a running run without an owner is abandoned, read-only or not")
	}
	if err := ro.SetRunStatus(ctx, "r", RunFailed); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write to a read-only journal: %v, want ErrReadOnly", err)
	}
	if err := ro.Append(Event{RunID: "r", Kind: "delta"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("append to a read-only journal: %v, want ErrReadOnly", err)
	}
}

// Issue 24: what cannot be read as a journal is said in noderun's words,
// naming the file, classifiable with errors.Is, and nothing is created
// beside it.
func TestOpenReadOnlyRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	write := func(b []byte) func(string) error {
		return func(p string) error { return os.WriteFile(p, b, 0o600) }
	}
	sqlite := func(stmts string) func(string) error {
		return func(p string) error {
			db, err := sql.Open("sqlite", p)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.Exec(stmts)
			return err
		}
	}
	cases := []struct {
		name  string
		make  func(path string) error // nil: no file
		is    []error
		says  string
		write bool // Open refuses it too, saying the same
	}{
		{"missing", nil, []error{fs.ErrNotExist}, "no journal at ", false},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o700) }, []error{ErrNotJournal, ErrInvalid}, "is not a noderun journal (a directory)", true},
		{"not SQLite", write([]byte("these are my notes\n")), []error{ErrNotJournal, ErrInvalid}, "is not a noderun journal (not an SQLite file)", true},
		{"shorter than a header", write([]byte("x")), []error{ErrNotJournal}, "(not an SQLite file)", true},
		{"an SQLite header and then garbage", write([]byte(sqliteMagic + strings.Repeat("garbage!", 128))), []error{ErrNotJournal}, "(not an SQLite file)", true},
		{"empty", write(nil), []error{ErrNotJournal}, "is not a noderun journal (an empty file)", false},
		{"another program's database", sqlite("CREATE TABLE notes (text TEXT)"), []error{ErrNotJournal, ErrInvalid}, "(an SQLite database without noderun's tables)", true},
		{"an SQLite database without tables", sqlite("PRAGMA application_id = 7"), []error{ErrNotJournal}, "(an SQLite database with no tables)", false},
		{"a newer schema", sqlite("CREATE TABLE runs (id TEXT); PRAGMA user_version = 999"), []error{ErrSchema}, "newer than this build knows", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "x.db")
			if c.make != nil {
				check(t, c.make(path))
			}
			before := dirstate.Of(t, dir)
			_, err := OpenReadOnly(ctx, path)
			checkRefusal(t, err, path, c.is, c.says)
			if c.write {
				_, err := Open(ctx, path, WithLogger(quiet))
				checkRefusal(t, err, path, c.is, c.says)
			}
			if after := dirstate.Of(t, dir); after != before {
				t.Errorf("files changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		check(t, os.WriteFile(path, []byte(sqliteMagic), 0))
		if os.Geteuid() == 0 && os.Getenv(unreadableEnv) == "" {
			// Root reads any file: the check runs again in this test
			// binary without the capabilities that allow it.
			setpriv, err := exec.LookPath("setpriv")
			if err != nil {
				t.Fatal("as root this needs setpriv (util-linux) to drop the capability to read any file")
			}
			cmd := exec.Command(setpriv, "--bounding-set=-dac_override,-dac_read_search", os.Args[0],
				"-test.run", "^TestOpenReadOnlyRefusals$/^unreadable$", "-test.count=1")
			cmd.Env = append(os.Environ(), unreadableEnv+"="+path)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
				t.Fatalf("the check without the capability: %v\n%s", err, out)
			}
			return
		}
		if p := os.Getenv(unreadableEnv); p != "" {
			path = p // the file the parent made, as root
		}
		_, err := OpenReadOnly(ctx, path)
		checkRefusal(t, err, path, []error{fs.ErrPermission}, "not readable by this user")
	})
	t.Run("a missing directory, for writing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no", "such", "x.db")
		_, err := Open(ctx, path, WithLogger(quiet))
		checkRefusal(t, err, path, []error{fs.ErrNotExist}, "cannot create it (no such file or directory): make the directory ")
	})
}

func checkRefusal(t *testing.T, err error, path string, is []error, says string) {
	t.Helper()
	if err == nil {
		t.Fatal("opened")
	}
	for _, target := range is {
		if !errors.Is(err, target) {
			t.Errorf("%v: errors.Is(%v) is false", err, target)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, says) || !strings.Contains(msg, path) {
		t.Errorf("%q: want it to name %s and say %q", msg, path, says)
	}
	for _, leak := range []string{"open: open", "(26)", "(14)", "invalid argument:"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("%q: leaks %q", err, leak)
		}
	}
}

// gapFree checks that events are seqs 1, 2, 3...
func gapFree(t *testing.T, evs []Event) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

// unreadableEnv names, in a test binary run without the capability to read
// any file, the unreadable file the root parent made.
const unreadableEnv = "NODERUN_JOURNAL_UNREADABLE"

// walHelperEnv makes the test binary a writer that crashes (exits without
// closing anything) right after it committed walEvents events to the WAL.
// A read transaction it holds open keeps its checkpointer from moving them
// into the database file, so they are in the WAL only.
const walHelperEnv = "NODERUN_JOURNAL_WAL_HELPER"

const walEvents = 300

func walHelper(path string) {
	ctx := context.Background()
	j, fail := helperJournal(path)
	fmt.Println("ready")
	check := func(err error) {
		if err != nil {
			fail(err)
		}
	}
	check(j.Flush(ctx))
	db, err := sql.Open("sqlite", path)
	check(err)
	conn, err := db.Conn(ctx)
	check(err)
	_, err = conn.ExecContext(ctx, "BEGIN")
	check(err)
	var n int
	check(conn.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n))
	for i := range walEvents {
		check(j.Append(Event{RunID: "run", NodeID: "n", Kind: KindDelta, ProviderSeq: -1, Payload: []byte(fmt.Sprint(i, " "))}))
	}
	check(j.Flush(ctx))
	fmt.Println("committed")
	os.Exit(0) // as kill -9: nothing is closed, checkpointed or removed
}

// crashedWriter leaves in dir/j.db the journal of a writer that crashed with
// walEvents events of the run "run" in its WAL only.
func crashedWriter(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "j.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), walHelperEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "committed") {
		t.Fatalf("writer: %v\n%s", err, out)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the crashed writer left no %s: %v", filepath.Base(f), err)
		}
	}
	return path
}

// closedJournal writes a journal with the run "run" and n events, and closes it.
func closedJournal(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "j.db")
	j, err := Open(context.Background(), path, WithLogger(quiet))
	check(t, err)
	check(t, j.CreateRun(context.Background(), Run{ID: "run", Graph: "g"}))
	for i := range n {
		check(t, j.Append(Event{RunID: "run", NodeID: "n", Kind: KindDelta, ProviderSeq: -1, Payload: []byte(fmt.Sprint(i, " "))}))
	}
	check(t, j.Close())
	return path
}

// countEvents reads the run "run"'s events with a connection of its own.
func countEvents(t *testing.T, path, params string) int {
	t.Helper()
	db, err := openDB(path, params)
	check(t, err)
	defer db.Close()
	var tables, n int
	check(t, db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'events'").Scan(&tables))
	if tables == 0 {
		return 0 // the schema too is in the WAL only
	}
	check(t, db.QueryRow("SELECT count(*) FROM events").Scan(&n))
	return n
}

// readAll reads a journal the way the read commands do and returns how many
// events the run "run" has.
func readAll(t *testing.T, path string) int {
	t.Helper()
	ctx := context.Background()
	ro, err := OpenReadOnly(ctx, path)
	check(t, err)
	defer func() { check(t, ro.Close()) }()
	runs, err := ro.Runs(ctx, 0)
	if err != nil || len(runs) != 1 || runs[0].ID != "run" {
		t.Fatalf("runs %v, %v", runs, err)
	}
	if _, err := ro.Run(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Nodes(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	evs, err := ro.Events(ctx, "run", EventFilter{AfterSeq: -1})
	check(t, err)
	gapFree(t, evs)
	return len(evs)
}

// Issue 24: reading a journal creates no file beside it and changes none of
// its bytes, however it was left: closed by its writer, by a writer that
// crashed (what that writer committed to the WAL is read, the WAL is not
// moved into the file), with the files an older noderun's reads left; in a
// directory this process may write, and in one it may not.
func TestReadOnlyCreatesNothing(t *testing.T) {
	t.Parallel()
	crashed := crashedWriter(t, t.TempDir())
	// The crashed writer's events are in its WAL only: reading the file
	// alone (immutable) would miss them.
	if n := countEvents(t, crashed, "mode=ro&immutable=1"); n != 0 {
		t.Fatalf("the database file holds %d of the crashed writer's events: the cases do not test reading the WAL", n)
	}
	crashedWriter := func(t *testing.T, dir string) string {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(crashed + suffix)
			check(t, err)
			check(t, os.WriteFile(filepath.Join(dir, "j.db"+suffix), b, 0o600))
		}
		return filepath.Join(dir, "j.db")
	}
	cases := []struct {
		name   string
		make   func(t *testing.T, dir string) string
		events int
	}{
		{"closed", func(t *testing.T, dir string) string { return closedJournal(t, dir, 50) }, 50},
		{"crashed writer", crashedWriter, walEvents},
		{"crashed writer without its -shm", func(t *testing.T, dir string) string {
			path := crashedWriter(t, dir)
			check(t, os.Remove(path+"-shm"))
			return path
		}, walEvents},
		{"files an older noderun's read left", func(t *testing.T, dir string) string {
			path := closedJournal(t, dir, 50)
			countEvents(t, path, "mode=ro") // what OpenReadOnly did before: it leaves an empty -wal and a -shm
			if _, err := os.Stat(path + "-shm"); err != nil {
				t.Fatalf("mode=ro no longer leaves a -shm (%v): this case tests nothing", err)
			}
			return path
		}, 50},
	}
	for _, c := range cases {
		for _, readOnly := range []bool{false, true} {
			name := c.name
			if readOnly {
				name += ", read-only directory"
			}
			t.Run(name, func(t *testing.T) {
				path := c.make(t, t.TempDir())
				if readOnly {
					path = filepath.Join(readOnlyCopy(t, filepath.Dir(path)), filepath.Base(path))
				}
				before := dirstate.Of(t, filepath.Dir(path))
				if n := readAll(t, path); n != c.events {
					t.Errorf("read %d events, want %d", n, c.events)
				}
				if after := dirstate.Of(t, filepath.Dir(path)); after != before {
					t.Errorf("files changed:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	}
}

// readOnlyCopy copies dir's files into a directory this process cannot
// write: a read-only tmpfs for root (whom chmod does not stop), else a
// directory and files without write permission.
func readOnlyCopy(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	mounted := os.Geteuid() == 0 && mountTmpfs(t, to)
	ents, err := os.ReadDir(dir)
	check(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		check(t, err)
		check(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o444))
	}
	if mounted {
		remountReadOnly(t, to)
	} else {
		check(t, os.Chmod(to, 0o555))
		t.Cleanup(func() { os.Chmod(to, 0o700) })
	}
	if f, err := os.Create(filepath.Join(to, "probe")); err == nil {
		f.Close()
		t.Fatalf("%s is writable: the case tests nothing", to)
	}
	return to
}

// Issue 24: a reader opened before a writer starts reads what the writer
// then commits (a follow loop must not stay on the file alone), keeps
// reading while it writes, and never keeps the writer from removing its
// -wal and -shm when it closes; a writer that comes and goes between two
// reads is seen too.
func TestReadOnlyFollowsAWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, path, ro := follower(t)
	events := func() int {
		t.Helper()
		evs, err := ro.Events(ctx, "run", EventFilter{AfterSeq: -1})
		check(t, err)
		gapFree(t, evs)
		return len(evs)
	}
	if n := events(); n != 10 {
		t.Fatalf("%d events, want 10", n)
	}

	w := openTest(t, path)
	appendN := func(n int) {
		for i := range n {
			check(t, w.Append(Event{RunID: "run", NodeID: "n", Kind: KindDelta, ProviderSeq: -1, Payload: []byte(fmt.Sprint(i))}))
		}
		check(t, w.Flush(ctx))
	}
	appendN(5)
	if n := events(); n != 15 {
		t.Fatalf("after a writer started and committed 5: %d events, want 15", n)
	}

	// A poller reads while the writer commits: counts only grow.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pollErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs, err := ro.Events(ctx, "run", EventFilter{AfterSeq: -1})
			if err == nil && len(evs) < last {
				err = fmt.Errorf("events went from %d to %d", last, len(evs))
			}
			if err != nil {
				pollErr = err
				return
			}
			last = len(evs)
		}
	}()
	for range 20 {
		appendN(50)
	}
	close(stop)
	wg.Wait()
	check(t, pollErr)
	if n := events(); n != 1015 {
		t.Fatalf("%d events, want 1015", n)
	}

	check(t, w.Close())
	if got := dirstate.Of(t, dir); strings.Contains(got, "-wal") || strings.Contains(got, "-shm") {
		t.Errorf("the writer could not remove its files, a reader being open: %s", got)
	}
	if n := events(); n != 1015 {
		t.Fatalf("after the writer closed: %d events, want 1015", n)
	}

	// A writer that comes and goes between two reads (no -wal before nor
	// after): the reader's connection on the file must not serve stale pages.
	w2, err := Open(ctx, path, WithLogger(quiet))
	check(t, err)
	for i := range 7 {
		check(t, w2.Append(Event{RunID: "run", NodeID: "n", Kind: KindDelta, ProviderSeq: -1, Payload: []byte(fmt.Sprint(i))}))
	}
	check(t, w2.Close())
	if n := events(); n != 1022 {
		t.Fatalf("after a writer came and went: %d events, want 1022", n)
	}
	check(t, ro.Close())
	if got := dirstate.Of(t, dir); strings.Contains(got, "-wal") || strings.Contains(got, "-shm") {
		t.Errorf("files left beside the journal: %s", got)
	}
}

// follower opens read-only a closed journal of 10 events in a directory of
// its own (closed when the test ends).
func follower(t *testing.T) (dir, path string, ro *Journal) {
	t.Helper()
	dir = t.TempDir()
	path = closedJournal(t, dir, 10)
	ro, err := OpenReadOnly(context.Background(), path)
	check(t, err)
	t.Cleanup(func() { ro.Close() })
	return dir, path, ro
}

// A journal named by a symbolic link has its -wal and -shm beside the file
// the link names, where SQLite looks for them: so does OpenReadOnly.
func TestReadOnlyThroughASymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := crashedWriter(t, dir)
	link := filepath.Join(t.TempDir(), "link.db")
	check(t, os.Symlink(path, link))
	before := dirstate.Of(t, dir)
	if n := readAll(t, link); n != walEvents {
		t.Errorf("read %d events through the link, want %d", n, walEvents)
	}
	if after := dirstate.Of(t, dir); after != before {
		t.Errorf("files changed:\nbefore %s\nafter  %s", before, after)
	}
}

// A follower polling while the writer ends: a read that decided on the WAL
// just before the writer removed it must not leave an empty -wal and a -shm
// behind (the writer had removed them; mode=ro created them again). Each
// round ends a writer under two pollers; without the sweep, a quarter of the
// rounds left files here.
func TestReadOnlyLeavesNoFilesAsAWriterEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, path, ro := follower(t)
	left := 0
	for round := range 60 {
		w, err := Open(ctx, path, WithLogger(quiet))
		check(t, err)
		for i := range 5 {
			check(t, w.Append(Event{RunID: "run", NodeID: "n", Kind: KindDelta, ProviderSeq: -1, Payload: []byte(fmt.Sprint(i))}))
		}
		check(t, w.Flush(ctx))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = ro.Events(ctx, "run", EventFilter{AfterSeq: -1})
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		check(t, w.Close())
		close(stop)
		wg.Wait()
		if got := dirstate.Of(t, dir); strings.Contains(got, "-wal") || strings.Contains(got, "-shm") {
			left++
			t.Logf("round %d: %s", round, got)
			w, err := Open(ctx, path, WithLogger(quiet)) // the next round starts without them
			check(t, err)
			check(t, w.Close())
		}
	}
	if left > 0 {
		t.Errorf("%d rounds left files", left)
	}
}

// A journal of an older schema is refused for reading with a SchemaError
// that says so (the CLI migrates it with Open, then reads), a newer one with
// one that does not.
func TestSchemaErrorSaysOlderOrNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		have  int
		older bool
		says  string
	}{{len(migrations) - 1, true, "is older than this build's"}, {len(migrations) + 1, false, "is newer than this build knows"}} {
		path := filepath.Join(t.TempDir(), "j.db")
		openTest(t, path).Close()
		db, err := openDB(path, writerParams)
		check(t, err)
		_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", c.have))
		check(t, err)
		check(t, db.Close())
		_, err = OpenReadOnly(ctx, path)
		var se *SchemaError
		if !errors.As(err, &se) || !errors.Is(err, ErrSchema) || se.Older() != c.older || se.Have != c.have || !strings.Contains(err.Error(), c.says) {
			t.Errorf("version %d: %v (SchemaError %+v), want a SchemaError, older %v, saying %q", c.have, err, se, c.older, c.says)
		}
	}
}
