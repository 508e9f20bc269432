package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/openai"
	"github.com/noderun/noderun/provider/responses"
	"github.com/noderun/noderun/provider/sim"
)

const defaultOpenAIBaseURL = "https://api.openai.com/v1"

// builtProvider is a ready adapter with the defaults its nodes inherit.
type builtProvider struct {
	p       provider.Provider
	model   string
	workDir string
	// inProcess: the provider runs inside this process (the embedded
	// simulator), so its work ends with the runner and cannot be re-attached.
	inProcess bool
}

// Check finds, without starting or writing anything, every problem in g
// beyond its syntax: the profile, simulator settings, harness descriptors.
// Its errors name the graph file, the line and the provider.
func Check(g *Graph, opts *Options) error {
	if _, err := Prepare(g, opts); err != nil {
		return err
	}
	var errs []error
	for _, name := range sortedProviderNames(g) {
		spec := g.Providers[name]
		var err error
		switch spec.Kind {
		case ProviderKindSim:
			_, err = simConfig(spec)
		case ProviderKindHarness:
			_, err = newHarness(g, spec, getenvOf(opts), nil)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, name, err))
		}
	}
	return errors.Join(errs...)
}

// CheckEnvironment finds what this machine lacks to run g: API keys in the
// environment, harness binaries. `run` refuses to start without them;
// `validate` only warns, since a graph may be checked where it is not run.
func CheckEnvironment(g *Graph, opts *Options) error {
	getenv := getenvOf(opts)
	var errs []error
	for _, name := range sortedProviderNames(g) {
		spec := g.Providers[name]
		_, _, err := endpoint(spec, getenv)
		if err == nil && spec.Kind == ProviderKindHarness {
			var p *harness.Provider
			if p, err = newHarness(g, spec, getenv, nil); err == nil {
				_, err = p.LookPath()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, name, err))
		}
	}
	return errors.Join(errs...)
}

func getenvOf(opts *Options) func(string) string {
	if opts.Getenv != nil {
		return opts.Getenv
	}
	return os.Getenv
}

// endpoint resolves a provider's base URL and API key from the graph and the
// environment (OPENAI_BASE_URL, OPENAI_API_KEY).
func endpoint(spec *ProviderSpec, getenv func(string) string) (baseURL, key string, err error) {
	if spec.Kind != ProviderKindOpenAI && spec.Kind != ProviderKindResponses {
		return "", "", nil // sim, harness, and kinds registered in Options.Kinds
	}
	baseURL = spec.BaseURL
	if baseURL == "" {
		baseURL = getenv("OPENAI_BASE_URL")
	}
	if baseURL == "" {
		baseURL = defaultOpenAIBaseURL
	}
	keyEnv := spec.APIKeyEnv
	if keyEnv == "" {
		keyEnv = "OPENAI_API_KEY"
	}
	key = getenv(keyEnv)
	if key == "" && (spec.APIKeyEnv != "" || baseURL == defaultOpenAIBaseURL) {
		return "", "", fmt.Errorf("environment variable %s (api_key_env) is empty", keyEnv)
	}
	return baseURL, key, nil
}

func simConfig(spec *ProviderSpec) (sim.Config, error) {
	if spec.Sim == nil {
		return sim.Config{}, nil
	}
	return sim.DecodeConfig(spec.Sim)
}

// buildProviders makes every adapter the graph names, starting an embedded
// simulator for each sim provider. close stops them.
func buildProviders(ctx context.Context, g *Graph, getenv func(string) string, log *slog.Logger, kinds map[string]ProviderFunc) (map[string]builtProvider, func(), error) {
	out := make(map[string]builtProvider, len(g.Providers))
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	for _, name := range sortedProviderNames(g) {
		spec := g.Providers[name]
		if f, ok := kinds[spec.Kind]; ok {
			bp, err := buildCustom(g, spec, f)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			if c, ok := bp.p.(io.Closer); ok {
				closers = append(closers, c.Close)
			}
			out[name] = bp
			continue
		}
		baseURL, key, err := endpoint(spec, getenv)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, name, err)
		}
		bp := builtProvider{model: spec.Model, workDir: spec.WorkDir}
		api := spec.Kind
		if spec.Kind == ProviderKindSim {
			cfg, err := simConfig(spec)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, name, err)
			}
			cfg.Logger = log.With("sim", name)
			srv := sim.New(cfg)
			if err := srv.Start(""); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("provider %q: starting the simulator: %w", name, err)
			}
			closers = append(closers, srv.Close)
			baseURL, bp.inProcess = srv.BaseURL(), true
			api = ProviderKindOpenAI
			if spec.API == SimAPIResponses {
				api = ProviderKindResponses
			}
			if bp.model == "" {
				bp.model = "sim"
			}
		}
		switch api {
		case ProviderKindHarness:
			p, err := newHarness(g, spec, getenv, log)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, name, err)
			}
			bp.p = p
		case ProviderKindOpenAI:
			bp.p = openai.New(openai.Config{BaseURL: baseURL, APIKey: key})
		case ProviderKindResponses:
			p, err := responses.New(responses.Config{BaseURL: baseURL, APIKey: key, Logger: log})
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("provider %q: %w", name, err)
			}
			bp.p = p
		}
		out[name] = bp
	}
	return out, closeAll, nil
}

func sortedProviderNames(g *Graph) []string {
	names := make([]string, 0, len(g.Providers))
	for n := range g.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// newHarness builds an agent harness adapter. The binary of a built-in
// harness comes from the provider's command, else $NODERUN_CODEX,
// $NODERUN_CLAUDE or $NODERUN_GEMINI (what `make tools` installs), else PATH.
func newHarness(g *Graph, spec *ProviderSpec, getenv func(string) string, log *slog.Logger) (*harness.Provider, error) {
	name := spec.Harness
	if name == "" {
		name = "codex"
	}
	cmd := spec.Command
	if cmd == "" && slices.Contains(harness.Builtins(), name) {
		cmd = getenv("NODERUN_" + strings.ToUpper(name))
	}
	dir := spec.WorkDir
	if dir == "" {
		dir = filepath.Dir(g.Path)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return harness.New(harness.Config{Harness: name, Command: cmd, Args: spec.Args, Env: spec.Env, WorkDir: dir,
		StateDir: spec.StateDir, Logger: log})
}
