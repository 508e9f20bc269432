package journal

import (
	"context"
	"encoding/json"
	"fmt"
)

// KindUsage is the event that records what one attempt cost: one per ended
// attempt (failed and abandoned ones too), with the attempt's number.
const KindUsage = "usage"

// Usage is what one attempt cost in tokens. When the provider reported it,
// it is the provider's figure; else it is counted from what was streamed
// (one token per streamed chunk) and Estimated is set.
type Usage struct {
	InputTokens int `json:"input_tokens"`
	// OutputTokens include ReasoningTokens, as the OpenAI APIs count them.
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
	// CacheReadTokens and CacheWriteTokens are input tokens read from and
	// written to the provider's prompt cache, apart from InputTokens (as
	// Anthropic counts them; 0 where InputTokens includes them).
	CacheReadTokens  int  `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int  `json:"cache_write_tokens,omitempty"`
	Estimated        bool `json:"estimated"`
	// StreamedTokens are the output chunks this attempt received.
	StreamedTokens int `json:"streamed_tokens"`
	// PreservedTokens are output tokens kept by re-attaching to the work
	// (or resuming its thread) instead of sending the request again: what a
	// re-send would have generated a second time.
	PreservedTokens int `json:"preserved_tokens"`
	// Chain: the provider's figure covers the attempts this one continues
	// (a re-attached response reports the whole response's usage).
	Chain bool `json:"chain,omitempty"`
	// Model is the model the attempt's requests named ("sim" on the
	// simulator): what a price table prices it by.
	Model string `json:"model,omitempty"`
}

// Visible is the attempt's output tokens without its reasoning: what every
// surface counts as the tokens it generated (reasoning is counted apart).
func (u Usage) Visible() int { return max(u.OutputTokens-u.ReasoningTokens, 0) }

// RecordUsage journals what an attempt cost (a KindUsage event). Like
// Append, it returns before the event is committed.
func (j *Journal) RecordUsage(runID, nodeID string, attempt int, u Usage) error {
	b, err := json.Marshal(u)
	if err != nil {
		return j.errorf("record usage of %s/%s#%d: %w", runID, nodeID, attempt, err)
	}
	return j.Append(Event{RunID: runID, NodeID: nodeID, Attempt: attempt, Kind: KindUsage, ProviderSeq: NoProviderSeq, Payload: b})
}

// AttemptUsage returns the journaled usage of a run's attempts, by node and
// attempt number (of one node if nodeID is not ""). An attempt recorded more
// than once (a crash resume ended it again) keeps its last record.
func (j *Journal) AttemptUsage(ctx context.Context, runID, nodeID string) (map[string]map[int]Usage, error) {
	evs, err := j.Events(ctx, runID, EventFilter{Node: nodeID, AfterSeq: -1, Kinds: []string{KindUsage}})
	if err != nil {
		return nil, err
	}
	out, err := UsageOf(evs)
	if err != nil {
		return nil, j.errorf("%w", err)
	}
	return out, nil
}

// UsageOf is AttemptUsage of events already read (in seq order): their
// KindUsage events, by node and attempt number, the last record of an
// attempt kept. A reader that reads a node's events anyway takes its usage
// from them, and walks the node's rows once, not twice.
func UsageOf(evs []Event) (map[string]map[int]Usage, error) {
	out := map[string]map[int]Usage{}
	for _, e := range evs {
		if e.Kind != KindUsage {
			continue
		}
		var u Usage
		if err := json.Unmarshal(e.Payload, &u); err != nil {
			return nil, fmt.Errorf("usage of %s/%s#%d: %w", e.RunID, e.NodeID, e.Attempt, err)
		}
		if out[e.NodeID] == nil {
			out[e.NodeID] = map[int]Usage{}
		}
		out[e.NodeID][e.Attempt] = u
	}
	return out, nil
}
