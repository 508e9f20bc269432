package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/graph"
	"github.com/noderun/noderun/runner/view"
)

// Local carries out the write endpoints on a journal, in this process: runs
// it starts or resumes go on whatever happens to the request, and are
// interrupted (resumable) when Close is called.
type Local struct {
	// DB is the journal's path; Local opens it for writing at its first
	// write (the server reads it through a read-only Journal of its own).
	DB string
	// Dir is the directory whose graph files POST /api/runs may name (by a
	// relative path, never outside it).
	Dir string
	// Options are the runs' options (profile, parallelism, simulator,
	// logger, kinds); Journal, Inputs, RunID and Profile are set per run.
	Options runner.Options
	// JournalOptions open the journal (its logger, a write observer).
	JournalOptions []journal.Option

	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	j  *journal.Journal
}

func (l *Local) init() {
	l.once.Do(func() { l.ctx, l.cancel = context.WithCancel(context.Background()) })
}

// journal opens the journal for writing, once.
func (l *Local) journal(ctx context.Context) (*journal.Journal, error) {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.j != nil {
		return l.j, nil
	}
	if err := l.ctx.Err(); err != nil {
		return nil, errors.New("the server is stopping")
	}
	j, err := journal.Open(ctx, l.DB, l.JournalOptions...)
	if err != nil {
		return nil, err
	}
	l.j = j
	return j, nil
}

// Close interrupts the runs this Local started or resumed, waits for them to
// journal that (each is then resumable), and closes the journal.
func (l *Local) Close() error {
	l.init()
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.j == nil {
		return nil
	}
	err := l.j.Close()
	l.j = nil
	return err
}

// graph reads the graph a start names: a file under Dir, or YAML.
func (l *Local) graph(ctx context.Context, req StartRequest) (*runner.Graph, error) {
	switch {
	case req.Graph != "" && req.YAML != "":
		return nil, &BadRequest{errors.New("give graph (a file) or yaml (its text), not both")}
	case req.Graph != "":
		if !filepath.IsLocal(req.Graph) {
			return nil, &BadRequest{fmt.Errorf("graph %q: name a file under the served directory by a relative path", req.Graph)}
		}
		g, err := runner.LoadGraphContext(ctx, filepath.Join(l.Dir, req.Graph))
		if err != nil {
			return nil, &BadRequest{err}
		}
		return g, nil
	case req.YAML != "":
		opts := l.Options
		g, err := runner.ParseGraphWith("request.yaml", []byte(req.YAML), opts)
		if err != nil {
			return nil, &BadRequest{err}
		}
		return g, nil
	}
	return nil, &BadRequest{errors.New("give graph (a file under the served directory) or yaml (a graph's text)")}
}

// Start checks a graph and its inputs as `noderun run` does, then runs it;
// it returns when the run is journaled.
func (l *Local) Start(ctx context.Context, req StartRequest) (string, error) {
	l.init()
	g, err := l.graph(ctx, req)
	if err != nil {
		return "", err
	}
	opts := l.Options
	opts.RunID = uuid.NewString()
	if opts.Inputs, err = l.inputs(g, req.Inputs); err != nil {
		return "", err
	}
	if req.Profile != "" {
		opts.Profile = req.Profile
	}
	// Everything that can be wrong with the request is found before the
	// journal is touched.
	if err := g.CheckInputs(opts.Inputs, opts.MaxInputBytes); err != nil {
		return "", &BadRequest{err}
	}
	if err := errors.Join(runner.Check(g, &opts), runner.CheckEnvironment(g, &opts)); err != nil {
		return "", &BadRequest{err}
	}
	j, err := l.journal(ctx)
	if err != nil {
		return "", err
	}
	opts.Journal = j
	return opts.RunID, l.launch(ctx, j, opts.RunID, func(ctx context.Context) error {
		_, err := runner.Run(ctx, g, opts)
		return err
	})
}

// inputs are a start's inputs, a file input's path taken under Dir: a
// request names files of the served directory only.
func (l *Local) inputs(g *runner.Graph, given map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(given))
	for k, v := range given {
		if in := g.Input(k); in != nil && in.Type == graph.InputFile {
			if !filepath.IsLocal(v) {
				return nil, &BadRequest{fmt.Errorf("input %s: name a file under the served directory by a relative path (%q is not)", k, v)}
			}
			v = filepath.Join(l.Dir, v)
		}
		out[k] = v
	}
	return out, nil
}

// Resume checks a resume as `noderun resume` does, then resumes the run.
func (l *Local) Resume(ctx context.Context, runID string, retry []string) error {
	l.init()
	j, err := l.journal(ctx)
	if err != nil {
		return err
	}
	r, err := j.Run(ctx, runID)
	if err != nil {
		return err
	}
	if r.Status == journal.RunRunning && !j.Abandoned(r) {
		return &Conflict{fmt.Errorf("run %s is being run by %s; one runner per run: wait for it, or stop it first", runID, r.Owner)}
	}
	for _, id := range retry {
		n, err := view.FindNode(ctx, j, runID, id)
		if err != nil {
			return &BadRequest{fmt.Errorf("retry %s: %w", id, err)}
		}
		if n.State == journal.NodeCompleted {
			return &BadRequest{fmt.Errorf("retry %s: node %s of run %s completed; it has nothing to retry", id, id, runID)}
		}
	}
	if r.Status == journal.RunCompleted && len(retry) == 0 {
		return &Conflict{fmt.Errorf("run %s already completed; nothing to resume", runID)}
	}
	opts := l.Options
	opts.Journal = j
	return l.launch(ctx, j, runID, func(ctx context.Context) error {
		_, err := runner.Resume(ctx, runID, retry, opts)
		return err
	})
}

// Cancel cancels at the provider what the run's interruption left running.
func (l *Local) Cancel(ctx context.Context, runID string, nodes []string) ([]runner.Cancelled, error) {
	j, err := l.journal(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done, err := runner.Cancel(ctx, runID, nodes, runner.Options{Journal: j, Logger: l.Options.Logger, Getenv: l.Options.Getenv,
		Kinds: l.Options.Kinds, Sim: l.Options.Sim, JournalArg: l.Options.JournalArg})
	return done, actionErr(err)
}

// actionErr types the runner's refusals for the server.
func actionErr(err error) error {
	var locked *journal.LockedError
	var unknown *runner.UnknownNodeError
	switch {
	case err == nil, errors.Is(err, runner.ErrInterrupted):
		return nil
	case errors.As(err, &locked):
		return &Conflict{fmt.Errorf("%w; one runner per run: wait for it, or stop it first", err)}
	case errors.As(err, &unknown):
		return &BadRequest{err}
	}
	return err
}

// launch runs fn in the background, in this Local's context, and returns
// once the run is journaled under our lock, or fn has failed to start it.
func (l *Local) launch(ctx context.Context, j *journal.Journal, runID string, fn func(context.Context) error) error {
	done := make(chan error, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := fn(l.ctx)
		if err != nil && !errors.Is(err, runner.ErrInterrupted) && l.Options.Logger != nil {
			l.Options.Logger.Warn("serve: run "+runID+": "+err.Error(), "run", runID)
		}
		done <- err
	}()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			return actionErr(err)
		case <-ctx.Done():
			return nil // the run goes on; the client went away
		case <-deadline:
			return nil
		case <-t.C:
		}
		if r, err := j.Run(ctx, runID); err == nil && r.Status == journal.RunRunning && r.Owner.PID == os.Getpid() && !j.Abandoned(r) {
			return nil
		}
	}
}
