package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Event types of the Interactions API stream. The "steps" wire (step.*,
// interaction.created, interaction.completed) is the current one; the
// content.* wire with interaction.start and interaction.complete is the
// legacy one, still documented for servers with steps disabled. Both are
// read. https://ai.google.dev/gemini-api/docs/interactions/streaming,
// https://ai.google.dev/api/interactions-api
const (
	evCreated      = "interaction.created"
	evStart        = "interaction.start" // legacy
	evStatusUpdate = "interaction.status_update"
	evCompleted    = "interaction.completed"
	evComplete     = "interaction.complete" // legacy
	evStepStart    = "step.start"
	evStepDelta    = "step.delta"
	evStepStop     = "step.stop"
	evContentStart = "content.start" // legacy
	evContentDelta = "content.delta" // legacy
	evContentStop  = "content.stop"  // legacy
	evError        = "error"
)

// Interaction statuses (Interaction.status, InteractionStatusUpdate.status),
// every one the API documents
// (https://docs.cloud.google.com/gemini-enterprise-agent-platform/reference/rest/v1beta1/Status;
// @google/genai's InteractionStatus). One it does not is a protocol error
// naming it (terminalError), never taken for queued.
const (
	statusInProgress     = "in_progress"
	statusRequiresAction = "requires_action"
	statusCompleted      = "completed"
	statusFailed         = "failed"
	statusCancelled      = "cancelled"
	statusIncomplete     = "incomplete"
	statusBudgetExceeded = "budget_exceeded"
	statusQueued         = "queued"
)

// Step and delta types that matter here. A step of type thought carries the
// model's thoughts (thought_summary deltas, an opaque thought_signature); a
// model_output step carries the answer (text deltas).
const (
	stepThought       = "thought"
	deltaText         = "text"
	deltaThought      = "thought"
	deltaSummary      = "thought_summary"
	deltaSignature    = "thought_signature"
	contentTypeThinks = "thought"
)

// errUndecodable is a stream event that is not an Interactions event.
var errUndecodable = errors.New("undecodable interactions event")

// event is one decoded stream event: the parts of every event type the
// adapter reads. Unknown fields and event types are kept out; an unknown
// type is progress.
type event struct {
	Type string
	// ID is the event's event_id, the opaque token a stream resumes after
	// (last_event_id); "" when the server sent none (the field is optional).
	ID string
	// Interaction is set on interaction.created/.start/.completed/.complete.
	Interaction *interaction
	// InteractionID and Status are set on interaction.status_update.
	InteractionID string
	Status        string
	// Index is the step (or content) index of step.* and content.* events.
	Index int
	// StepType is the type of a step.start's step or a content.start's content.
	StepType string
	// DeltaType and Text are a step.delta's or content.delta's delta: Text is
	// the text of a text delta, or the text of a thought summary.
	DeltaType string
	Text      string
	// Err is an error event's error, "code: message".
	Err string
	// ErrCode is the error's code or status, for classification.
	ErrCode string
}

// wireEvent is the JSON of an event. Some fields are polymorphic across API
// revisions (a thought summary's content is an object or a list; an error
// code a number or a string), so they stay raw until read.
type wireEvent struct {
	EventType     string          `json:"event_type"`
	EventID       string          `json:"event_id"`
	Interaction   *interaction    `json:"interaction"`
	InteractionID string          `json:"interaction_id"`
	Status        string          `json:"status"`
	Index         int             `json:"index"`
	Step          *typed          `json:"step"`
	Content       *typed          `json:"content"`
	Delta         *wireDelta      `json:"delta"`
	Error         json.RawMessage `json:"error"`
}

type typed struct {
	Type string `json:"type"`
}

type wireDelta struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// parseEvent decodes one SSE event's data. typ is the SSE event name (the
// `event:` line), used when the JSON has no event_type. The data is
// untrusted: anything that is not a JSON object is errUndecodable.
func parseEvent(typ string, data []byte) (event, error) {
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return event{}, fmt.Errorf("%w: %w", errUndecodable, err)
	}
	ev := event{Type: w.EventType, ID: w.EventID, Interaction: w.Interaction,
		InteractionID: w.InteractionID, Status: w.Status, Index: w.Index}
	if ev.Type == "" {
		ev.Type = typ
	}
	if ev.Type == "" {
		return event{}, fmt.Errorf("%w: no event_type", errUndecodable)
	}
	switch {
	case w.Step != nil:
		ev.StepType = w.Step.Type
	case w.Content != nil:
		ev.StepType = w.Content.Type
	}
	if d := w.Delta; d != nil {
		ev.DeltaType = d.Type
		ev.Text = d.Text
		if ev.Text == "" && len(d.Content) > 0 {
			ev.Text = contentText(d.Content)
		}
	}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		ev.Err, ev.ErrCode = errorText(w.Error)
	}
	return ev, nil
}

// contentText reads the text of a thought summary's content: an object
// {"type":"text","text":...} or a list of them.
func contentText(raw json.RawMessage) string {
	var one struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &one) == nil {
		return one.Text
	}
	var many []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &many) == nil {
		s := ""
		for _, c := range many {
			s += c.Text
		}
		return s
	}
	return ""
}

// errorText reads an error object ({"code":..., "message":..., "status":...})
// or a bare string.
func errorText(raw json.RawMessage) (msg, code string) {
	var e struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	if json.Unmarshal(raw, &e) != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, ""
		}
		return string(raw), ""
	}
	switch c := e.Code.(type) {
	case string:
		code = c
	case float64:
		code = fmt.Sprint(int64(c))
	}
	if e.Status != "" {
		code = e.Status
	}
	msg = e.Message
	if code != "" {
		msg = code + ": " + msg
	}
	return msg, code
}

// interaction is the part of an Interaction resource the adapter reads.
type interaction struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Model   string          `json:"model"`
	Agent   string          `json:"agent"`
	Outputs []output        `json:"outputs"`
	Steps   []step          `json:"steps"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// output is one element of Interaction.outputs (type text, thought, ...).
type output struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Summary is a thought output's summary.
	Summary json.RawMessage `json:"summary"`
}

// step is one element of Interaction.steps, on servers with steps enabled.
type step struct {
	Type    string   `json:"type"`
	Content []output `json:"content"`
}

// usage is Interaction.usage.
type usage struct {
	TotalInputTokens   int `json:"total_input_tokens"`
	TotalOutputTokens  int `json:"total_output_tokens"`
	TotalThoughtTokens int `json:"total_thought_tokens"`
	TotalCachedTokens  int `json:"total_cached_tokens"`
}

// outputText is the answer of a finished interaction: the text outputs
// (thoughts excluded) in order, byte for byte what the text deltas carried.
// With steps, it is the text content of the model_output steps.
func (it *interaction) outputText() string {
	s := ""
	for _, o := range it.Outputs {
		if o.Type == deltaText {
			s += o.Text
		}
	}
	if s != "" || len(it.Outputs) > 0 {
		return s
	}
	for _, st := range it.Steps {
		if st.Type == stepThought {
			continue
		}
		for _, c := range st.Content {
			if c.Type == deltaText {
				s += c.Text
			}
		}
	}
	return s
}

// failureText describes why an interaction did not complete.
func (it *interaction) failureText() string {
	if len(it.Error) > 0 && string(it.Error) != "null" {
		msg, _ := errorText(it.Error)
		return msg
	}
	return it.Status
}
