package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/noderun/noderun/journal"
	"go.yaml.in/yaml/v3"
)

// Price is what a model costs, in USD per 1M tokens.
type Price struct {
	Input     float64 `yaml:"input"`
	Output    float64 `yaml:"output"`
	Reasoning float64 `yaml:"reasoning"`
	// CacheRead and CacheWrite price the input tokens a provider counts
	// apart as read from or written to its prompt cache (Anthropic: a
	// tenth of input, and 1.25 times it). Not given, they cost as input:
	// an estimate never below the bill's.
	CacheRead  *float64 `yaml:"cache_read"`
	CacheWrite *float64 `yaml:"cache_write"`
}

// Prices maps a model, as the node's requests named it ("sim" on the
// simulator), to its price.
type Prices map[string]Price

func (p Price) cost(u journal.Usage, output int) float64 {
	read, write := p.Input, p.Input
	if p.CacheRead != nil {
		read = *p.CacheRead
	}
	if p.CacheWrite != nil {
		write = *p.CacheWrite
	}
	return (float64(u.InputTokens)*p.Input + float64(output)*p.Output + float64(u.ReasoningTokens)*p.Reasoning +
		float64(u.CacheReadTokens)*read + float64(u.CacheWriteTokens)*write) / 1e6
}

const pricesWant = "want: MODEL: {input: USD, output: USD, reasoning: USD} per 1M tokens (cache_read, cache_write optional)"

// LoadPrices reads a price table file. Its errors name the file and the
// line: "prices.yaml:3: gpt-5: output: "ten" is not a number (...)".
func LoadPrices(path string) (Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := ParsePrices(b)
	var le *lineError
	switch {
	case errors.As(err, &le):
		return nil, fmt.Errorf("%s:%d: %s", path, le.line, le.msg)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// lineError is a problem at a line of a price table.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

func atLine(n *yaml.Node, format string, args ...any) error {
	return &lineError{n.Line, fmt.Sprintf(format, args...)}
}

// yamlLine is the line of a YAML syntax error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParsePrices parses a price table (YAML; a user's file: untrusted input).
// An error names the line, the model and the field, in the file's words.
func ParsePrices(b []byte) (Prices, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &lineError{line, "not YAML: " + m[2]}
		}
		return nil, fmt.Errorf("not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind == 0 || (root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
		return nil, fmt.Errorf("no prices (%s)", pricesWant)
	}
	if root.Kind != yaml.MappingNode {
		return nil, atLine(root, "a price table is a mapping of model to prices, not %s (%s)", yamlKind(root), pricesWant)
	}
	out := Prices{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], resolve(root.Content[i+1])
		model := key.Value
		if key.Kind != yaml.ScalarNode {
			return nil, atLine(key, "a model is a name, not %s (%s)", yamlKind(key), pricesWant)
		}
		if _, dup := out[model]; dup {
			return nil, atLine(key, "model %q is given twice", model)
		}
		if val.Kind != yaml.MappingNode {
			return nil, atLine(val, "%s: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not %s", model, yamlKind(val))
		}
		var p Price
		for k := 0; k+1 < len(val.Content); k += 2 {
			field, v := val.Content[k], resolve(val.Content[k+1])
			var dst *float64
			switch field.Value {
			case "input":
				dst = &p.Input
			case "output":
				dst = &p.Output
			case "reasoning":
				dst = &p.Reasoning
			case "cache_read":
				p.CacheRead = new(float64)
				dst = p.CacheRead
			case "cache_write":
				p.CacheWrite = new(float64)
				dst = p.CacheWrite
			default:
				return nil, atLine(field, "%s: unknown field %q (known: input, output, reasoning, cache_read, cache_write)", model, field.Value)
			}
			if v.Kind != yaml.ScalarNode || v.Decode(dst) != nil {
				return nil, atLine(v, "%s: %s: %s is not a number of USD per 1M tokens", model, field.Value, yamlValue(v))
			}
			if !(*dst >= 0) || math.IsInf(*dst, 0) {
				return nil, atLine(v, "%s: %s: %s: prices must be finite and not negative", model, field.Value, v.Value)
			}
		}
		out[model] = p
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no prices (%s)", pricesWant)
	}
	return out, nil
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// yamlKind names a YAML node's kind as a person would.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return yamlValue(n)
}

// yamlValue quotes a scalar node's value, or names its kind.
func yamlValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return yamlKind(n)
}
