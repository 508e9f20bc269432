package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/noderun/noderun/journal"
)

// The --json output of every read command (docs/json.md is the schema, and
// tests check every command against it): objects, never bare arrays; every
// object about a run carries run_id; payloads are objects, never JSON in a
// string; times are RFC 3339 in UTC, absent when unknown.

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonTime is an RFC 3339 UTC time; the zero time is omitted (with omitempty
// on a pointer) by returning nil.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

type runJSON struct {
	RunID     string  `json:"run_id"`
	Graph     string  `json:"graph"`
	GraphPath string  `json:"graph_path"`
	Status    string  `json:"status"`
	Abandoned bool    `json:"abandoned"`
	Profile   string  `json:"profile"`
	Started   *string `json:"started,omitempty"`
	Finished  *string `json:"finished,omitempty"`
}

func runToJSON(j *journal.Journal, r journal.Run) runJSON {
	return runJSON{RunID: r.ID, Graph: r.Graph, GraphPath: r.GraphPath, Status: string(r.Status), Abandoned: j.Abandoned(r),
		Profile: r.Profile, Started: jsonTime(r.Started), Finished: jsonTime(r.Finished)}
}

type nodeJSON struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	Attempts   int     `json:"attempts"`
	Bytes      int     `json:"bytes"`
	ErrorClass string  `json:"error_class,omitempty"`
	Error      string  `json:"error,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Started    *string `json:"started,omitempty"`
	Finished   *string `json:"finished,omitempty"`
	// CachedFrom is "run/node" whose output a cache hit reused.
	CachedFrom string `json:"cached_from,omitempty"`
}

type attemptJSON struct {
	N          int        `json:"n"`
	Mode       string     `json:"mode"`
	Provider   string     `json:"provider"`
	Ref        string     `json:"ref,omitempty"`
	Cursor     int64      `json:"cursor"`
	Outcome    string     `json:"outcome"`
	ErrorClass string     `json:"error_class,omitempty"`
	Error      string     `json:"error,omitempty"`
	Started    *string    `json:"started,omitempty"`
	Ended      *string    `json:"ended,omitempty"`
	Usage      *usageJSON `json:"usage,omitempty"`
}

type usageJSON struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
	// Input tokens a provider counts apart (Anthropic's prompt cache).
	CacheReadTokens  int  `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int  `json:"cache_write_tokens,omitempty"`
	Estimated        bool `json:"estimated"`
	PreservedTokens  int  `json:"preserved_tokens"`
}

// eventJSON is one journaled event; payload is always an object.
type eventJSON struct {
	RunID       string         `json:"run_id"`
	Seq         int64          `json:"seq"`
	Time        string         `json:"time"`
	Node        string         `json:"node,omitempty"`
	Attempt     int            `json:"attempt"`
	Kind        string         `json:"kind"`
	Code        string         `json:"code,omitempty"`
	ProviderSeq int64          `json:"provider_seq"`
	Payload     map[string]any `json:"payload"`
}

func eventToJSON(e journal.Event) eventJSON {
	out := eventJSON{RunID: e.RunID, Seq: e.Seq, Time: *jsonTime(e.Time), Node: e.NodeID, Attempt: e.Attempt,
		Kind: e.Kind, Code: e.Code, ProviderSeq: e.ProviderSeq}
	var obj map[string]any
	switch e.Kind {
	case "delta", "reasoning":
		obj = map[string]any{"text": string(e.Payload)}
	case "ref":
		obj = map[string]any{"ref": string(e.Payload)}
	default:
		if len(e.Payload) == 0 || json.Unmarshal(e.Payload, &obj) != nil || obj == nil {
			obj = map[string]any{}
			if len(e.Payload) > 0 {
				obj["text"] = string(e.Payload)
			}
		}
	}
	out.Payload = obj
	return out
}
