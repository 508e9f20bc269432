package sim

import (
	"encoding/json"
	"errors"
)

// chatRequest is the part of a Chat Completions request the simulator reads.
// Unknown fields (tools, temperature, ...) are accepted and ignored, as a
// lenient server must be for real clients; known fields of the wrong type
// are a 400, as OpenAI answers.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []message      `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           int            `json:"max_tokens"`
	MaxCompletionTokens int            `json:"max_completion_tokens"`
	Metadata            map[string]any `json:"metadata"`
	// vLLM's continuation flags (continue.go).
	ContinueFinalMessage *bool `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (r *chatRequest) input() string { return lastUserText(r.Messages) }

// maxTokens is the request's output cap, 0 when none.
func (r *chatRequest) maxTokens() int {
	if r.MaxCompletionTokens > 0 {
		return r.MaxCompletionTokens
	}
	return r.MaxTokens
}

func (r *chatRequest) includeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// responsesRequest is the part of a Responses API create request the
// simulator reads. Codex CLI also sends tools, tool_choice, include,
// prompt_cache_key, client_metadata, text and parallel_tool_calls; all are
// ignored.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    json.RawMessage `json:"instructions"`
	Stream          bool            `json:"stream"`
	Background      bool            `json:"background"`
	Store           *bool           `json:"store"`
	Reasoning       *reasoning      `json:"reasoning"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	Metadata        map[string]any  `json:"metadata"`
}

type reasoning struct {
	Effort  string `json:"effort"`
	Summary string `json:"summary"`
}

var errBadInput = errors.New("'input' must be a string or an array of input items")

// prompt derives the request's input for Text (see ResponsesInput).
func (r *responsesRequest) prompt() (string, error) {
	raw := r.Input
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var items []message
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", errBadInput
	}
	return lastUserText(items), nil
}

// store reports whether the response is kept for later GETs; OpenAI's
// default is true.
func (r *responsesRequest) store() bool { return r.Store == nil || *r.Store }

func (r *responsesRequest) effort() string {
	if r.Reasoning == nil {
		return ""
	}
	return r.Reasoning.Effort
}
