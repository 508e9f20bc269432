package temporal

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/runner"
)

// runInputWire is RunInput as it travels: the graph gzipped. A graph of
// 10,000 nodes is megabytes of YAML that repeats itself; Temporal caps a
// payload at 2 MB, and every execution of a run (continue-as-new) carries it.
type runInputWire struct {
	runInputFields
	GraphGz []byte `json:"graph_gz,omitempty"`
}

type runInputFields RunInput // RunInput without its methods

// MarshalJSON writes the graph gzipped (graph_gz).
func (in RunInput) MarshalJSON() ([]byte, error) {
	w := runInputWire{runInputFields: runInputFields(in)}
	if in.GraphText != "" {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		if _, err := z.Write([]byte(in.GraphText)); err != nil {
			return nil, err
		}
		if err := z.Close(); err != nil {
			return nil, err
		}
		w.GraphGz, w.GraphText = b.Bytes(), ""
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads graph_gz, or graph_text as clients wrote it before.
func (in *RunInput) UnmarshalJSON(b []byte) error {
	var w runInputWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*in = RunInput(w.runInputFields)
	if len(w.GraphGz) > 0 {
		z, err := gzip.NewReader(bytes.NewReader(w.GraphGz))
		if err != nil {
			return fmt.Errorf("run input's graph: %w", err)
		}
		text, err := io.ReadAll(z)
		if err != nil {
			return fmt.Errorf("run input's graph: %w", err)
		}
		in.GraphText = string(text)
	}
	return nil
}

// spec is what every node of a run shares: the graph and its profile.
type spec struct {
	g       *runner.Graph
	profile profile.Profile
	inputs  map[string]string
}

// specCache keeps the specs of the runs a worker runs nodes of, so that a
// node's activity names its run and the graph is read and parsed once per
// run and worker, not once per node (a 10,000-node graph is parsed once,
// not 10,000 times). A run's spec never changes; the cache keeps the last
// specCacheRuns runs.
type specCache struct {
	mu    sync.Mutex
	runs  map[string]*specEntry
	order []string // oldest first
}

type specEntry struct {
	ready chan struct{}
	s     *spec
	err   error
}

const specCacheRuns = 8

// get returns run's spec, loading it once with load (concurrent callers
// wait for the one load). A failed load is not kept: the next node tries
// again.
func (c *specCache) get(ctx context.Context, run string, load func(context.Context) (*spec, error)) (*spec, error) {
	c.mu.Lock()
	if c.runs == nil {
		c.runs = map[string]*specEntry{}
	}
	e, ok := c.runs[run]
	if !ok {
		e = &specEntry{ready: make(chan struct{})}
		c.runs[run] = e
		c.order = append(c.order, run)
		if len(c.order) > specCacheRuns {
			delete(c.runs, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	if !ok {
		e.s, e.err = load(ctx)
		if e.err != nil {
			c.mu.Lock()
			if c.runs[run] == e {
				delete(c.runs, run)
			}
			c.mu.Unlock()
		}
		close(e.ready)
	}
	select {
	case <-e.ready:
		return e.s, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// parseSpec parses a run's input into its spec.
func parseSpec(in RunInput) (*spec, error) {
	g, err := runner.ParseGraph(in.GraphPath, []byte(in.GraphText))
	if err != nil {
		return nil, err
	}
	return &spec{g: g, profile: in.Profile, inputs: in.Inputs}, nil
}

// startInput reads a workflow execution's input (its first event).
func startInput(ctx context.Context, c client.Client, namespace, workflowID, runID string) (RunInput, error) {
	var in RunInput
	resp, err := c.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}, MaximumPageSize: 1})
	if err != nil {
		return in, fmt.Errorf("reading run %s's input from Temporal: %w", workflowID, err)
	}
	evs := resp.GetHistory().GetEvents()
	if len(evs) == 0 || evs[0].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		return in, fmt.Errorf("run %s: its history does not start with its input", workflowID)
	}
	p := evs[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(p) == 0 {
		return in, fmt.Errorf("run %s: the workflow has no input", workflowID)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p[0], &in); err != nil {
		return in, fmt.Errorf("run %s's input: %w", workflowID, err)
	}
	return in, nil
}

// outputCache keeps the outputs a worker read from workflow executions'
// histories, so that the dependents of a wide fan-in read an execution's
// history once, not once each. A node's output never changes once it is
// in the history, so a cached execution is read again only when a node
// asked for is not in it yet (the current execution, which goes on).
type outputCache struct {
	mu    sync.Mutex // held while reading a history: the first reader fills it for the rest
	runs  map[string]map[string]string
	order []string // oldest first
}

// outputCacheRuns bounds the executions kept (each may hold megabytes).
const outputCacheRuns = 4

// get returns the outputs of nodes ids from execution runID of workflow
// workflowID.
func (c *outputCache) get(ctx context.Context, cl client.Client, workflowID, runID string, ids []string) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	outs := c.runs[runID]
	for _, id := range ids {
		if _, ok := outs[id]; !ok {
			outs = nil
			break
		}
	}
	if outs == nil {
		outcomes, err := executionOutcomes(ctx, cl, workflowID, runID)
		if err != nil {
			return nil, err
		}
		outs = make(map[string]string, len(outcomes))
		for id, o := range outcomes {
			outs[id] = o.Output
		}
		if c.runs == nil {
			c.runs = map[string]map[string]string{}
		}
		if _, ok := c.runs[runID]; !ok {
			c.order = append(c.order, runID)
			if len(c.order) > outputCacheRuns {
				delete(c.runs, c.order[0])
				c.order = c.order[1:]
			}
		}
		c.runs[runID] = outs
	}
	got := make(map[string]string, len(ids))
	for _, id := range ids {
		out, ok := outs[id]
		if !ok {
			return nil, fmt.Errorf("the history of execution %s has no result of node %s", runID, id)
		}
		got[id] = out
	}
	return got, nil
}

// executionOutcomes reads the node outcomes a workflow execution's history
// holds: each activity's result, or the outcome a NodeFailed failure
// carries, by node (the last of a node's replays wins).
func executionOutcomes(ctx context.Context, c client.Client, workflowID, runID string) (map[string]NodeOutcome, error) {
	evs, err := runEvents(ctx, c, workflowID, runID)
	if err != nil {
		return nil, err
	}
	h := &History{WorkflowID: workflowID}
	if _, err := h.add(runID, evs); err != nil {
		return nil, err
	}
	return h.outcomes(), nil
}

// outcomes are the node outcomes the history holds, by node: a node alone's
// result or NodeFailed details, a packed node's from its pack's result or
// its SignalSettled (the last of a node's replays wins).
func (h *History) outcomes() map[string]NodeOutcome {
	out := map[string]NodeOutcome{}
	for _, a := range h.Activities {
		if a.Outcome != nil {
			o := *a.Outcome
			o.Node = a.Node
			out[a.Node] = o
		}
	}
	return out
}
