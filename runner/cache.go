package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/graph"
)

// CacheOptions say how a run reuses the outputs of nodes completed by
// earlier runs (the graph's and nodes' `cache`, docs/graph.md). Every node's
// cache key is journaled whatever they say, so that later runs can reuse
// this one's outputs.
type CacheOptions struct {
	// Off: no node is taken from the cache (`noderun run --no-cache`).
	Off bool
	// Refresh names nodes that are called again whatever the cache holds,
	// and with them every node downstream (`noderun run --refresh`): a
	// refresh distrusts an answer and what was built on it, even when the
	// new answer comes back byte-identical.
	Refresh []string
	// From are more journals to look in after the run's own, opened
	// read-only (`noderun run --cache-from`); the run never writes them.
	From []*journal.Journal
}

// cacheKeyVersion prefixes every key: whenever what goes into a key
// changes, this changes, so old entries miss rather than hit wrongly.
const cacheKeyVersion = "v1"

// CacheRequest is what determines a node's answer: a node's cache key is
// its hash (CacheKey). The continuation form and the recovery profile are
// not in it: they change how a dropped stream is recovered, not the answer.
type CacheRequest struct {
	// Node is in the key: two nodes of a graph sending the same request
	// are separate samples (a best-of-n fan-out), not one answer.
	Node string `json:"node"`
	// Kind, Endpoint and Model say who answers. Endpoint is the base URL
	// (API kinds), the simulator's settings (sim, or a --sim run: a
	// simulated answer never stands in for a real one), or the harness,
	// its command, arguments, environment and working directory.
	Kind     string `json:"kind"`
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Agent is the provider-side agent a gemini node runs instead of a
	// model; absent from the keys of every other node.
	Agent string `json:"agent,omitempty"`
	// System and Prompt are rendered: inputs and upstream outputs are in them.
	System string `json:"system"`
	Prompt string `json:"prompt"`
	// The request parameters (the graph has no temperature).
	ReasoningEffort string `json:"reasoning_effort"`
	MaxOutputTokens int    `json:"max_output_tokens"`
}

// CacheKey is the versioned sha256 of req: "v1:" and 64 hex digits.
func CacheKey(req CacheRequest) string {
	b, _ := json.Marshal(req) // strings and ints: cannot fail; field order is fixed
	sum := sha256.Sum256(append([]byte(cacheKeyVersion+"\n"), b...))
	return cacheKeyVersion + ":" + hex.EncodeToString(sum[:])
}

// runCache is a run's view of the cache.
type runCache struct {
	off       bool
	refresh   map[string]bool // the refreshed nodes and everything downstream
	from      []*journal.Journal
	endpoints map[string]string // provider name → CacheRequest.Endpoint
}

func newRunCache(g *Graph, opts *Options) (*runCache, error) {
	c := &runCache{off: opts.Cache.Off, refresh: map[string]bool{}, from: opts.Cache.From, endpoints: map[string]string{}}
	var down func(id string)
	down = func(id string) {
		if c.refresh[id] {
			return
		}
		c.refresh[id] = true
		for _, d := range g.Dependents(id) {
			down(d)
		}
	}
	for _, id := range opts.Cache.Refresh {
		if g.Node(id) == nil {
			return nil, fmt.Errorf("Options.Cache.Refresh: graph %s has no node %q: %w", g.Name, id, graph.ErrUnknownNode)
		}
		down(id)
	}
	for name, spec := range g.Providers {
		if spec.Kind == ProviderKindHarness && spec.WorkDir == "" {
			cp := *spec
			cp.WorkDir = filepath.Dir(g.Path) // where newHarness runs it
			spec = &cp
		}
		c.endpoints[name] = cacheEndpoint(spec, getenvOf(opts), opts.Sim)
	}
	return c, nil
}

// cacheEndpoint is who answers a provider's requests, for its nodes' keys.
func cacheEndpoint(spec *ProviderSpec, getenv func(string) string, simOpt *SimOptions) string {
	if simOpt != nil {
		if simOpt.Server != nil { // its settings are its own: it is known by its address
			return "simulated " + simOpt.Server.BaseURL()
		}
		return fmt.Sprintf("simulated seed=%d tokens=%d", simOpt.Config.Seed, simOpt.Config.Tokens)
	}
	switch spec.Kind {
	case ProviderKindSim:
		if spec.Sim == nil {
			return "sim"
		}
		b, _ := yaml.Marshal(spec.Sim)
		return "sim " + string(b)
	case ProviderKindHarness:
		env := map[string]string{}
		maps.Copy(env, spec.Env)
		b, _ := json.Marshal(struct {
			Harness, Command, WorkDir string
			Args                      []string
			Env                       map[string]string
		}{spec.Harness, spec.Command, spec.WorkDir, spec.Args, env})
		return string(b)
	}
	if base, _, err := endpoint(spec, getenv); err == nil && base != "" {
		return base
	}
	return spec.BaseURL // a kind registered in Options.Kinds
}

// cacheKey is node n's key for the request it is about to send on bp.
func (r *runState) cacheKey(n *Node, bp builtProvider, system, prompt string) string {
	model := n.Model // as runNode sends it
	if model == "" {
		model = bp.model
	}
	return r.cacheKeyOn(n, n.Provider, model, system, prompt)
}

// cacheKeyOn is node n's key for its request sent to provider prov with
// model: the key says who answers.
func (r *runState) cacheKeyOn(n *Node, prov, model, system, prompt string) string {
	req := CacheRequest{Node: n.ID, Endpoint: r.cache.endpoints[prov], Model: model, Agent: n.Agent, System: system, Prompt: prompt,
		ReasoningEffort: n.ReasoningEffort, MaxOutputTokens: n.MaxOutputTokens}
	spec := r.g.Providers[prov]
	if spec != nil {
		req.Kind = spec.Kind
	}
	if spec != nil && spec.Kind == ProviderKindHarness && len(n.Env) > 0 {
		b, _ := json.Marshal(n.Env) // sorted keys
		req.Endpoint += " " + string(b)
	}
	return CacheKey(req)
}

// fromCache completes node n from the cache if the graph and the run allow
// it and a journal holds an output of key young enough; nil means a miss.
// A cache journal that cannot be read is a miss, not a failure: the node
// is called as if there were no cache.
func (r *runState) fromCache(ctx context.Context, n *Node, key string) *NodeResult {
	if !r.reuses(n) {
		return nil
	}
	_, ttl := r.g.CachePolicy(n)
	var notBefore time.Time
	if ttl > 0 {
		notBefore = time.Now().Add(-ttl)
	}
	for _, j := range append([]*journal.Journal{r.j}, r.cache.from...) {
		e, ok, err := j.LookupCache(ctx, key, r.id, notBefore)
		if err != nil {
			r.log.Warn("cache lookup failed; the node is called", "node", n.ID, "journal", j.Path(), "err", err)
			continue
		}
		if ok {
			if j == r.j {
				e.Journal = ""
			}
			return r.completeFromCache(ctx, n, key, e)
		}
	}
	return nil
}

// reuses says whether node n may take its output from another run's node.
func (r *runState) reuses(n *Node) bool {
	if on, _ := r.g.CachePolicy(n); !on || r.cache.off || r.cache.refresh[n.ID] {
		return false
	}
	// A resumed node picks up its own work (a response to re-attach, a
	// thread to resume): a hit would leave that work running, and billing,
	// at the provider.
	e := r.entries[n.ID]
	return e == nil || e.fresh
}

// inFlightPoll is how often a node waiting for another run's node to
// compute its key looks again.
const inFlightPoll = 250 * time.Millisecond

// awaitInFlight is in-flight sharing: a node whose key another live run
// of the journal is computing waits for that run's node and reuses its
// answer (a cache hit, NR407, naming it), instead of paying for the same
// request twice. Otherwise, or if that node ends without an answer, it
// claims the key (journal.ClaimKey: of two runs at once, exactly one does)
// and returns nil, unless the cache now has it: this node computes it.
// Cache hits and waits go by the same rules (reuses): --no-cache, a node's
// cache: false and --refresh turn both off.
func (r *runState) awaitInFlight(ctx context.Context, n *Node, key string) *NodeResult {
	if !r.reuses(n) {
		return nil
	}
	start := time.Now()
	for {
		other, err := r.j.ClaimKey(bg(ctx), r.id, n.ID, key)
		if err != nil {
			r.log.Warn("in-flight claim failed; the node is called", "node", n.ID, "err", err)
			return nil
		}
		if other == nil {
			// Claimed. A node of another run that completed the key
			// after this one's cache lookup and before its claim was
			// neither a hit nor in flight: look once more, now that
			// any later one must wait for this node.
			return r.fromCache(ctx, n, key)
		}
		from := *other
		r.log.Info("waiting for another run's node computing the same request", "node", n.ID,
			"in_flight_run", from.Run, "in_flight_node", from.Node, "runner", from.Owner.String())
		for other != nil {
			select {
			case <-ctx.Done():
				return r.notStarted(ctx, n, context.Cause(ctx))
			case <-time.After(inFlightPoll):
			}
			if hit := r.fromCache(ctx, n, key); hit != nil {
				r.log.Info("reused the answer of another run's node", "node", n.ID, "from_run", from.Run,
					"from_node", from.Node, "waited", time.Since(start).Round(time.Millisecond))
				return hit
			}
			if other, err = r.j.InFlightOf(ctx, r.id, key); err != nil {
				r.log.Warn("in-flight lookup failed; the node is called", "node", n.ID, "err", err)
				return nil
			}
		}
		// What it waited for ended without an answer: claim again (another
		// waiting run may have claimed it first).
	}
}

// completeFromCache journals a hit: the record naming where the output
// came from and what it saved, then the node completed with that output.
func (r *runState) completeFromCache(ctx context.Context, n *Node, key string, e journal.CacheEntry) *NodeResult {
	if e.Origin.Journal == "" { // kept by a hit on a hit: where it was produced
		e.Origin.Journal = e.Journal
	}
	o, u := e.Origin, e.Origin.Usage
	short := o.Run
	if len(short) > 8 {
		short = short[:8] // a unique prefix, as the CLI shows run ids (KeyFromRun has it whole)
	}
	msg := fmt.Sprintf("cache hit: output of node %s of run %s (produced %s), reused without a provider call",
		o.Node, short, o.Produced.UTC().Format(time.RFC3339))
	if o.Journal != "" { // last: a shortened line keeps its end
		msg += ", from journal " + o.Journal
	}
	r.diag(ctx, n.ID, 0, diagnostics.New(diagnostics.CacheHit, msg, diagnostics.KeyCacheKey.Attr(key),
		diagnostics.KeyFromRun.Attr(o.Run), diagnostics.KeyFromNode.Attr(o.Node), diagnostics.KeyFromJournal.Attr(o.Journal),
		diagnostics.KeyModel.Attr(u.Model), diagnostics.KeySavedInput.Attr(u.InputTokens), diagnostics.KeySavedOutput.Attr(u.OutputTokens),
		diagnostics.KeySavedReasoning.Attr(u.ReasoningTokens), diagnostics.KeySavedCacheRead.Attr(u.CacheReadTokens),
		diagnostics.KeySavedCacheWrite.Attr(u.CacheWriteTokens)))
	res := &NodeResult{ID: n.ID, State: journal.NodeCompleted, Output: e.Output, FromCache: o.Run + "/" + o.Node, FromJournal: o.Journal}
	if err := r.j.CompleteNodeFromCache(bg(ctx), r.id, n.ID, key, e); err != nil {
		res.State, res.Err, res.Reason = journal.NodeFailed, err, "journal: "+err.Error()
	}
	return res
}
