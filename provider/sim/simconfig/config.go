package simconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultTokens is the output length when neither the request nor the
// Config says otherwise.
const DefaultTokens = 64

// Config is how the simulator (package provider/sim) generates and fails.
// The zero value streams DefaultTokens tokens as fast as possible with no
// faults.
//
// Its YAML form (LoadConfig, DecodeConfig) has the keys seed, tokens,
// tokens_per_second, silence, burst_tokens, keepalive, continuation,
// continuation_echo, limits (requests_per_minute, tokens_per_minute,
// window) and faults (a list of Fault); durations are Go duration strings
// ("2s", "150ms").
type Config struct {
	Seed            int64
	Tokens          int           // output tokens when the request gives no max (default 64)
	TokensPerSecond float64       // pace; 0 = as fast as possible
	Silence         time.Duration // reasoning silence before the first output token
	BurstTokens     int           // if >0, after each burst of this many tokens, silence again for Silence
	Keepalive       time.Duration // if >0, send ": keepalive" SSE comments after this long without writing
	// Continuation lists the forms of continuing a partial chat answer the
	// server accepts (FormPrefix, FormContinueFinal, FormAssistantLast);
	// nil accepts all, ["none"] none.
	Continuation []string
	// ContinuationEcho: a continued answer repeats the prefix before the
	// continuation, as some servers do.
	ContinuationEcho bool
	// Limits, when set, makes the simulator answer like a rate-limited
	// account (see Limits, and `go doc ./provider/sim` for the contract).
	Limits *Limits
	Faults []Fault
	// Logger is where the server logs; nil = discard. It is not part of
	// the YAML form.
	Logger *slog.Logger
}

// ConfigError is a config problem at a line of the YAML source.
type ConfigError struct {
	File string // "" when decoded from a node
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// LoadConfig reads a simulator config from a YAML file (the file of
// `noderun sim serve --faults FILE`). It is strict: an unknown field, a
// duplicate key or a bad value is an error naming file:line.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("sim config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if ce, ok := errors.AsType[*ConfigError](err); ok {
		ce.File = path
		return Config{}, ce
	}
	return cfg, err
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseConfig is LoadConfig on bytes.
func ParseConfig(data []byte) (Config, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, nil
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return Config{}, &ConfigError{Line: line, Msg: m[2]}
		}
		return Config{}, fmt.Errorf("sim config: %w", err)
	}
	return DecodeConfig(&doc)
}

// DecodeConfig decodes a config from a YAML node, e.g. the `sim:` block of a
// graph file. Errors are *ConfigError with the node's line. A nil node is the
// zero Config.
func DecodeConfig(n *yaml.Node) (Config, error) {
	var cfg Config
	if n == nil {
		return cfg, nil
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return cfg, nil
		}
		n = n.Content[0]
	}
	if isNull(n) {
		return cfg, nil
	}
	err := eachField(n, "sim config", func(key string, v *yaml.Node) error {
		switch key {
		case "seed":
			return scalar(v, key, &cfg.Seed)
		case "tokens":
			return nonNegative(v, key, &cfg.Tokens)
		case "tokens_per_second":
			if err := scalar(v, key, &cfg.TokensPerSecond); err != nil {
				return err
			}
			if cfg.TokensPerSecond < 0 || cfg.TokensPerSecond != cfg.TokensPerSecond {
				return errAt(v, "%s must be >= 0", key)
			}
			return nil
		case "silence":
			return duration(v, key, &cfg.Silence)
		case "burst_tokens":
			return nonNegative(v, key, &cfg.BurstTokens)
		case "keepalive":
			return duration(v, key, &cfg.Keepalive)
		case "continuation":
			if v.Kind != yaml.SequenceNode {
				return errAt(v, "continuation must be a list of forms (prefix, continue_final_message, assistant_last) or [none]")
			}
			cfg.Continuation = []string{}
			for _, fn := range v.Content {
				var f string
				if err := scalar(fn, key, &f); err != nil {
					return err
				}
				if f != formNone && !slices.Contains(forms, f) {
					return errAt(fn, "unknown continuation form %q (want prefix, continue_final_message, assistant_last or none)", f)
				}
				cfg.Continuation = append(cfg.Continuation, f)
			}
			return nil
		case "continuation_echo":
			return scalar(v, key, &cfg.ContinuationEcho)
		case "limits":
			if isNull(v) {
				return nil
			}
			l, err := decodeLimits(v)
			cfg.Limits = &l
			return err
		case "faults":
			if isNull(v) {
				return nil
			}
			if v.Kind != yaml.SequenceNode {
				return errAt(v, "faults must be a list")
			}
			for _, fn := range v.Content {
				f, err := decodeFault(fn)
				if err != nil {
					return err
				}
				cfg.Faults = append(cfg.Faults, f)
			}
			return nil
		}
		return errAt(v, "unknown field %q (want seed, tokens, tokens_per_second, silence, burst_tokens, keepalive, continuation, continuation_echo, limits, faults)", key)
	})
	return cfg, err
}

func decodeLimits(n *yaml.Node) (Limits, error) {
	var l Limits
	err := eachField(n, "limits", func(key string, v *yaml.Node) error {
		switch key {
		case "requests_per_minute":
			return nonNegative(v, key, &l.RequestsPerWindow)
		case "tokens_per_minute":
			return nonNegative(v, key, &l.TokensPerWindow)
		case "window":
			return duration(v, key, &l.Window)
		}
		return errAt(v, "unknown limits field %q (want requests_per_minute, tokens_per_minute, window)", key)
	})
	if err != nil {
		return l, err
	}
	if err := l.Validate(); err != nil {
		return l, errAt(n, "%v", err)
	}
	return l, nil
}

// DecodeFault decodes one fault from a YAML mapping, with the schema of a
// config file's faults list (e.g. a fault in a `noderun chaos` matrix file).
// Errors are *ConfigError with the line.
func DecodeFault(n *yaml.Node) (Fault, error) { return decodeFault(n) }

func decodeFault(n *yaml.Node) (Fault, error) {
	var f Fault
	err := eachField(n, "fault", func(key string, v *yaml.Node) error {
		switch key {
		case "endpoint":
			return scalar(v, key, &f.Endpoint)
		case "node":
			return scalar(v, key, &f.Node)
		case "requests":
			if v.Kind == yaml.ScalarNode {
				var r int
				if err := scalar(v, key, &r); err != nil {
					return err
				}
				f.Requests = []int{r}
				return nil
			}
			if v.Kind != yaml.SequenceNode {
				return errAt(v, "requests must be a list of request numbers")
			}
			for _, rn := range v.Content {
				var r int
				if err := scalar(rn, key, &r); err != nil {
					return err
				}
				f.Requests = append(f.Requests, r)
			}
			return nil
		case "response_id":
			return scalar(v, key, &f.ResponseID)
		case "times":
			return nonNegative(v, key, &f.Times)
		case "kind":
			var k string
			err := scalar(v, key, &k)
			f.Kind = FaultKind(k)
			return err
		case "after_events":
			return nonNegative(v, key, &f.AfterEvents)
		case "duration":
			return duration(v, key, &f.Duration)
		case "status":
			return scalar(v, key, &f.Status)
		case "retry_after":
			return scalar(v, key, &f.RetryAfter)
		}
		return errAt(v, "unknown fault field %q (want endpoint, node, requests, response_id, times, kind, after_events, duration, status, retry_after)", key)
	})
	if err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, errAt(n, "%v", err)
	}
	return f, nil
}

// eachField calls fn for every key of mapping n, rejecting duplicates.
func eachField(n *yaml.Node, what string, fn func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return errAt(n, "%s must be a mapping", what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return errAt(k, "%s keys must be strings", what)
		}
		if seen[k.Value] {
			return errAt(k, "duplicate field %q", k.Value)
		}
		seen[k.Value] = true
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func scalar[T any](n *yaml.Node, key string, out *T) error {
	if n.Kind != yaml.ScalarNode {
		return errAt(n, "%s must be a single value", key)
	}
	if err := n.Decode(out); err != nil {
		return errAt(n, "%s: cannot read %q as %T", key, n.Value, *out)
	}
	return nil
}

func nonNegative(n *yaml.Node, key string, out *int) error {
	if err := scalar(n, key, out); err != nil {
		return err
	}
	if *out < 0 {
		return errAt(n, "%s must be >= 0", key)
	}
	return nil
}

func duration(n *yaml.Node, key string, out *time.Duration) error {
	var s string
	if err := scalar(n, key, &s); err != nil {
		return err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errAt(n, "%s: want a duration like \"1.5s\", got %q", key, s)
	}
	*out = d
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func errAt(n *yaml.Node, format string, args ...any) error {
	return &ConfigError{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// MarshalYAML writes c in its YAML form (the `sim:` block of a graph file,
// the file of LoadConfig), leaving out zero fields and the Logger:
// DecodeConfig of the result gives back c. It is how a Config set in code
// becomes part of a graph's source (graph.Build).
func (c Config) MarshalYAML() (any, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	kv := func(k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	if c.Seed != 0 {
		kv("seed", yInt(c.Seed))
	}
	if c.Tokens != 0 {
		kv("tokens", yInt(int64(c.Tokens)))
	}
	if c.TokensPerSecond != 0 {
		kv("tokens_per_second", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(c.TokensPerSecond, 'g', -1, 64)})
	}
	if c.Silence != 0 {
		kv("silence", yStr(c.Silence.String()))
	}
	if c.BurstTokens != 0 {
		kv("burst_tokens", yInt(int64(c.BurstTokens)))
	}
	if c.Keepalive != 0 {
		kv("keepalive", yStr(c.Keepalive.String()))
	}
	if c.Continuation != nil { // empty is not nil: see Config.Continuation
		l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, f := range c.Continuation {
			l.Content = append(l.Content, yStr(f))
		}
		kv("continuation", l)
	}
	if c.ContinuationEcho {
		kv("continuation_echo", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	if c.Limits != nil {
		l := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range []struct {
			k string
			v int64
		}{{"requests_per_minute", int64(c.Limits.RequestsPerWindow)}, {"tokens_per_minute", int64(c.Limits.TokensPerWindow)}} {
			if f.v != 0 {
				l.Content = append(l.Content, yStr(f.k), yInt(f.v))
			}
		}
		if c.Limits.Window != 0 {
			l.Content = append(l.Content, yStr("window"), yStr(c.Limits.Window.String()))
		}
		kv("limits", l)
	}
	if len(c.Faults) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, f := range c.Faults {
			l.Content = append(l.Content, faultNode(f))
		}
		kv("faults", l)
	}
	return m, nil
}

// faultNode is f in the YAML form decodeFault reads.
func faultNode(f Fault) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	str := func(k, v string) {
		if v != "" {
			m.Content = append(m.Content, yStr(k), yStr(v))
		}
	}
	num := func(k string, v int) {
		if v != 0 {
			m.Content = append(m.Content, yStr(k), yInt(int64(v)))
		}
	}
	str("kind", string(f.Kind))
	str("endpoint", f.Endpoint)
	str("node", f.Node)
	if len(f.Requests) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, r := range f.Requests {
			l.Content = append(l.Content, yInt(int64(r)))
		}
		m.Content = append(m.Content, yStr("requests"), l)
	}
	str("response_id", f.ResponseID)
	num("times", f.Times)
	num("after_events", f.AfterEvents)
	if f.Duration != 0 {
		str("duration", f.Duration.String())
	}
	num("status", f.Status)
	str("retry_after", f.RetryAfter)
	return m
}

func yStr(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func yInt(v int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}
}
