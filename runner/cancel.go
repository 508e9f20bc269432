package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
)

// Cancelled is what Cancel did for one node.
type Cancelled struct {
	Node string
	Ref  string // the response cancelled (or that could not be)
	// Note says what happened, for a person: "cancelled", "had already
	// completed", or why nothing was done.
	Note string
	Err  error // the cancel request failed
}

// Cancel stops at the provider the work that unfinished nodes of a run left
// running: the background responses an interruption detached from, so they
// stop billing. nodes limits it to those nodes (default: every node that did
// not complete). It takes the run's lock, so it refuses a run that a live
// runner holds (a *journal.LockedError): interrupt that runner first. Each
// cancel is journaled (NR208). A later `noderun resume` finds the responses
// cancelled and retries the nodes from scratch where their side effects allow.
func Cancel(ctx context.Context, runID string, nodes []string, opts Options) ([]Cancelled, error) {
	r, release, err := reopen(ctx, runID, "cancel", nodes, &opts)
	if err != nil {
		return nil, err
	}
	defer release()
	states, err := r.j.Nodes(ctx, runID)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, n := range states {
		done[n.ID] = n.State == journal.NodeCompleted
	}
	var out []Cancelled
	for _, n := range r.g.Nodes {
		if len(nodes) > 0 && !slices.Contains(nodes, n.ID) {
			continue
		}
		if done[n.ID] {
			if len(nodes) > 0 {
				out = append(out, Cancelled{Node: n.ID, Note: "completed; nothing to cancel"})
			}
			continue
		}
		c, err := r.cancelNode(ctx, n)
		if err != nil {
			return out, err
		}
		if c.Ref != "" || len(nodes) > 0 {
			out = append(out, c)
		}
	}
	return out, r.j.Flush(bg(ctx))
}

// cancelNode cancels the response of node n's last attempt, if it may still
// be running.
func (r *runState) cancelNode(ctx context.Context, n *Node) (Cancelled, error) {
	c := Cancelled{Node: n.ID}
	atts, err := r.j.Attempts(ctx, r.id, n.ID)
	if err != nil {
		return c, err
	}
	p := r.provs[n.Provider].p
	caps := p.Capabilities()
	if len(atts) == 0 || atts[len(atts)-1].Ref == "" || !caps.Cancel || !caps.Check {
		c.Note = "nothing running at the provider"
		return c, nil
	}
	last := atts[len(atts)-1]
	c.Ref = last.Ref
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := p.(provider.Checker).Check(cctx, last.Ref)
	if err == nil && st.State != provider.StateQueued && st.State != provider.StateInProgress {
		c.Note = "already " + string(st.State) + "; nothing to cancel"
		return c, nil
	}
	if !notFound(err) {
		err = p.(provider.Canceler).Cancel(cctx, last.Ref)
	}
	msg := fmt.Sprintf("cancelled response %s at the provider, as asked", last.Ref)
	switch {
	case notFound(err):
		// Journaled: the node is no longer detached, whatever reads it.
		c.Note = notFoundNote
		msg = fmt.Sprintf("response %s is not running: the provider does not know it (HTTP 404)", last.Ref)
	case err != nil:
		c.Err, c.Note = err, "could not cancel: "+err.Error()
		msg = fmt.Sprintf("could not cancel response %s: %v", last.Ref, err)
	default:
		c.Note = "cancelled"
	}
	r.diag(ctx, n.ID, last.N, diagnostics.New(diagnostics.WorkCancelled, msg, diagnostics.KeyRef.Attr(last.Ref)))
	return c, nil
}

// notFoundNote: a response the provider answers 404 for (expired, deleted,
// or never created under this key) is not running; there is nothing to stop.
const notFoundNote = "not running: the provider does not know it (HTTP 404); nothing to cancel"

func notFound(err error) bool {
	var de *diagnostics.Error
	return errors.As(err, &de) && de.Status == http.StatusNotFound
}
