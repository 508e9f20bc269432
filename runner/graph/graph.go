package graph

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/noderun/noderun/provider/sim/simconfig"
)

// Graph is a validated goal graph, as read from a YAML file. A *Graph
// returned by Load or Parse is acyclic, every need names a defined
// node, every node names a defined provider, and every prompt template refers
// only to the outputs of the node's needs. It is not modified after parsing
// and is safe for concurrent use.
type Graph struct {
	Name string
	// Profile is the default profile name ("" when the file sets none); it is
	// checked against the profile set by the caller.
	Profile string
	// ProfilesPath is the profiles file, made absolute against the graph
	// file's directory ("" when the file sets none).
	ProfilesPath string
	// Path is the graph file as given to Load or Parse.
	Path string
	// Source is the file's text and Hash its sha256, in hex.
	Source []byte
	Hash   string
	// Inputs are the values a run takes (`noderun run --input name=value`),
	// in file order; InputsLine is where `inputs:` is (0 when absent).
	Inputs     []*Input
	InputsLine int
	// Providers by name.
	Providers map[string]*ProviderSpec
	// Nodes in file order.
	Nodes []*Node
	// Cache and CacheTTL are the graph's `cache` and `cache_ttl`: the
	// defaults of its nodes (see CachePolicy); Cache is nil when omitted.
	Cache    *bool
	CacheTTL time.Duration

	byID       map[string]*Node
	pos        map[string]int // a node's index in Nodes
	dependents map[string][]string
	order      []string
}

// Provider kinds.
const (
	ProviderKindSim       = "sim"
	ProviderKindOpenAI    = "openai"
	ProviderKindResponses = "responses"
	ProviderKindHarness   = "harness"
	// ProviderKindAnthropic: the Anthropic Messages API (provider/anthropic).
	ProviderKindAnthropic = "anthropic"
	// ProviderKindGemini is the Gemini Interactions API in background mode.
	ProviderKindGemini = "gemini"
)

// APIs a sim provider can speak (ProviderSpec.API).
const (
	SimAPIChat      = "chat"
	SimAPIResponses = "responses"
)

// ProviderSpec is one entry of a graph's providers mapping. Only the fields
// valid for its Kind can be set (see fieldsProvider and docs/graph.md).
type ProviderSpec struct {
	Name string
	// Kind is one of the ProviderKind constants.
	Kind string
	// BaseURL and APIKeyEnv (openai, responses): empty means the adapter's
	// environment defaults (OPENAI_BASE_URL, OPENAI_API_KEY).
	BaseURL   string
	APIKeyEnv string
	// Model is the default model of the provider's nodes.
	Model string
	// Agent (gemini) is the default agent of the provider's nodes, run
	// instead of a model (the Interactions API takes one or the other).
	Agent string
	// MaxDials (openai, responses) bounds the connects to the
	// provider's host in flight at once; 0 means conns.DefaultMaxDials.
	MaxDials int
	// API (sim): SimAPIChat or SimAPIResponses; set to SimAPIChat when omitted.
	API string
	// Continuation (openai, sim chat): the server's form for continuing a
	// partial answer (provider.Continuation); empty means none.
	Continuation string
	// Harness (harness): a built-in descriptor name, or a descriptor file.
	// Command (harness): the binary. A Harness or Command value that contains
	// a path separator is made absolute against the graph file's directory;
	// a bare name is left as is.
	Harness string
	Command string
	// WorkDir (harness) is made absolute against the graph file's directory.
	WorkDir string
	// StateDir (harness) holds each node's harness state (session stores);
	// made absolute against the graph file's directory. Empty: the default.
	StateDir string
	Args     []string
	Env      map[string]string
	// Sim (sim) is the simulator's configuration: how it generates (seed,
	// tokens, pace, silence) and its scripted faults; nil when omitted (the
	// zero simconfig.Config, which provider/sim aliases as sim.Config). A
	// graph file's `sim:` block fills it (problems reported at their
	// file:line); in code, set it directly.
	Sim *simconfig.Config
	// Limits are the rate limits of the provider's account as the graph
	// declares them (`limits:`); zero fields are not declared. A run also
	// learns the account's limits from the provider's response headers,
	// and paces its requests by both.
	Limits Limits
	// Fallback names the providers, in order, that a node of this provider
	// moves to when it is unavailable (`fallback:`); nil for none.
	// MaxOutputBytes bounds the answer of each of its nodes that sets
	// none (0: the profile's max_output_bytes).
	MaxOutputBytes int64
	Fallback       []string
	// Line is where the provider is named in the file.
	Line int
}

// Limits are an account's rate limits; 0 means not declared.
type Limits struct {
	RequestsPerMinute int
	TokensPerMinute   int
	// Concurrency bounds the account's requests in flight at once.
	Concurrency int
}

// SideEffects says what sending a node's request again can do to the world.
type SideEffects string

// Side effect classes.
const (
	// SideNone: the request only produces text; sending it again is harmless.
	SideNone SideEffects = "none"
	// SideIdempotent: the request acts on the world, but doing it twice is
	// the same as doing it once.
	SideIdempotent SideEffects = "idempotent"
	// SideUnsafe: sending the request again may repeat its actions.
	SideUnsafe SideEffects = "unsafe"
)

// Node is one node of a graph.
type Node struct {
	ID string
	// Needs are the ids of the nodes whose outputs this node's prompt may use;
	// the node runs after all of them have completed.
	Needs []string
	// Provider names an entry of Graph.Providers. When the file omits it and
	// the graph defines exactly one provider, it is that one.
	Provider string
	// Model is the node's model, or when the file omits it the provider's.
	Model string
	// Agent (gemini) is the node's agent, or when the file omits it (and
	// sets no model) the provider's; a node with an agent sends no model.
	Agent string
	// System and Prompt are Go text/templates: output "id", input "name",
	// failed "id", .Outputs and .Inputs (see the package doc, Render).
	System string
	Prompt string
	// ReasoningEffort is "" or one of none, minimal, low, medium, high.
	ReasoningEffort string
	// MaxOutputTokens is 0 when not set.
	MaxOutputTokens int
	// MaxOutputBytes bounds the node's answer (0: its provider's, else
	// the profile's max_output_bytes).
	MaxOutputBytes int64
	// Retries overrides the profile's retry budget when not nil.
	Retries *int
	// SideEffects is as set, or when omitted SideUnsafe for harness
	// providers and SideNone otherwise.
	SideEffects SideEffects
	// Timeout bounds the node's wall time, recovery included (0: none).
	Timeout time.Duration
	// ContinueOnFailure: when the node fails, its dependents still run; they
	// see an empty output and `failed "id"` true. The run still fails.
	ContinueOnFailure bool
	// Env is added to the environment of the node's harness process, over
	// the provider's Env (harness providers only).
	Env map[string]string
	// Cache is the node's own `cache` (nil when omitted: see
	// Graph.CachePolicy); CacheTTL its `cache_ttl` (0: the graph's).
	Cache    *bool
	CacheTTL time.Duration
	// Fallback is the node's own `fallback` list of providers to move to
	// when its provider is unavailable: nil when omitted (the provider's
	// list applies), empty to turn failover off for the node.
	Fallback []string
	// FallbackContinue (`fallback_continue`): on failover, a fallback that
	// has a continuation form continues the node's journaled partial
	// answer instead of starting it again.
	FallbackContinue bool
	// Line is where the node's entry starts in the file.
	Line int

	promptTmpl *template.Template
	systemTmpl *template.Template
}

// Load reads and validates a graph file. A file that cannot be read is
// a plain error; a file that is not a valid graph is an *Error listing
// every problem found.
func Load(path string) (*Graph, error) { return LoadContext(context.Background(), path) }

// MaxFileBytes bounds a graph file: far above any graph people write, far
// below what would hurt (a path to /dev/zero, a pipe that never ends).
const MaxFileBytes = 4 << 20

// MaxPromptBytes bounds a node's rendered system or prompt: above any
// model's context window, so a template that would render more (a range
// over a huge count, outputs pasted many times) is an error, not an OOM.
const MaxPromptBytes = 8 << 20

// ErrTooLarge is the error of a graph file or rendered prompt past its bound.
var ErrTooLarge = errors.New("larger than noderun's limit")

// LoadContext is Load, reading at most MaxFileBytes and giving up when ctx
// ends: a FIFO that nobody writes, or a device, cannot hold the caller (the
// blocked read is abandoned).
func LoadContext(ctx context.Context, path string) (*Graph, error) {
	type result struct {
		src []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer f.Close()
		src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
		done <- result{src, err}
	}()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("graph: reading %s: %w", path, context.Cause(ctx))
	case r := <-done:
		switch {
		case r.err != nil:
			// "graph g.yaml: no such file or directory", not Go's "open g.yaml: …".
			var pe *fs.PathError
			if errors.As(r.err, &pe) {
				return nil, fmt.Errorf("graph %s: %w", path, pe.Err)
			}
			return nil, fmt.Errorf("graph %s: %w", path, r.err)
		case len(r.src) > MaxFileBytes:
			return nil, fmt.Errorf("graph: %s is %w: a graph file may have at most %d MiB", path, ErrTooLarge, MaxFileBytes>>20)
		}
		return Parse(path, r.src)
	}
}

// Node returns the node with the given id, or nil.
func (g *Graph) Node(id string) *Node { return g.byID[id] }

// Position is node id's index in Nodes (its place in the file); -1 when
// the graph has no such node.
func (g *Graph) Position(id string) int {
	if i, ok := g.pos[id]; ok {
		return i
	}
	return -1
}

// Dependents returns the ids of the nodes that directly need id, in file
// order.
func (g *Graph) Dependents(id string) []string {
	return append([]string(nil), g.dependents[id]...)
}

// FallbacksOf returns the providers node n moves to, in order, when its
// provider is unavailable: the node's own `fallback` when it sets one (an
// empty list: none), else its provider's. Only that one list is used: the
// fallbacks' own lists are not followed, so where a node can end up is
// what its graph says for it, and two providers naming each other cannot
// send a node round in circles. The node's own provider is never in the
// result, nor any provider twice. A node with side effects unsafe never fails over whatever the
// list says (the runner enforces that); the result is a copy.
func (g *Graph) FallbacksOf(n *Node) []string {
	if n == nil {
		return nil
	}
	list := n.Fallback
	if list == nil {
		if spec := g.Providers[n.Provider]; spec != nil {
			list = spec.Fallback
		}
	}
	var out []string
	for _, name := range list {
		if name != n.Provider && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Built reports whether g came from Parse, Load or Build (indexed, its
// templates compiled, checked): a Graph filled in by hand is not, until
// Build makes it one.
func (g *Graph) Built() bool { return g != nil && g.byID != nil }

// Order returns the node ids in a topological order: every node comes after
// all of its needs, and among the nodes that are ready at each step the one
// first in the file comes first. It is the same on every call.
func (g *Graph) Order() []string { return append([]string(nil), g.order...) }

// index builds the lookup tables of a graph whose nodes are known to be
// valid (unique ids, needs defined, acyclic).
func (g *Graph) index() {
	g.byID = make(map[string]*Node, len(g.Nodes))
	g.dependents = make(map[string][]string, len(g.Nodes))
	g.pos = make(map[string]int, len(g.Nodes))
	pos := g.pos
	for i, n := range g.Nodes {
		g.byID[n.ID] = n
		pos[n.ID] = i
	}
	for _, n := range g.Nodes {
		for _, need := range n.Needs {
			g.dependents[need] = append(g.dependents[need], n.ID)
		}
	}
	g.order = graphTopoOrder(g.Nodes, pos, g.dependents)
}

// graphTopoOrder is Kahn's algorithm taking ready nodes in file order. Nodes
// on a cycle are left out, so a short result means a cycle.
func graphTopoOrder(nodes []*Node, pos map[string]int, dependents map[string][]string) []string {
	waiting := make([]int, len(nodes))
	ready := &graphIntHeap{}
	for i, n := range nodes {
		waiting[i] = len(n.Needs)
		if waiting[i] == 0 {
			heap.Push(ready, i)
		}
	}
	order := make([]string, 0, len(nodes))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, nodes[i].ID)
		for _, d := range dependents[nodes[i].ID] {
			j := pos[d]
			waiting[j]--
			if waiting[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	return order
}

type graphIntHeap []int

func (h graphIntHeap) Len() int           { return len(h) }
func (h graphIntHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h graphIntHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *graphIntHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *graphIntHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Error is a graph file that is not valid: every problem found, in line
// order.
type Error struct {
	Path     string
	Problems []Problem
	// InCode: the graph was built in code (Build), so there is no file to
	// point into. Path is then the Graph's Path, or `graph "NAME"`; Error
	// names each problem by its node and field only, and a Problem's Line
	// refers to the graph's Source (the equivalent graph file).
	InCode bool
}

// Problem is one thing wrong with a graph file.
type Problem struct {
	// Line is 1-based; 0 when the problem has no single place in the file.
	Line int
	// Node is the id of the node the problem is about, if any.
	Node string
	// Field is the YAML field the problem is about, if any.
	Field string
	// Msg says what is wrong (without the node prefix).
	Msg string
	// Err is the typed cause, when there is one (an *InputTooLargeError):
	// errors.As finds it through the *Error.
	Err error
}

// String is the problem without its location: `node "plan": unknown field "promt"`.
func (p Problem) String() string {
	if p.Node != "" {
		return fmt.Sprintf("node %q: %s", p.Node, p.Msg)
	}
	return p.Msg
}

// Error lists every problem, one per line, as "path:line: message"; for a
// graph built in code, as `graph "NAME": node "ID": field ...: message`.
// Unwrap gives the problems' typed causes to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var out []error
	for _, p := range e.Problems {
		if p.Err != nil {
			out = append(out, p.Err)
		}
	}
	return out
}

func (e *Error) Error() string {
	path := e.Path
	if path == "" {
		path = "<graph>"
	}
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(path)
		if p.Line > 0 && !e.InCode {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if e.InCode && p.Field != "" && !strings.HasPrefix(p.Msg, p.Field) {
			// Without a line, the field is the only place to look.
			p.Msg = p.Field + ": " + p.Msg
		}
		b.WriteString(p.String())
	}
	if len(e.Problems) == 0 {
		b.WriteString(path)
		b.WriteString(": invalid graph")
	}
	return b.String()
}
