package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/noderun/noderun/provider/anthropic"
	"github.com/noderun/noderun/provider/gemini"
	"github.com/noderun/noderun/provider/harness"
	"github.com/noderun/noderun/provider/openai"
	"github.com/noderun/noderun/provider/responses"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner/graph"
	"github.com/noderun/noderun/runner/quota"
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
	// account names what the provider's rate limits are counted on (its
	// kind, base URL and key): nodes of providers with the same account and
	// model share one pacer. Empty for a provider that is not paced (an
	// agent harness, a kind of the program's own without declared limits).
	account string
	limits  quota.Limits
}

// Check finds, without starting or writing anything, every problem in g
// beyond its syntax: the profile, simulator settings, harness descriptors.
// Its errors name the graph file, the line and the provider.
func Check(g *Graph, opts *Options) error {
	prof, err := Prepare(g, opts)
	if err != nil {
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
		if err == nil {
			// Responses streams are polled and harnesses watch themselves;
			// a chat stream has only the idle watchdog.
			chat := spec.Kind == ProviderKindOpenAI || (spec.Kind == ProviderKindSim && spec.API != SimAPIResponses) ||
				spec.Kind == ProviderKindAnthropic
			err = prof.CheckIdle(!chat)
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
		var err error
		if opts.Sim == nil { // a simulated run needs no keys
			_, _, err = endpoint(spec, getenv)
		} else if spec.Kind == ProviderKindHarness && spec.Harness != "" && !slices.Contains(simulatedHarnesses, spec.Harness) {
			err = fmt.Errorf("harness %q cannot be pointed at the simulator: only the built-in %v can", spec.Harness, simulatedHarnesses)
		}
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
	if spec.Kind == ProviderKindAnthropic {
		return anthropicEndpoint(spec, getenv)
	}
	if spec.Kind == ProviderKindGemini {
		return geminiEndpoint(spec, getenv)
	}
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
	keyEnv := keyEnvOf(spec)
	key = getenv(keyEnv)
	if key == "" && (spec.APIKeyEnv != "" || baseURL == defaultOpenAIBaseURL) {
		return "", "", fmt.Errorf("environment variable %s (api_key_env) is empty", keyEnv)
	}
	return baseURL, key, nil
}

// anthropicEndpoint resolves a kind anthropic provider's base URL and key
// (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, as Anthropic's SDKs read them).
func anthropicEndpoint(spec *ProviderSpec, getenv func(string) string) (baseURL, key string, err error) {
	baseURL = spec.BaseURL
	if baseURL == "" {
		baseURL = getenv("ANTHROPIC_BASE_URL")
	}
	if baseURL == "" {
		baseURL = anthropic.DefaultBaseURL
	}
	keyEnv := keyEnvOf(spec)
	key = getenv(keyEnv)
	if key == "" && (spec.APIKeyEnv != "" || baseURL == anthropic.DefaultBaseURL) {
		return "", "", fmt.Errorf("environment variable %s (api_key_env) is empty", keyEnv)
	}
	return baseURL, key, nil
}

// geminiEndpoint resolves a gemini provider's base URL (the adapter's
// default when empty) and its key (GEMINI_API_KEY unless api_key_env says
// otherwise), required for Google's own endpoint.
func geminiEndpoint(spec *ProviderSpec, getenv func(string) string) (baseURL, key string, err error) {
	keyEnv := keyEnvOf(spec)
	key = getenv(keyEnv)
	if key == "" && (spec.APIKeyEnv != "" || spec.BaseURL == "" || spec.BaseURL == gemini.DefaultBaseURL) {
		return "", "", fmt.Errorf("environment variable %s (api_key_env) is empty", keyEnv)
	}
	return spec.BaseURL, key, nil
}

// keyEnvOf is the environment variable a provider's API key is read
// from: its api_key_env, else its kind's own, as that vendor's SDKs read it.
func keyEnvOf(spec *ProviderSpec) string {
	if spec.APIKeyEnv != "" {
		return spec.APIKeyEnv
	}
	switch spec.Kind {
	case ProviderKindAnthropic:
		return "ANTHROPIC_API_KEY"
	case ProviderKindGemini:
		return "GEMINI_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// keyDocs is where a provider kind's vendor says how to get and set an API key.
func keyDocs(kind string) string {
	switch kind {
	case ProviderKindAnthropic:
		return "https://docs.anthropic.com/en/api/overview#authentication"
	case ProviderKindGemini:
		return "https://ai.google.dev/gemini-api/docs/api-key"
	case ProviderKindOpenAI, ProviderKindResponses:
		return "https://platform.openai.com/docs/api-reference/authentication"
	}
	return ""
}

// secrets lists the credentials a run of g may send or hand to a harness:
// each provider's API key, and every value of a provider's or node's env
// (a CLI's login token goes by many names). They are masked before
// anything is journaled or logged.
func secrets(g *Graph, getenv func(string) string) []string {
	var out []string
	for _, name := range sortedProviderNames(g) {
		spec := g.Providers[name]
		if _, key, err := endpoint(spec, getenv); err == nil && key != "" {
			out = append(out, key)
		}
		for _, v := range spec.Env { // whatever its name: a CLI's login token goes by many
			out = append(out, v)
		}
	}
	for _, n := range g.Nodes {
		if len(n.Env) == 0 {
			continue // most nodes (ranging over an empty map is not free: see graph.HiddenEnv)
		}
		for _, v := range n.Env {
			out = append(out, v)
		}
	}
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "CODEX_API_KEY"} {
		if v := getenv(k); v != "" { // harnesses read these from the environment they inherit
			out = append(out, v)
		}
	}
	return out
}

// simConfig is the configuration of a sim provider's own simulator. The
// graph's parser (or Build) checked it already; a Graph put together
// without them is checked here.
func simConfig(spec *ProviderSpec) (sim.Config, error) {
	if spec.Sim == nil {
		return sim.Config{}, nil
	}
	cfg := *spec.Sim
	if cfg.Limits != nil {
		if err := cfg.Limits.Validate(); err != nil {
			return cfg, fmt.Errorf("sim: %w", err)
		}
	}
	for i, f := range cfg.Faults {
		if err := f.Validate(); err != nil {
			return cfg, fmt.Errorf("sim: faults[%d]: %w", i, err)
		}
	}
	return cfg, nil
}

// buildProviders makes every adapter the graph names, starting an embedded
// simulator for each sim provider, or pointing every provider at a
// simulator when simOpt is set. kinds builds the providers of the kinds a
// program registered (never simulated). close stops them.
func buildProviders(ctx context.Context, g *Graph, getenv func(string) string, log *slog.Logger, simOpt *SimOptions, kinds map[string]ProviderFunc) (map[string]builtProvider, func(), error) {
	out := make(map[string]builtProvider, len(g.Providers))
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	var shared *sim.Server // the simulator of a simulated run
	if simOpt != nil {
		shared = simOpt.Server
		if shared == nil {
			cfg := simOpt.Config
			cfg.Logger = log.With("sim", "--sim")
			shared = sim.New(cfg)
			if err := shared.Start(""); err != nil {
				return nil, nil, fmt.Errorf("starting the simulator: %w", err)
			}
			closers = append(closers, shared.Close)
		}
	}
	for _, name := range sortedProviderNames(g) {
		spec := g.Providers[name]
		fail := func(err error) (map[string]builtProvider, func(), error) {
			closeAll()
			return nil, nil, fmt.Errorf("%s:%d: provider %q: %w", g.Path, spec.Line, name, err)
		}
		// keep takes a built provider into the run: closed when it ends, and
		// only if it has the interfaces its capabilities promise, since the
		// recovery loop calls them without asking.
		keep := func(bp builtProvider) error {
			if bp.p == nil {
				return fmt.Errorf("kind %q built no provider", spec.Kind)
			}
			if c, ok := bp.p.(io.Closer); ok {
				closers = append(closers, c.Close) // a run's idle connections end with it
			}
			if err := provider.CheckCapabilities(bp.p); err != nil {
				return fmt.Errorf("kind %q: %w", spec.Kind, err)
			}
			out[name] = bp
			return nil
		}
		limits := quota.Limits{RequestsPerMinute: spec.Limits.RequestsPerMinute, TokensPerMinute: spec.Limits.TokensPerMinute,
			Concurrency: spec.Limits.Concurrency}
		if f, ok := kinds[spec.Kind]; ok {
			p, err := f(spec)
			bp := builtProvider{p: p, model: spec.Model, limits: limits}
			if limits != (quota.Limits{}) {
				bp.account = spec.Kind + " " + name // only its declared limits are known
			}
			if err == nil {
				err = keep(bp)
			}
			if err != nil {
				return fail(err)
			}
			continue
		}
		if !slices.Contains(graph.BuiltinKinds(), spec.Kind) {
			// Parsed or built with kinds this run was not given.
			return fail(fmt.Errorf("kind %q is not registered with the runner (Options.Kinds): %w", spec.Kind, graph.ErrUnknownKind))
		}
		var baseURL, key string
		api := spec.Kind
		ownSim := spec.Kind == ProviderKindSim && (simOpt == nil || simOpt.Server == nil)
		switch {
		case ownSim:
			cfg, err := simConfig(spec)
			if err != nil {
				return fail(err)
			}
			cfg.Logger = log.With("sim", name)
			srv := sim.New(cfg)
			if err := srv.Start(""); err != nil {
				return fail(fmt.Errorf("starting the simulator: %w", err))
			}
			closers = append(closers, srv.Close)
			baseURL = srv.BaseURL()
			api = ProviderKindOpenAI
			if spec.API == SimAPIResponses {
				api = ProviderKindResponses
			}
		case shared != nil:
			var cleanup func()
			var err error
			if api, spec, cleanup, err = simulate(spec, shared); err != nil {
				return fail(err)
			}
			closers = append(closers, func() error { cleanup(); return nil })
			baseURL = shared.BaseURL()
			if api == ProviderKindGemini {
				baseURL = strings.TrimSuffix(baseURL, "/v1") // the Gemini API's paths start at /v1beta
			}
		default:
			var err error
			if baseURL, key, err = endpoint(spec, getenv); err != nil {
				return fail(err)
			}
		}
		// A simulator in this process ends with it: its responses cannot outlive an interruption.
		bp := builtProvider{model: spec.Model, workDir: spec.WorkDir, inProcess: ownSim || shared != nil, limits: limits}
		if api != ProviderKindHarness {
			bp.account = accountOf(api, baseURL, key)
		}
		if bp.model == "" && (ownSim || shared != nil) {
			bp.model = "sim"
		}
		switch api {
		case ProviderKindHarness:
			p, err := newHarness(g, spec, getenv, log)
			if err != nil {
				return fail(err)
			}
			bp.p = p
		case ProviderKindOpenAI:
			bp.p = openai.New(openai.Config{BaseURL: baseURL, APIKey: key, Continuation: provider.Continuation(spec.Continuation),
				MaxDials: spec.MaxDials})
		case ProviderKindAnthropic:
			bp.p = anthropic.New(anthropic.Config{BaseURL: baseURL, APIKey: key, Continuation: provider.Continuation(spec.Continuation),
				MaxDials: spec.MaxDials})
		case ProviderKindGemini:
			p, err := gemini.New(gemini.Config{BaseURL: baseURL, APIKey: key, Agent: spec.Agent, Logger: log, MaxDials: spec.MaxDials})
			if err != nil {
				return fail(err)
			}
			bp.p = p
		case ProviderKindResponses:
			p, err := responses.New(responses.Config{BaseURL: baseURL, APIKey: key, Logger: log, MaxDials: spec.MaxDials})
			if err != nil {
				return fail(err)
			}
			bp.p = p
		}
		if err := keep(bp); err != nil {
			return fail(err)
		}
	}
	return out, closeAll, nil
}

// accountOf names the account a provider's rate limits count on: its API,
// base URL and a digest of its key (never the key itself).
func accountOf(api, baseURL, key string) string {
	sum := sha256.Sum256([]byte(key))
	return api + " " + baseURL + " " + hex.EncodeToString(sum[:6])
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
