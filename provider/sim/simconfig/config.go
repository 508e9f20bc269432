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
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/internal/yamlnode"
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

// Sentinels of a config's problems, for errors.Is through a ConfigError.
var (
	// ErrUnknownField: a key the config (or a fault, or limits) does not
	// have, or one given twice.
	ErrUnknownField = errors.New("unknown field")
	// ErrInvalidValue: a value of the wrong type or out of its range.
	ErrInvalidValue = errors.New("invalid value")
)

// ConfigError is a config problem at a line of the YAML source.
type ConfigError struct {
	File string // "" when decoded from a node
	Line int
	// Field is the key the problem is about, as the YAML names it
	// ("tokens", "kind"); "" for the config as a whole.
	Field string
	Msg   string
	// Err is the problem's sentinel (ErrUnknownField, ErrInvalidValue), or
	// nil for a YAML syntax error.
	Err error
}

func (e *ConfigError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Unwrap is the problem's sentinel.
func (e *ConfigError) Unwrap() error { return e.Err }

// ConfigErrors are every problem of one config, in the order of their
// lines: a file is reported whole, not stopped at its first problem. Its
// Error prints one problem a line; errors.As finds the first *ConfigError,
// errors.Is each sentinel.
type ConfigErrors struct {
	Problems []*ConfigError
}

func (l *ConfigErrors) Error() string { return yamlnode.Lines(l.Problems) }

// Unwrap lists the problems.
func (l *ConfigErrors) Unwrap() []error { return yamlnode.Errors(l.Problems) }

// LoadConfig reads a simulator config from a YAML file (the file of
// `noderun sim serve --faults FILE`). It is strict: an unknown field, a
// duplicate key or a bad value is an error naming file:line, and every
// problem of the file is reported (*ConfigErrors).
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("sim config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if l, ok := errors.AsType[*ConfigErrors](err); ok {
		for _, e := range l.Problems {
			e.File = path
		}
		return Config{}, l
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
			return Config{}, &ConfigErrors{[]*ConfigError{{Line: line, Msg: m[2]}}}
		}
		return Config{}, fmt.Errorf("sim config: %w", err)
	}
	return DecodeConfig(&doc)
}

// The keys of the YAML form, in the order the docs list them.
var (
	configFields = []string{"seed", "tokens", "tokens_per_second", "silence", "burst_tokens", "keepalive",
		"continuation", "continuation_echo", "limits", "faults"}
	limitsFields = []string{"requests_per_minute", "tokens_per_minute", "window"}
	faultFields  = []string{"endpoint", "node", "requests", "response_id", "times", "kind", "after_events",
		"duration", "status", "retry_after"}
)

// ConfigFields are the keys of a config (the `sim:` block), LimitsFields
// those of its limits and FaultFields those of one fault: what the decoder
// accepts, for documentation made from the same lists.
func ConfigFields() []string { return slices.Clone(configFields) }

// LimitsFields: see ConfigFields.
func LimitsFields() []string { return slices.Clone(limitsFields) }

// FaultFields: see ConfigFields.
func FaultFields() []string { return slices.Clone(faultFields) }

// DecodeConfig decodes a config from a YAML node, e.g. the `sim:` block of a
// graph file. Its error is *ConfigErrors, every problem with its line. A nil
// node is the zero Config.
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
	if yamlnode.IsNull(n) {
		return cfg, nil
	}
	d := &decoder{}
	d.fields(n, "sim config", configFields, func(key string, v *yaml.Node) {
		switch key {
		case "seed":
			scalar(d, v, key, "a whole number", &cfg.Seed)
		case "tokens":
			d.nonNegative(v, key, &cfg.Tokens)
		case "tokens_per_second":
			if scalar(d, v, key, "a number >= 0", &cfg.TokensPerSecond) && (cfg.TokensPerSecond < 0 || cfg.TokensPerSecond != cfg.TokensPerSecond) {
				d.bad(v, key, "%s: want a number >= 0, got %s", key, v.Value)
			}
		case "silence":
			d.duration(v, key, false, &cfg.Silence)
		case "burst_tokens":
			d.nonNegative(v, key, &cfg.BurstTokens)
		case "keepalive":
			d.duration(v, key, false, &cfg.Keepalive)
		case "continuation":
			if v.Kind != yaml.SequenceNode {
				d.bad(v, key, "continuation: want a list of forms (prefix, continue_final_message, assistant_last) or [none], got %s", yamlnode.Got(v))
				return
			}
			cfg.Continuation = []string{}
			for _, fn := range v.Content {
				var f string
				if !scalar(d, fn, key, "a form", &f) {
					continue
				}
				if f != formNone && !slices.Contains(forms, f) {
					d.bad(fn, key, "continuation: want prefix, continue_final_message, assistant_last or none, got %q", f)
					continue
				}
				cfg.Continuation = append(cfg.Continuation, f)
			}
		case "continuation_echo":
			scalar(d, v, key, "true or false", &cfg.ContinuationEcho)
		case "limits":
			if !yamlnode.IsNull(v) {
				l := d.limits(v)
				cfg.Limits = &l
			}
		case "faults":
			if yamlnode.IsNull(v) {
				return
			}
			if v.Kind != yaml.SequenceNode {
				d.bad(v, key, "faults: want a list of faults, got %s", yamlnode.Got(v))
				return
			}
			for _, fn := range v.Content {
				if f, ok := d.fault(fn); ok {
					cfg.Faults = append(cfg.Faults, f)
				}
			}
		}
	})
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, func(a, b *ConfigError) int { return a.Line - b.Line })
		return cfg, &ConfigErrors{d.errs}
	}
	return cfg, nil
}

// decoder collects every problem of a config, so that a file is reported
// whole rather than one problem per try.
type decoder struct {
	errs []*ConfigError
}

// bad records a problem with a value (ErrInvalidValue).
func (d *decoder) bad(n *yaml.Node, field, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidValue})
}

func (d *decoder) limits(n *yaml.Node) Limits {
	var l Limits
	before := len(d.errs)
	d.fields(n, "limits", limitsFields, func(key string, v *yaml.Node) {
		switch key {
		case "requests_per_minute":
			d.nonNegative(v, key, &l.RequestsPerWindow)
		case "tokens_per_minute":
			d.nonNegative(v, key, &l.TokensPerWindow)
		case "window":
			d.duration(v, key, true, &l.Window)
		}
	})
	if len(d.errs) == before {
		if err := l.Validate(); err != nil {
			d.bad(n, "limits", "%v", err)
		}
	}
	return l
}

// DecodeFault decodes one fault from a YAML mapping, with the schema of a
// config file's faults list (e.g. a fault in a `noderun chaos` matrix file).
// Its error is *ConfigErrors, every problem with its line.
func DecodeFault(n *yaml.Node) (Fault, error) {
	d := &decoder{}
	f, _ := d.fault(n)
	if len(d.errs) > 0 {
		return f, &ConfigErrors{d.errs}
	}
	return f, nil
}

// fault decodes one fault; ok is false when it has a problem (recorded).
func (d *decoder) fault(n *yaml.Node) (f Fault, ok bool) {
	before := len(d.errs)
	lines := map[string]*yaml.Node{} // each field's value, for where its problems are
	d.fields(n, "fault", faultFields, func(key string, v *yaml.Node) {
		lines[key] = v
		switch key {
		case "endpoint":
			scalar(d, v, key, "an endpoint name", &f.Endpoint)
		case "node":
			scalar(d, v, key, "a node id", &f.Node)
		case "requests":
			if v.Kind == yaml.ScalarNode {
				var r int
				if scalar(d, v, key, "a list of request numbers", &r) {
					f.Requests = []int{r}
				}
				return
			}
			if v.Kind != yaml.SequenceNode {
				d.bad(v, key, "requests: want a list of request numbers, got %s", yamlnode.Got(v))
				return
			}
			for _, rn := range v.Content {
				var r int
				if scalar(d, rn, key, "a request number", &r) {
					f.Requests = append(f.Requests, r)
				}
			}
		case "response_id":
			scalar(d, v, key, "a response id", &f.ResponseID)
		case "times":
			d.nonNegative(v, key, &f.Times)
		case "kind":
			var k string
			scalar(d, v, key, "a fault kind", &k)
			f.Kind = FaultKind(k)
		case "after_events":
			d.nonNegative(v, key, &f.AfterEvents)
		case "duration":
			d.duration(v, key, true, &f.Duration)
		case "status":
			scalar(d, v, key, "an HTTP status (400-599)", &f.Status)
		case "retry_after":
			scalar(d, v, key, "seconds or an HTTP date", &f.RetryAfter)
		}
	})
	failed := map[string]bool{} // fields already reported: not again
	for _, e := range d.errs[before:] {
		failed[e.Field] = true
	}
	for _, p := range f.problems() {
		if failed[p.field] {
			continue
		}
		at := n
		if v, ok := lines[p.field]; ok {
			at = v
		}
		d.bad(at, p.field, "%s", p.msg)
	}
	return f, len(d.errs) == before
}

// fields calls fn for every key of mapping n that is one of known, and
// records unknown and duplicate keys.
func (d *decoder) fields(n *yaml.Node, what string, known []string, fn func(key string, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.bad(n, "", "%s: want a mapping, got %s", what, yamlnode.Got(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode:
			d.bad(k, "", "%s: keys must be names, got %s", what, yamlnode.Got(k))
		case seen[k.Value]:
			d.errs = append(d.errs, &ConfigError{Line: k.Line, Field: k.Value, Msg: fmt.Sprintf("duplicate field %q", k.Value), Err: ErrUnknownField})
		case !slices.Contains(known, k.Value):
			seen[k.Value] = true
			prefix := ""
			if what != "sim config" {
				prefix = what + " "
			}
			d.errs = append(d.errs, &ConfigError{Line: k.Line, Field: k.Value, Err: ErrUnknownField,
				Msg: fmt.Sprintf("unknown %sfield %q (want %s)", prefix, k.Value, strings.Join(known, ", "))})
		default:
			seen[k.Value] = true
			fn(k.Value, v)
		}
	}
}

// scalar decodes a single value into out, or records what was wanted and
// what the file has instead (want says it in the graph's words, never Go's
// type names).
func scalar[T any](d *decoder, n *yaml.Node, key, want string, out *T) bool {
	if n.Kind != yaml.ScalarNode {
		d.bad(n, key, "%s: want %s, got %s", key, want, yamlnode.Got(n))
		return false
	}
	if err := n.Decode(out); err != nil {
		d.bad(n, key, "%s: want %s, got %s", key, want, yamlnode.Got(n))
		return false
	}
	return true
}

func (d *decoder) nonNegative(n *yaml.Node, key string, out *int) {
	if scalar(d, n, key, "a whole number >= 0", out) && *out < 0 {
		d.bad(n, key, "%s: want a whole number >= 0, got %d", key, *out)
		*out = 0
	}
}

// duration reads a Go duration string >= 0; positive refuses 0 as well,
// for a field whose 0 means nothing (a 0 s window, a 0 s outage).
func (d *decoder) duration(n *yaml.Node, key string, positive bool, out *time.Duration) {
	var s string
	if !scalar(d, n, key, `a duration like "1.5s"`, &s) {
		return
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.bad(n, key, "%s: want a duration like \"1.5s\", got %q", key, s)
	case v < 0:
		d.bad(n, key, "%s: want a duration >= 0, got %s", key, s)
	case v == 0 && positive:
		d.bad(n, key, "%s: want a duration > 0 (omit it instead), got %s", key, s)
	default:
		*out = v
	}
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
