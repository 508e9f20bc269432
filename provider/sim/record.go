package sim

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Retention is how long a finished response is kept for GETs, as OpenAI
// keeps background responses about ten minutes.
const Retention = 10 * time.Minute

// maxRecords bounds how many finished responses are kept.
const maxRecords = 10_000

// Response statuses, as the Responses API names them.
const (
	statusQueued     = "queued"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusIncomplete = "incomplete"
	statusCancelled  = "cancelled"
)

func terminal(status string) bool {
	switch status {
	case statusCompleted, statusIncomplete, statusCancelled, "failed":
		return true
	}
	return false
}

// record is one Responses API response: its request, its state as a poll
// sees it and, for a background stream, the log of every event it emitted.
// A background response's generator writes the record; any number of
// readers (the create stream, resume streams, polls) read it.
type record struct {
	id         string
	createdAt  int64
	model      string
	prompt     string
	req        *responsesRequest
	p          params
	background bool
	stream     bool
	store      bool
	count      tokenCounter // output tokens, in total and for the node

	mu         sync.Mutex
	status     string
	seq        int // next sequence_number
	reasoning  *item
	message    *item
	usage      map[string]any
	incomplete string // incomplete_details.reason
	completed  int64  // completed_at
	ended      time.Time
	cancel     context.CancelFunc // stops the generator, nil when none runs apart
	// log holds the SSE frames of a background stream; frame i has
	// sequence_number i. done is set with the last frame (or by a cancel),
	// wake is closed and replaced on every change, for tailing readers.
	log  [][]byte
	done bool
	wake chan struct{}
}

// item is an output item being built.
type item struct {
	id     string
	status string
	text   []byte
}

func newRecord(id, model, prompt string, req *responsesRequest, p params) *record {
	return &record{
		id: id, createdAt: time.Now().Unix(), model: model, prompt: prompt, req: req, p: p,
		background: req.Background, stream: req.Stream, store: req.store(),
		status: statusInProgress, wake: make(chan struct{}),
	}
}

// since returns the logged frames from index from on, whether the log is
// finished, and a channel closed at the next change.
func (r *record) since(from int) (frames [][]byte, done bool, wake <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from < len(r.log) {
		frames = r.log[from:len(r.log):len(r.log)]
	}
	return frames, r.done, r.wake
}

// notifyLocked wakes the tailing readers.
func (r *record) notifyLocked() {
	close(r.wake)
	r.wake = make(chan struct{})
}

// endLocked makes the record terminal with status.
func (r *record) endLocked(status string) {
	r.status = status
	r.ended = time.Now()
	r.done = true
	if r.cancel != nil {
		r.cancel()
	}
	r.notifyLocked()
}

// cancelRun cancels a background response unless it already ended;
// cancelling twice is a no-op, as OpenAI's cancel is idempotent.
func (r *record) cancelRun() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !terminal(r.status) {
		r.endLocked(statusCancelled)
	}
}

// interrupt marks a non-background response whose client went away.
func (r *record) interrupt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !terminal(r.status) {
		r.incomplete = "interrupted"
		if r.message != nil && r.message.status == statusInProgress {
			r.message.status = statusIncomplete
		}
		r.endLocked(statusIncomplete)
	}
}

// objectLocked is the response object as OpenAI shapes it.
func (r *record) objectLocked() map[string]any {
	output := []any{}
	if r.reasoning != nil {
		summary := []any{}
		if r.reasoning.text != nil {
			summary = append(summary, map[string]any{"type": "summary_text", "text": string(r.reasoning.text)})
		}
		output = append(output, map[string]any{"id": r.reasoning.id, "type": "reasoning", "summary": summary})
	}
	if r.message != nil {
		output = append(output, messageItem(r.message, true))
	}
	var instructions any
	if len(r.req.Instructions) > 0 {
		instructions = json.RawMessage(r.req.Instructions)
	}
	var maxOut any
	if r.req.MaxOutputTokens > 0 {
		maxOut = r.req.MaxOutputTokens
	}
	var effort, incomplete, usage, completed any
	if e := r.req.effort(); e != "" {
		effort = e
	}
	if r.incomplete != "" {
		incomplete = map[string]any{"reason": r.incomplete}
	}
	if r.usage != nil {
		usage = r.usage
	}
	if r.completed != 0 {
		completed = r.completed
	}
	md := r.req.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return map[string]any{
		"id":                   r.id,
		"object":               "response",
		"created_at":           r.createdAt,
		"completed_at":         completed,
		"status":               r.status,
		"background":           r.background,
		"error":                nil,
		"incomplete_details":   incomplete,
		"instructions":         instructions,
		"max_output_tokens":    maxOut,
		"model":                r.model,
		"output":               output,
		"parallel_tool_calls":  true,
		"previous_response_id": nil,
		"reasoning":            map[string]any{"effort": effort, "summary": nil},
		"store":                r.store,
		"temperature":          1.0,
		"text":                 map[string]any{"format": map[string]any{"type": "text"}},
		"tool_choice":          "auto",
		"tools":                []any{},
		"top_p":                1.0,
		"truncation":           "disabled",
		"usage":                usage,
		"user":                 nil,
		"metadata":             md,
	}
}

// object is objectLocked for callers without the lock.
func (r *record) object() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.objectLocked()
}

// messageItem renders an assistant message; withText false gives the empty
// item of response.output_item.added.
func messageItem(m *item, withText bool) map[string]any {
	content := []any{}
	if withText {
		content = append(content, map[string]any{
			"type": "output_text", "text": string(m.text), "annotations": []any{}, "logprobs": []any{},
		})
	}
	return map[string]any{"id": m.id, "type": "message", "status": m.status, "role": "assistant", "content": content}
}

// store keeps responses for later GETs, pruning finished ones after the
// retention period or beyond maxRecords.
type store struct {
	mu        sync.Mutex
	retention time.Duration
	byID      map[string]*record
	order     []*record // creation order
}

func (st *store) add(r *record) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = map[string]*record{}
	}
	st.byID[r.id] = r
	st.order = append(st.order, r)
	st.pruneLocked(time.Now())
}

func (st *store) get(id string) *record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

// pruneLocked drops finished records from the front of the creation order
// while they are too old or too many; a running record stops the sweep (it
// is bounded by the generators that run).
func (st *store) pruneLocked(now time.Time) {
	i := 0
	for ; i < len(st.order); i++ {
		r := st.order[i]
		r.mu.Lock()
		ended := r.ended
		r.mu.Unlock()
		if ended.IsZero() || now.Sub(ended) < st.retention && len(st.order)-i <= maxRecords {
			break
		}
		delete(st.byID, r.id)
	}
	if i > 0 {
		st.order = append(st.order[:0:0], st.order[i:]...)
	}
}
