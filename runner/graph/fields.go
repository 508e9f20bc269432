package graph

import (
	"slices"
	"strings"

	"github.com/noderun/noderun/provider/sim/simconfig"
)

// The field tables below are the one description of the graph language: the
// parser takes its field names (and, for providers, the kinds each field is
// valid for) from them, Schema turns them into the JSON Schema of graph
// files, and Reference into docs/graph.md. A field added to the parser
// without a row here is an unknown field; a row without parser support fails
// the tests that parse testdata/graphs/valid/every-field.yaml.

// Field is one field of a block of a graph file.
type Field struct {
	Name string
	// Type is the value's type in words: "string", "whole number",
	// "duration", "list of strings", ...
	Type string
	// Required: the block is invalid without it.
	Required bool
	// Default is what an omitted field means, in words ("" when nothing).
	Default string
	// Doc says what the field does, in one or two sentences.
	Doc string
	// Example is a YAML value.
	Example string
	// Kinds (provider fields) are the provider kinds the field is valid
	// for; nil means every kind.
	Kinds []string

	schema map[string]any
}

// Block is one kind of YAML mapping in a graph file (or in a profiles
// file), with its fields in the order they are documented.
type Block struct {
	// Name is how docs/graph.md titles the block ("graph", "node", ...).
	Name string
	// Where says where the block appears.
	Where  string
	Doc    string
	Fields []Field
}

// Go duration strings ("90s", "1m30s", "2h"); the schema checks the form,
// the parser the value.
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// Reasoning levels, side effect classes and input types (the enum values).
var (
	graphReasoningLevel = []string{"none", "minimal", "low", "medium", "high"}
	graphSideEffects    = []string{string(SideNone), string(SideIdempotent), string(SideUnsafe)}
	graphSimAPIs        = []string{SimAPIChat, SimAPIResponses}
	graphProviderKinds  = []string{ProviderKindSim, ProviderKindOpenAI, ProviderKindResponses, ProviderKindHarness, ProviderKindAnthropic, ProviderKindGemini}
	graphInputTypes     = []string{InputString, InputInt, InputBool, InputFile}
	// The simulator's fault kinds and endpoints are simconfig's own lists,
	// so that the schema and docs/graph.md cannot lag behind the decoder.
	graphFaultKinds = func() []string {
		var out []string
		for _, k := range simconfig.FaultKinds() {
			out = append(out, string(k))
		}
		return out
	}()
	graphSimEndpoints = simconfig.Endpoints()
)

// orList writes vals as "a, b or c".
func orList(vals []string) string {
	if len(vals) < 2 {
		return strings.Join(vals, "")
	}
	return strings.Join(vals[:len(vals)-1], ", ") + " or " + vals[len(vals)-1]
}

func sString() map[string]any { return map[string]any{"type": "string"} }
func sNonEmpty() map[string]any {
	return map[string]any{"type": "string", "pattern": `\S`}
}
func sEnum(vals []string) map[string]any {
	return map[string]any{"type": "string", "enum": toAny(vals)}
}
func sInt(min int) map[string]any { return map[string]any{"type": "integer", "minimum": min} }
func sBool() map[string]any       { return map[string]any{"type": "boolean"} }

// sSize is a byte count: a whole number, or a number with a unit.
func sSize() map[string]any {
	return map[string]any{"oneOf": []any{sInt(1), map[string]any{"type": "string", "pattern": `^[0-9]+(\.[0-9]+)? ?([KkMmGgTt]i?[Bb]?|[Bb])?$`}}}
}
func sDuration() map[string]any {
	return map[string]any{"type": "string", "pattern": durationPattern}
}
func sStrList() map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
}
func sEnv() map[string]any {
	return map[string]any{"type": "object", "propertyNames": map[string]any{"pattern": `^[A-Za-z_][A-Za-z0-9_]*$`},
		"additionalProperties": map[string]any{"type": []any{"string", "number", "boolean"}}}
}
func sProviderList() map[string]any {
	return map[string]any{"type": "array", "uniqueItems": true, "items": map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_-]+$`}}
}
func sRef(def string) map[string]any { return map[string]any{"$ref": "#/$defs/" + def} }

func toAny(vals []string) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v
	}
	return out
}

// fieldsGraph are the top-level fields of a graph file.
var fieldsGraph = []Field{
	{Name: "name", Type: "string", Required: true, Doc: "The graph's name, shown in `noderun status` and journaled with every run.",
		Example: "research", schema: sNonEmpty()},
	{Name: "profile", Type: "string", Default: "default", Doc: "The recovery profile: `default`, `ci`, `patient`, or one from the `profiles` file. `noderun run --profile` overrides it.",
		Example: "patient", schema: sNonEmpty()},
	{Name: "profiles", Type: "path", Doc: "A profiles file that adds profiles or overrides fields of the built-ins (see the profile block); relative to the graph file.",
		Example: "profiles.yaml", schema: sNonEmpty()},
	{Name: "inputs", Type: "mapping of name to input", Doc: "The values a run takes from the command line (`--input name=value`) and templates read with `{{ input \"name\" }}`.",
		Example: "{goal: {description: What to research, required: true}}", schema: map[string]any{"type": "object",
			"propertyNames": map[string]any{"pattern": `^[A-Za-z_][A-Za-z0-9_]*$`}, "additionalProperties": sRef("input")}},
	{Name: "providers", Type: "mapping of name to provider", Required: true, Doc: "The model endpoints and agent harnesses the nodes use, by name.",
		Example: "{gpt: {kind: openai, model: gpt-5}}", schema: map[string]any{"type": "object", "minProperties": 1,
			"propertyNames": map[string]any{"pattern": `^[A-Za-z0-9_-]+$`}, "additionalProperties": sRef("provider")}},
	{Name: "nodes", Type: "list of nodes", Required: true, Doc: "The nodes, each one model call or agent turn; they run in dependency order (`needs`).",
		Example: "[{id: plan, prompt: Plan it.}]", schema: map[string]any{"type": "array", "minItems": 1, "items": sRef("node")}},
	{Name: "cache", Type: "boolean", Default: "true", Doc: cacheGraphDoc,
		Example: "false", schema: sBool()},
	{Name: "cache_ttl", Type: "duration", Default: "none (a cached output never goes stale)", Doc: "How old a cached output may be to be reused, for every node that sets no `cache_ttl` of its own: answers that go stale (news, prices) set one.",
		Example: "24h", schema: sDuration()},
}

// Input types.
const (
	InputString = "string"
	InputInt    = "int"
	InputBool   = "bool"
	// InputFile: the value names a file (relative to the working directory
	// on the command line, to the graph file in a default); templates read
	// its content, which is journaled with the run.
	InputFile = "file"
)

// fieldsInput are the fields of one entry of `inputs:`.
var fieldsInput = []Field{
	{Name: "description", Type: "string", Doc: "What the input is for; shown when it is missing.",
		Example: "The question to research", schema: sString()},
	{Name: "type", Type: "string", Default: "string", Doc: "One of string, int, bool, file. A file input's value is a path; templates read the file's content.",
		Example: "int", schema: sEnum(graphInputTypes)},
	{Name: "default", Type: "scalar", Doc: "The value when the run gives none (a file default is relative to the graph file).",
		Example: "3", schema: map[string]any{"type": []any{"string", "number", "boolean"}}},
	{Name: "required", Type: "boolean", Default: "true without a default, else false", Doc: "A run without it is refused (exit 2) before anything is written.",
		Example: "true", schema: sBool()},
}

// fieldsProvider are the fields of one entry of `providers:`.
var fieldsProvider = []Field{
	{Name: "kind", Type: "string", Required: true, Doc: "sim (the embedded simulator), openai (Chat Completions), responses (the Responses API in background mode), harness (an agent CLI), anthropic (the Anthropic Messages API) or gemini (the Gemini Interactions API in background mode).",
		Example: "responses", schema: sEnum(graphProviderKinds)},
	{Name: "model", Type: "string", Default: "none (sim: `sim`)", Doc: "The default model of the provider's nodes; openai, responses and anthropic nodes need one here or on the node, gemini nodes a model or an agent.",
		Example: "gpt-5", schema: sString()},
	{Name: "base_url", Type: "URL", Default: "$OPENAI_BASE_URL, else https://api.openai.com/v1 (anthropic: $ANTHROPIC_BASE_URL, else https://api.anthropic.com; gemini: https://generativelanguage.googleapis.com)", Doc: "The API's base URL (http or https, with a host).",
		Example: "https://api.openai.com/v1", Kinds: []string{ProviderKindOpenAI, ProviderKindResponses, ProviderKindAnthropic, ProviderKindGemini}, schema: map[string]any{"type": "string", "pattern": `^https?://[^/]+`}},
	{Name: "api_key_env", Type: "string", Default: "OPENAI_API_KEY (anthropic: ANTHROPIC_API_KEY; gemini: GEMINI_API_KEY)", Doc: "The environment variable holding the API key (never the key itself).",
		Example: "OPENAI_API_KEY", Kinds: []string{ProviderKindOpenAI, ProviderKindResponses, ProviderKindAnthropic, ProviderKindGemini}, schema: map[string]any{"type": "string", "pattern": `^[A-Za-z_][A-Za-z0-9_]*$`}},
	{Name: "api", Type: "string", Default: "chat", Doc: "The API the simulator speaks: chat or responses.",
		Example: "responses", Kinds: []string{ProviderKindSim}, schema: sEnum(graphSimAPIs)},
	{Name: "sim", Type: "simulator block", Doc: "How the embedded simulator generates and fails (see the simulator block).",
		Example: "{seed: 7, tokens: 200}", Kinds: []string{ProviderKindSim}, schema: sRef("sim")},
	{Name: "harness", Type: "string", Default: "codex", Doc: "A built-in harness descriptor (codex, claude, gemini) or a descriptor file, relative to the graph file.",
		Example: "claude", Kinds: []string{ProviderKindHarness}, schema: sNonEmpty()},
	{Name: "command", Type: "string", Default: "the descriptor's, else $NODERUN_CODEX / $NODERUN_CLAUDE / $NODERUN_GEMINI, else PATH", Doc: "The harness binary; a value with a / is relative to the graph file.",
		Example: "/usr/local/bin/codex", Kinds: []string{ProviderKindHarness}, schema: sNonEmpty()},
	{Name: "args", Type: "list of strings", Doc: "Extra arguments for the harness CLI.",
		Example: `["-c", "model_reasoning_effort=high"]`, Kinds: []string{ProviderKindHarness}, schema: sStrList()},
	{Name: "env", Type: "mapping of strings", Doc: "Environment variables of the harness process (over the descriptor's). The journal keeps their names, never their values; a resume takes them from the graph file if it is unchanged, else from its environment.",
		Example: "{CODEX_HOME: /srv/codex}", Kinds: []string{ProviderKindHarness}, schema: sEnv()},
	{Name: "workdir", Type: "path", Default: "the graph file's directory", Doc: "Where the harness runs; relative to the graph file.",
		Example: "./repo", Kinds: []string{ProviderKindHarness}, schema: sNonEmpty()},
	{Name: "state_dir", Type: "path", Default: "~/.local/state/noderun/harness", Doc: "Each node's harness state (Claude Code and Gemini CLI session stores); relative to the graph file.",
		Example: ".noderun-state", Kinds: []string{ProviderKindHarness}, schema: sNonEmpty()},
	{Name: "continuation", Type: "string", Default: "none", Doc: "How the chat server continues a partial answer after a dropped stream: " +
		"prefix (DeepSeek, Mistral), continue_final_message (vLLM), assistant_last (Ollama, llama.cpp); for kind anthropic only prefill (the partial answer as a prefilled assistant turn, on models that accept it); see docs/providers.md.",
		Example: "prefix", Kinds: []string{ProviderKindOpenAI, ProviderKindSim, ProviderKindAnthropic}, schema: sEnum(append(slices.Clone(graphContinuations), graphPrefill))},
	{Name: "max_dials", Type: "whole number > 0", Default: "32", Doc: "How many connects to the provider's host may be in flight at once; the rest wait their turn, so a wide graph's start or a breaker closing never overflows the server's listen backlog.",
		Example: "64", Kinds: []string{ProviderKindOpenAI, ProviderKindResponses, ProviderKindAnthropic, ProviderKindGemini}, schema: sInt(1)},
	{Name: "agent", Type: "string", Doc: "The Gemini agent (e.g. a Deep Research agent) the provider's nodes run instead of a model; a node's own model or agent wins.",
		Example: "deep-research-pro-preview-12-2025", Kinds: []string{ProviderKindGemini}, schema: sNonEmpty()},
	{Name: "limits", Type: "limits block", Default: "none: the limits the provider's rate-limit headers announce", Doc: "The account's rate limits as this graph may use them " +
		"(see the limits block). Declared limits bound the pace on top of what the provider's rate-limit headers say, so a graph may use less than " +
		"its account allows; with no limits declared, the run learns them from the headers of the first response. `concurrency` bounds the requests in flight.",
		Example: "{requests_per_minute: 500, tokens_per_minute: 200000}", schema: sRef("limits")},
	{Name: "max_output_bytes", Type: "size", Default: "the profile's `max_output_bytes` (32MiB)", Doc: maxOutputDoc + " For each node of this provider that sets none.",
		Example: "64MiB", schema: sSize()},
	{Name: "fallback", Type: "list of provider names", Default: "none (no failover)", Doc: fallbackProviderDoc,
		Example: "[backup]", schema: sProviderList()},
}

// maxOutputDoc says what the output bound does.
const maxOutputDoc = "Bounds the node's answer (output and reasoning, a size such as 32MiB or a number of bytes): past it the node fails with NR501 " +
	"(limit_exceeded), its partial answer kept, and is not retried, so that no server streaming without end exhausts memory or disk."

// The failover fields' docs.
const (
	fallbackProviderDoc = "The providers, in order, a node of this provider moves to when this one is unavailable (its circuit breaker open, " +
		"an outage past the recovery deadline, HTTP 404 model not found, or overloaded (529) past the retry budget). Only this list is used: " +
		"a fallback's own `fallback` is not followed. Not the provider itself; an agent harness moves only to harnesses, a model API only to " +
		"model APIs. A node's own `fallback` replaces it; a node with side_effects unsafe never fails over."
	fallbackNodeDoc = "The providers this node moves to, in order, when its provider is unavailable, instead of its provider's `fallback`; " +
		"`[]` turns failover off for the node. Not the node's own provider; only this list is used, never the fallbacks' own. " +
		"An unsafe node never fails over, so side_effects unsafe and a non-empty fallback exclude each other."
	fallbackContinueDoc = "On failover, the fallback continues the node's journaled partial answer where the fallback provider has a " +
		"continuation form (`continuation:` on openai and sim chat providers, prefill on anthropic); otherwise it starts again from scratch. " +
		"Off by default because the answer then comes from two models. Needs a fallback list, the node's or its provider's."
)

// fieldsLimits are the fields of a provider's `limits:`; it sets at least one.
var fieldsLimits = []Field{
	{Name: "requests_per_minute", Type: "whole number > 0", Default: "the provider's", Doc: "Requests sent per minute at most.",
		Example: "500", schema: sInt(1)},
	{Name: "tokens_per_minute", Type: "whole number > 0", Default: "the provider's", Doc: "Tokens (input and output) per minute at most.",
		Example: "200000", schema: sInt(1)},
	{Name: "concurrency", Type: "whole number > 0", Default: "the provider's", Doc: "Requests in flight at once at most; the rest wait their turn, in graph order.",
		Example: "8", schema: sInt(1)},
}

// fieldsNode are the fields of one entry of `nodes:`.
var fieldsNode = []Field{
	{Name: "id", Type: "string", Required: true, Doc: "The node's id: letters, digits, `_` and `-`, unique in the graph.",
		Example: "plan", schema: map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_-]+$`}},
	{Name: "needs", Type: "list of node ids", Doc: "The nodes that must complete first; their outputs are what the templates may read.",
		Example: "[plan, research]", schema: map[string]any{"type": "array", "uniqueItems": true, "items": map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_-]+$`}}},
	{Name: "provider", Type: "string", Default: "the graph's only provider", Doc: "The provider the node calls; required when the graph defines several.",
		Example: "gpt", schema: sNonEmpty()},
	{Name: "model", Type: "string", Default: "the provider's model", Doc: "The model of this node.",
		Example: "gpt-5-mini", schema: sString()},
	{Name: "agent", Type: "string", Default: "the provider's agent, unless the node sets a model", Doc: "The Gemini agent this node runs instead of a model (gemini providers only); agent and model exclude each other.",
		Example: "deep-research-pro-preview-12-2025", schema: sNonEmpty()},
	{Name: "system", Type: "template", Doc: "The system prompt, a Go template like prompt.",
		Example: "You plan research.", schema: sString()},
	{Name: "prompt", Type: "template", Required: true, Doc: "The prompt, a Go text/template: `{{ output \"plan\" }}` (or `{{ .Outputs.plan }}`) is a need's output, `{{ input \"goal\" }}` (or `{{ .Inputs.goal }}`) an input, `{{ if failed \"lint\" }}` tests whether a need failed under continue_on_failure.",
		Example: `'Write it: {{ output "plan" }}'`, schema: sNonEmpty()},
	{Name: "reasoning_effort", Type: "string", Doc: "none, minimal, low, medium or high.",
		Example: "high", schema: sEnum(graphReasoningLevel)},
	{Name: "max_output_tokens", Type: "whole number > 0", Doc: "Caps the output.",
		Example: "4000", schema: sInt(1)},
	{Name: "max_output_bytes", Type: "size", Default: "the provider's, else the profile's `max_output_bytes` (32MiB)", Doc: maxOutputDoc,
		Example: "64MiB", schema: sSize()},
	{Name: "retries", Type: "whole number >= 0", Default: "the profile's retries", Doc: "The node's retry budget (requests sent again from scratch); it never refills.",
		Example: "5", schema: sInt(0)},
	{Name: "side_effects", Type: "string", Default: "unsafe for harness providers, none otherwise", Doc: "none, idempotent or unsafe: whether sending the request again is harmless. An unsafe node is never replayed unless the request provably never left.",
		Example: "idempotent", schema: sEnum(graphSideEffects)},
	{Name: "timeout", Type: "duration", Default: "none", Doc: "Wall time of the node, recovery included; when it passes, the node fails with NR907 (node_timeout).",
		Example: "20m", schema: sDuration()},
	{Name: "continue_on_failure", Type: "boolean", Default: "false", Doc: "When the node fails, its dependents run anyway and see an empty output and `failed \"id\"` true; the run still ends failed (exit 1).",
		Example: "true", schema: sBool()},
	{Name: "env", Type: "mapping of strings", Doc: "Environment variables of this node's harness process, over the provider's env (harness providers only). Journaled by name only, as a provider's env.",
		Example: "{CODEX_PROFILE: review}", schema: sEnv()},
	{Name: "cache", Type: "boolean", Default: "the graph's `cache` for a node of an API provider with side_effects none; false for a harness node and a node with side effects", Doc: cacheNodeDoc,
		Example: "false", schema: sBool()},
	{Name: "cache_ttl", Type: "duration", Default: "the graph's `cache_ttl`", Doc: "How old a cached output of this node may be to be reused; an older one is a miss and the node is called again.",
		Example: "1h", schema: sDuration()},
	{Name: "fallback", Type: "list of provider names", Default: "the provider's `fallback`", Doc: fallbackNodeDoc,
		Example: "[backup]", schema: sProviderList()},
	{Name: "fallback_continue", Type: "boolean", Default: "false", Doc: fallbackContinueDoc,
		Example: "true", schema: sBool()},
}

// The cache's field docs: why it is on by default, and what a hit is.
const (
	cacheGraphDoc = "Whether a node's output is reused from an earlier run when everything that determines its answer is unchanged " +
		"(provider kind, base URL, model, node id, rendered system and prompt, request parameters): a hit completes the node from the journal " +
		"without a provider call (NR407 `cache_hit`). On by default because a node without side effects is a function of its request: " +
		"calling it again buys another sample at full price, and people who edit one prompt and run again expect to pay for that node " +
		"and its dependents only. `noderun run --no-cache` calls every node, `--refresh NODE` a node and every node downstream of it; " +
		"`--cache-from other.db` reuses another journal, read-only."
	cacheNodeDoc = "Whether this node's output may be reused from an earlier run (see the graph's `cache`). A harness node, or one with " +
		"side_effects idempotent or unsafe, is never cached unless it says `cache: true` itself: its request acts on the world, " +
		"and a hit would skip the action. `cache: false` calls the node every run (a node sampled for variety)."
)

// fieldsSim are the fields of a sim provider's `sim:` block (package
// provider/sim/simconfig decodes it; a test checks this table against it).
var fieldsSim = []Field{
	{Name: "seed", Type: "whole number", Default: "0", Doc: "Seeds the generated text: the same seed and prompt give the same output.", Example: "7", schema: map[string]any{"type": "integer"}},
	{Name: "tokens", Type: "whole number >= 0", Default: "64", Doc: "Output tokens when the request sets no max_output_tokens.", Example: "200", schema: sInt(0)},
	{Name: "tokens_per_second", Type: "number >= 0", Default: "0 (as fast as possible)", Doc: "The pace of the stream.", Example: "800", schema: map[string]any{"type": "number", "minimum": 0}},
	{Name: "silence", Type: "duration", Default: "0", Doc: "Reasoning silence before the first output token.", Example: "90s", schema: sDuration()},
	{Name: "burst_tokens", Type: "whole number >= 0", Default: "0 (one burst)", Doc: "After each burst of this many tokens, silence again for `silence`.", Example: "50", schema: sInt(0)},
	{Name: "keepalive", Type: "duration", Default: "0 (none)", Doc: "Sends SSE keepalive comments after this long without writing.", Example: "15s", schema: sDuration()},
	{Name: "continuation", Type: "list of strings", Default: "all three forms", Doc: "The continuation forms the simulator accepts (prefix, continue_final_message, assistant_last), or [none]; another form gets the real servers' 400.",
		Example: "[prefix]", schema: map[string]any{"type": "array", "items": sEnum(graphContinuations)}},
	{Name: "continuation_echo", Type: "bool", Default: "false", Doc: "A continued answer repeats the prefix before the continuation, as some servers do.", Example: "true", schema: sBool()},
	{Name: "limits", Type: "mapping", Doc: "Answers like a rate-limited account: requests_per_minute and tokens_per_minute per API key, per `window` (default 1m; tests scale it down), as token buckets that start full; a request past them gets a 429 with Retry-After, and every answer carries the provider's rate-limit headers (see docs/simulator.md).",
		Example: "{requests_per_minute: 120, tokens_per_minute: 40000}",
		schema: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
			"requests_per_minute": sInt(0), "tokens_per_minute": sInt(0), "window": sDuration()}}},
	{Name: "faults", Type: "list of faults", Doc: "Scripted failures (see the fault block); the first that matches a request applies.", Example: "[{endpoint: chat, requests: [1], kind: reset, after_events: 25}]",
		schema: map[string]any{"type": "array", "items": sRef("fault")}},
}

// fieldsFault are the fields of one entry of a sim block's `faults:`.
var fieldsFault = []Field{
	{Name: "kind", Type: "string", Required: true, Doc: orList(graphFaultKinds) + " (see `go doc ./provider/sim/simconfig FaultKind`).", Example: "cut", schema: sEnum(graphFaultKinds)},
	{Name: "endpoint", Type: "string", Default: "any", Doc: orList(graphSimEndpoints) + ".", Example: "responses.create", schema: sEnum(graphSimEndpoints)},
	{Name: "node", Type: "string", Default: "any", Doc: "Only requests for this graph node; requests then counts that node's requests (request k of chat or responses.create is the node's attempt k).", Example: "plan", schema: sString()},
	{Name: "requests", Type: "list of whole numbers", Default: "every request", Doc: "1-based request numbers, counted per endpoint (per node and endpoint with node; connections, for refuse).", Example: "[1, 3]", schema: map[string]any{"type": "array", "items": map[string]any{"type": "integer", "minimum": 1}}},
	{Name: "response_id", Type: "string", Doc: "Only requests about this response.", Example: "resp_1", schema: sString()},
	{Name: "times", Type: "whole number >= 0", Default: "0 (unlimited)", Doc: "How many times the fault applies at most.", Example: "2", schema: sInt(0)},
	{Name: "after_events", Type: "whole number >= 0", Default: "0", Doc: "When close, reset, cut, silence and error_event act on a stream.", Example: "40", schema: sInt(0)},
	{Name: "duration", Type: "duration", Doc: "The length of a silence or an outage (an outage lasts at most 1h).", Example: "2m", schema: sDuration()},
	{Name: "status", Type: "whole number", Doc: "The HTTP status of a status or error_event fault (400-599).", Example: "503", schema: map[string]any{"type": "integer", "minimum": 400, "maximum": 599}},
	{Name: "retry_after", Type: "string", Doc: "The Retry-After header of a status fault (seconds or an HTTP date).", Example: `"2"`, schema: map[string]any{"type": []any{"string", "integer"}}},
}

// fieldsProfile are the fields of one profile in a profiles file (package
// profile decodes it; a test checks this table and its defaults against it).
var fieldsProfile = []Field{
	{Name: "retries", Type: "whole number >= 0", Default: "3", Doc: "The per-node budget of requests sent again from scratch.", Example: "5"},
	{Name: "reconnects", Type: "whole number >= 0", Default: "8", Doc: "Re-attaches and thread resumes in a row without progress (they regenerate nothing and do not spend retries).", Example: "30"},
	{Name: "backoff", Type: "backoff block", Default: "{base: 1s, factor: 2, cap: 30s}", Doc: "The delay before each recovery step: full jitter in [0, min(cap, base × factor^step)].", Example: "{base: 2s, factor: 2, cap: 2m}"},
	{Name: "deadline", Type: "duration > 0", Default: "10m", Doc: "Bounds one stretch of recovery, from the first failure after the last progress until the node streams again.", Example: "2h"},
	{Name: "idle_timeout", Type: "duration > 0", Default: "90s", Doc: "A stream with no event this long is treated as dropped (or polled, for the Responses API).", Example: "10m"},
	{Name: "poll_after", Type: "duration > 0", Default: "30s", Doc: "A silent Responses stream is let go after this long and its status polled; keep it below the gateways' idle timeouts.", Example: "45s"},
	{Name: "poll_interval", Type: "duration > 0", Default: "5s", Doc: "How often a silent response's status is polled.", Example: "15s"},
	{Name: "stuck_after", Type: "duration", Default: "2m", Doc: "A response queued without progress this long is cancelled (0: never).", Example: "10m"},
	{Name: "max_retry_after", Type: "duration", Default: "2m", Doc: "Caps how long a Retry-After may make a node wait.", Example: "10m"},
	{Name: "breaker", Type: "whole number >= 0", Default: "5", Doc: "Opens a provider's circuit after this many consecutive connection failures (0: no breaker).", Example: "5"},
	{Name: "breaker_cooldown", Type: "duration", Default: "5s", Doc: "How long an open circuit waits before one probe; > 0 with a breaker.", Example: "30s"},
	{Name: "max_output_bytes", Type: "size", Default: "32MiB", Doc: "Bounds each node's answer (output and reasoning) where neither the node nor its provider sets max_output_bytes: past it the node fails with NR501, its partial answer kept, and is not retried.", Example: "64MiB"},
	{Name: "max_events", Type: "whole number > 0", Default: "10000000", Doc: "Bounds the events of one attempt's stream (a server could send events without end and without output): past it the node fails with NR501.", Example: "1000000"},
}

// fieldsBackoff are the fields of a profile's backoff.
var fieldsBackoff = []Field{
	{Name: "base", Type: "duration", Default: "1s", Doc: "The ceiling of the first delay.", Example: "2s"},
	{Name: "factor", Type: "number >= 1", Default: "2", Doc: "The ceiling's growth per step.", Example: "2"},
	{Name: "cap", Type: "duration", Default: "30s", Doc: "The largest ceiling.", Example: "2m"},
}

// Blocks lists every block of the language, in the order docs/graph.md
// documents them. The result is a copy: changing it changes nothing else.
func Blocks() []Block {
	bs := blocks()
	for i := range bs {
		bs[i].Fields = slices.Clone(bs[i].Fields)
		for j := range bs[i].Fields {
			bs[i].Fields[j].Kinds = slices.Clone(bs[i].Fields[j].Kinds)
			bs[i].Fields[j].schema = nil
		}
	}
	return bs
}

// BlockFields returns the fields of the named block (see Blocks), or nil.
func BlockFields(name string) []Field {
	for _, b := range Blocks() {
		if b.Name == name {
			return b.Fields
		}
	}
	return nil
}

func blocks() []Block {
	return []Block{
		{Name: "graph", Where: "the top level of a graph file", Fields: fieldsGraph},
		{Name: "input", Where: "each entry of `inputs:`, keyed by the input's name (letters, digits, `_`)", Fields: fieldsInput},
		{Name: "provider", Where: "each entry of `providers:`, keyed by the provider's name", Fields: fieldsProvider},
		{Name: "node", Where: "each entry of `nodes:`", Fields: fieldsNode},
		{Name: "simulator", Where: "the `sim:` field of a provider of kind sim", Fields: fieldsSim},
		{Name: "fault", Where: "each entry of a simulator block's `faults:`", Fields: fieldsFault},
		{Name: "limits", Where: "the `limits:` field of a provider, which sets at least one of them", Fields: fieldsLimits},
		{Name: "profile", Where: "each entry of a profiles file (`profiles:`), keyed by the profile's name; a built-in name overrides only the fields given, a new name starts from `default`", Fields: fieldsProfile},
		{Name: "backoff", Where: "the `backoff:` field of a profile", Fields: fieldsBackoff},
	}
}

func fieldNames(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// BuiltinKinds are the provider kinds noderun itself provides, which no
// registered kind may shadow.
func BuiltinKinds() []string { return slices.Clone(graphProviderKinds) }
