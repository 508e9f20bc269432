package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/graph"
	"github.com/noderun/noderun/runner/ledger"
)

// halfway is a custom provider that says it can continue a dropped answer
// but is no provider.Continuer. Its stream delivers part of an answer and
// drops, which is what makes the recovery loop reach for Continue.
type halfway struct{}

func (halfway) Capabilities() provider.Capabilities { return provider.Capabilities{Continue: true} }

func (halfway) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	if err := emit(provider.Event{Kind: provider.KindDelta, Text: "half an answer", Seq: -1}); err != nil {
		return err
	}
	return diagnostics.Wrap(diagnostics.ClassDisconnect, fmt.Errorf("%w: dropped halfway", diagnostics.ErrDisconnected))
}

// A custom kind whose Capabilities promise Continue without a Continuer is
// refused before the run, naming the graph's file and line, the provider and
// the kind. (It used to pass, and the executor panicked on the first drop.)
func TestCustomKindContinueWithoutContinuer(t *testing.T) {
	opts := Options{Kinds: map[string]ProviderFunc{"halfway": func(*graph.ProviderSpec) (provider.Provider, error) { return halfway{}, nil }}}
	g, err := ParseGraphWith("g.yaml", []byte("name: t\nproviders:\n  p: {kind: halfway}\nnodes:\n  - {id: a, prompt: x}\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Journal = openJournal(t)
	res, err := Run(context.Background(), g, opts)
	want := `g.yaml:3: provider "p": kind "halfway": Capabilities().Continue is set but runner.halfway is not a provider.Continuer`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v (result %+v), want an error containing %q", err, res, want)
	}
}

// Every built-in adapter has the interfaces its capabilities promise, in the
// configurations that turn on what is conditional: the chat adapter with
// each continuation form, Responses, every built-in harness descriptor and
// the simulator's two APIs, built for a run and for a simulated one.
func TestBuiltinProvidersKeepTheirPromises(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "name: t\nproviders:\n")
	for _, c := range provider.Continuations() {
		fmt.Fprintf(&b, "  chat_%s: {kind: openai, base_url: http://127.0.0.1:9/v1, model: m, continuation: %s}\n", c, c)
		fmt.Fprintf(&b, "  sim_%s: {kind: sim, continuation: %s}\n", c, c)
	}
	fmt.Fprintf(&b, "  resp: {kind: responses, base_url: http://127.0.0.1:9/v1, model: m}\n")
	fmt.Fprintf(&b, "  sim_resp: {kind: sim, api: responses}\n")
	for _, h := range harness.Builtins() {
		fmt.Fprintf(&b, "  h_%s: {kind: harness, harness: %s, state_dir: %s}\n", h, h, t.TempDir())
	}
	fmt.Fprintf(&b, "nodes:\n  - {id: a, provider: resp, prompt: x}\n")
	g := parseTestGraph(t, b.String())
	getenv := func(string) string { return "" }
	log := slog.New(slog.DiscardHandler)
	for _, simOpt := range []*SimOptions{nil, {Server: simtest.Start(t, sim.Config{})}} {
		provs, closeAll, err := buildProviders(context.Background(), g, getenv, log, simOpt, nil)
		if err != nil {
			t.Fatalf("simulated %v: %v", simOpt != nil, err)
		}
		var all provider.Capabilities // what some built-in adapter can do
		for name, bp := range provs {
			if err := provider.CheckCapabilities(bp.p); err != nil {
				t.Errorf("simulated %v: %s: %v", simOpt != nil, name, err)
			}
			caps := bp.p.Capabilities()
			if strings.HasPrefix(name, "chat_") || (strings.HasPrefix(name, "sim_") && name != "sim_resp") {
				if want := !strings.HasSuffix(name, "_none"); caps.Continue != want {
					t.Errorf("simulated %v: %s: Continue %v, want %v", simOpt != nil, name, caps.Continue, want)
				}
			}
			all.Resume, all.Check = all.Resume || caps.Resume, all.Check || caps.Check
			all.Cancel, all.Continue = all.Cancel || caps.Cancel, all.Continue || caps.Continue
		}
		closeAll()
		if len(provs) != len(g.Providers) || !all.Resume || !all.Check || !all.Cancel || !all.Continue {
			t.Errorf("simulated %v: %d of %d providers built, with capabilities %+v: the check did not meet every flag",
				simOpt != nil, len(provs), len(g.Providers), all)
		}
	}
}

// Issue 44, one registry: a kind registered once, in Options.Kinds, serves
// parsing, running, resuming and loading. A graph that uses a kind the run
// was not given is an error naming it (graph.ErrUnknownKind), never a nil
// provider or graph; a registered kind that shadows any built-in one
// (anthropic included) is refused; and the ledger reads the journaled graph
// of a run that used a custom kind without being told of it.
func TestOneRegistryOfKinds(t *testing.T) {
	echo := &echoProvider{prompts: map[string]string{}, env: map[string]map[string]string{}}
	opts := Options{Kinds: map[string]ProviderFunc{"echo": func(*graph.ProviderSpec) (provider.Provider, error) { return echo, nil }}}
	src := []byte("name: t\nprofile: ci\nproviders:\n  e: {kind: echo, model: m}\nnodes:\n  - {id: a, prompt: hi}\n")
	g, err := ParseGraphWith("g.yaml", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	j := openJournal(t)
	if _, err := Run(context.Background(), g, Options{Journal: j}); !errors.Is(err, graph.ErrUnknownKind) || !strings.Contains(err.Error(), `"echo"`) {
		t.Fatalf("a kind the run was not given: %v", err)
	}
	if _, err := ParseGraph("g.yaml", src); !errors.Is(err, graph.ErrUnknownKind) {
		t.Fatalf("parsed without the kind: %v", err)
	}
	for _, k := range graph.BuiltinKinds() {
		shadow := Options{Journal: j, Kinds: map[string]ProviderFunc{k: opts.Kinds["echo"]}}
		if _, err := Run(context.Background(), g, shadow); !errors.Is(err, ErrBuiltinKind) {
			t.Errorf("registering %q: %v", k, err)
		}
	}
	opts.Journal = j
	res, err := Run(context.Background(), g, opts)
	if err != nil || res.Status != journal.RunCompleted {
		t.Fatalf("run: %v", err)
	}
	run, err := ledger.Load(context.Background(), j, res.RunID, ledger.LoadOptions{})
	if err != nil || run.Graph == nil || run.Graph.Providers["e"].Kind != "echo" {
		t.Fatalf("ledger.Load of a custom kind's run: %v, graph %v", err, run.Graph)
	}
}
