package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
)

// unfinished runs a tiny graph into db and marks its node pending and the
// run failed, as a run whose node failed leaves them: one to resume. It
// returns the graph file and the run id.
func unfinished(t *testing.T, db string) (graph, runID string) {
	t.Helper()
	src, err := os.ReadFile(tinyGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // a short path: a log line keeps it whole
	graph = "tiny.yaml"
	if err := os.WriteFile(graph, src, 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "run", "--db", db, graph)
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	ctx := context.Background()
	runs, err := j.Runs(ctx, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v, %v", runs, err)
	}
	if err := j.SetNodeState(ctx, runs[0].ID, "only", journal.NodePending, ""); err != nil {
		t.Fatal(err)
	}
	if err := j.SetRunStatus(ctx, runs[0].ID, journal.RunFailed); err != nil {
		t.Fatal(err)
	}
	return graph, runs[0].ID
}

// Issue 46: resume checks everything before anything starts. A run another
// runner holds is refused before the graph's simulators serve.
func TestResumeChecksTheLockBeforeStarting(t *testing.T) {
	db := filepath.Join(t.TempDir(), "j.db")
	_, runID := unfinished(t, db)
	j := testkit.OpenJournal(t, db)
	defer j.Close()
	o := journal.NewOwner() // this process: alive, so the run is held
	if err := j.AcquireRun(context.Background(), runID, o); err != nil {
		t.Fatal(err)
	}
	defer j.ReleaseRun(context.Background(), runID, o)
	code, _, stderr := runCLI(t, "resume", "last", "--db", db)
	if code == exitOK || !strings.Contains(stderr, "is being run by pid") {
		t.Fatalf("resume of a held run: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "simulator serving") {
		t.Errorf("a simulator started before the lock was checked:\n%s", stderr)
	}
}

// Issue 46: resume says when the graph file was edited since the run
// started, and that the journaled graph is what resumes; unedited, nothing.
func TestResumeSaysTheGraphFileChanged(t *testing.T) {
	db := filepath.Join(t.TempDir(), "j.db")
	g, runID := unfinished(t, db)
	const says = "edited since the run started: resuming the graph journaled with the run, not the file"
	code, _, stderr := runCLI(t, "resume", "last", "--db", db)
	if code != exitOK || strings.Contains(stderr, says) {
		t.Fatalf("resume, the file unchanged: exit %d\n%s", code, stderr)
	}
	src, err := os.ReadFile(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g, append(src, "# edited\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	j := testkit.OpenJournal(t, db)
	err = j.SetNodeState(context.Background(), runID, "only", journal.NodePending, "")
	if err == nil {
		err = j.SetRunStatus(context.Background(), runID, journal.RunFailed)
	}
	if j.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "resume", "last", "--db", db)
	if code != exitOK || !strings.Contains(stderr, says) || !strings.Contains(stderr, g) {
		t.Errorf("resume, the file edited: exit %d; want it to say %q of %s\n%s", code, says, g, stderr)
	}
}
