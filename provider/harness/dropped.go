package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/noderun/noderun/provider"
)

// A thread the harness dropped (see DroppedRule) is started again under its
// id by the node's next attempt. Between the resume that finds it dropped
// and that attempt (which may run in another process: `noderun resume`),
// the id waits in this file of the node's state dir; the dropped records
// wait in droppedDir, out of the harness's sight, for inspection.
const (
	restartFile = "noderun-restart"
	droppedDir  = "noderun-dropped"
)

// DroppedError is a resume of a thread that the harness dropped: a record of
// it is in the node's store, but the harness says there is no such thread.
// It is returned inside a *diagnostics.Error of class stuck (nothing to
// resume; a retry may be possible) and, when the record shows no effects,
// wraps provider.ErrNoEffects.
type DroppedError struct {
	Harness string
	Thread  string
	Message string // what the harness said
	Effects bool   // the record shows the thread may have had effects (a tool call)
	Records []string
}

func (e *DroppedError) Error() string {
	effects := "it shows no tool call"
	if e.Effects {
		effects = "it shows a tool call, so the turn may have had effects"
	}
	return fmt.Sprintf("%s: the harness dropped thread %s (%s): its record is set aside in %s; %s",
		e.Harness, e.Thread, e.Message, strings.Join(e.Records, ", "), effects)
}

func (e *DroppedError) Unwrap() error {
	if e.Effects {
		return nil
	}
	return provider.ErrNoEffects
}

// records returns the files of the node's store that record thread id, and
// whether one of them shows effects (Dropped.Effects).
func (p *Provider) records(vals map[string]string, id string) ([]string, bool, error) {
	return p.recordsIn(p.desc.Dropped.Record.Expand(vals), id)
}

// recordsIn returns the files matching glob that contain id, and whether
// one of them shows effects.
func (p *Provider) recordsIn(glob, id string) (files []string, effects bool, err error) {
	all, err := filepath.Glob(glob)
	if err != nil {
		return nil, false, err
	}
	for _, f := range all {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, false, err
		}
		if bytes.Contains(b, []byte(id)) {
			files = append(files, f)
			effects = effects || (p.desc.Dropped.Effects != nil && p.desc.Dropped.Effects.Match(b))
		}
	}
	return files, effects, nil
}

// setAside is called when a resume of thread id found none. If the node's
// store holds a record of it, the harness dropped it: the records are moved
// to the state dir's droppedDir, the id is left for the next attempt to
// restart, and the error says so. Otherwise (nil, nil): the harness never
// had the thread.
func (p *Provider) setAside(vals map[string]string, id, msg string) (*DroppedError, error) {
	if p.desc.Dropped == nil {
		return nil, nil
	}
	files, effects, err := p.records(vals, id)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(vals["state_dir"], droppedDir)
	if len(files) == 0 {
		// Set aside already, by a resume whose process (or machine) was
		// stopped before the restart: the thread is still dropped.
		if pending, err := p.pendingRestart(vals); err != nil || pending != id {
			return nil, err
		}
		if files, effects, err = p.recordsIn(filepath.Join(dir, "*"), id); err != nil || len(files) == 0 {
			return nil, err
		}
	}
	de := &DroppedError{Harness: p.desc.Name, Thread: id, Message: msg, Effects: effects}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, f := range files {
		to := filepath.Join(dir, filepath.Base(f))
		if err := os.Rename(f, to); err != nil {
			return nil, err
		}
		de.Records = append(de.Records, to)
	}
	if err := os.WriteFile(filepath.Join(vals["state_dir"], restartFile), []byte(id+"\n"), 0o600); err != nil {
		return nil, err
	}
	return de, nil
}

// pendingRestart returns the id of a dropped thread the node's next attempt
// starts again, or "". An id whose thread the store records again (the
// restart already got that far) is done with.
func (p *Provider) pendingRestart(vals map[string]string) (string, error) {
	if p.desc.Dropped == nil {
		return "", nil
	}
	marker := filepath.Join(vals["state_dir"], restartFile)
	b, err := os.ReadFile(marker)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if files, _, err := p.records(vals, id); err != nil {
		return "", err
	} else if len(files) > 0 || id == "" {
		return "", p.restarted(vals)
	}
	return id, nil
}

// restarted removes the restart marker: the thread runs again.
func (p *Provider) restarted(vals map[string]string) error {
	err := os.Remove(filepath.Join(vals["state_dir"], restartFile))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
