package temporal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/noderun/noderun/runner/view"
)

// RunSummary is a run on Temporal as `status --temporal` lists it: its
// workflow, whatever executions continue-as-new made of it.
type RunSummary struct {
	RunID string `json:"run_id"` // the workflow id
	// Status is the workflow's, in the words of History.Status and
	// diagnose --temporal's "temporal.status": running, completed, failed,
	// timed_out, canceled, terminated.
	Status     string  `json:"status"`
	Started    *string `json:"started"`
	Closed     *string `json:"closed,omitempty"`
	Executions int     `json:"executions"`
	// HistoryEvents counts the events of all its executions.
	HistoryEvents int64 `json:"history_events"`
}

// ListRuns lists the newest runs on Temporal (workflows of type
// WorkflowName), newest first, at most limit of them. It reads the
// frontend's visibility store, which trails the workflows by a moment.
func ListRuns(ctx context.Context, c client.Client, limit int) ([]RunSummary, error) {
	byID := map[string]*RunSummary{}
	started := map[string]time.Time{}
	var order []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s'", WorkflowName),
			PageSize:      int32(min(max(limit, 1)*2, 1000)),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing the runs on Temporal: %w", err)
		}
		for _, x := range resp.GetExecutions() {
			id := x.GetExecution().GetWorkflowId()
			r := byID[id]
			if r == nil {
				if len(order) >= limit {
					continue // older than the newest limit runs
				}
				r = &RunSummary{RunID: id}
				byID[id] = r
				order = append(order, id)
			}
			r.Executions++
			r.HistoryEvents += x.GetHistoryLength()
			start := x.GetStartTime().AsTime()
			if t, ok := started[id]; !ok || start.Before(t) {
				started[id], r.Started = start, view.Time(start)
			}
			// the execution that did not continue as new says how it stands
			if st := x.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				r.Status = statusWord(st)
				if ct := x.GetCloseTime(); ct != nil && st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					r.Closed = view.Time(ct.AsTime())
				}
			}
		}
		// Newest first: once limit runs are listed, a later page holds only
		// older runs (or older executions of listed ones, which add to
		// their counts only).
		if token = resp.GetNextPageToken(); len(token) == 0 || len(order) >= limit {
			break
		}
	}
	out := make([]RunSummary, 0, len(order))
	for _, id := range order {
		r := byID[id]
		if r.Status == "" { // only continued-as-new executions seen yet
			r.Status = "running"
		}
		out = append(out, *r)
	}
	slices.SortStableFunc(out, func(a, b RunSummary) int { return started[b.RunID].Compare(started[a.RunID]) })
	return out, nil
}

// statusWord is a workflow status in History.Status's words.
func statusWord(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued_as_new"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// RunList is `status --temporal --json`: the runs on the frontend at
// Temporal (HOST:PORT).
type RunList struct {
	Temporal string       `json:"temporal"`
	Runs     []RunSummary `json:"runs"`
}
