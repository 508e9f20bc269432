package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noderun/noderun/journal"
	"go.yaml.in/yaml/v3"
)

// Price is what a model costs, in USD per 1M tokens.
type Price struct {
	Input     float64 `yaml:"input" json:"input"`
	Output    float64 `yaml:"output" json:"output"`
	Reasoning float64 `yaml:"reasoning" json:"reasoning"`
	// CacheRead and CacheWrite price the input tokens a provider counts
	// apart as read from or written to its prompt cache (Anthropic: a
	// tenth of input, and 1.25 times it). Not given, they cost as input:
	// an estimate never below the bill's.
	CacheRead  *float64 `yaml:"cache_read" json:"cache_read,omitempty"`
	CacheWrite *float64 `yaml:"cache_write" json:"cache_write,omitempty"`
}

// clone is p with cache prices of its own, so that a table handed out can
// be changed without changing the one it was copied from.
func (p Price) clone() Price {
	if p.CacheRead != nil {
		p.CacheRead = new(*p.CacheRead)
	}
	if p.CacheWrite != nil {
		p.CacheWrite = new(*p.CacheWrite)
	}
	return p
}

// Prices maps a model, as the node's requests named it ("sim" on the
// simulator), to its price.
type Prices map[string]Price

// datedSnapshot is the date a pinned snapshot's name ends with: OpenAI's
// "gpt-4o-2024-08-06", Anthropic's "claude-sonnet-4-5-20250929".
var datedSnapshot = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// Lookup is the price of model as a request named it. A table names a
// model once, by its base name, while requests name it in the forms the
// vendors accept: a dated snapshot ("claude-sonnet-4-5-20250929",
// "gpt-4o-2024-08-06"), Gemini's resource name ("models/gemini-2.5-pro"), a
// "-latest" alias ("claude-3-5-haiku-latest"). So the exact name is tried
// first (a snapshot priced apart keeps its own price: gpt-4o-2024-05-13
// costs more than gpt-4o), then the name without that prefix and those
// suffixes. Nothing looser: a model never takes the price of another whose
// name it starts with ("gpt-4o-mini" is not "gpt-4o", "o3-pro" is not "o3"),
// since an unpriced model is warned of, and a wrong price is not.
func (p Prices) Lookup(model string) (Price, bool) {
	if price, ok := p[model]; ok {
		return price, true
	}
	base := strings.TrimPrefix(model, "models/")
	base = strings.TrimSuffix(base, "-latest")
	base = datedSnapshot.ReplaceAllString(base, "")
	if base == model || base == "" {
		return Price{}, false
	}
	price, ok := p[base]
	return price, ok
}

// Over is p laid over base, model by model: every price of base, except
// where p prices the same model name, whose price in p wins. It is how a
// graph's or a --prices file's table overrides the built-in one:
// table.Over(BuiltinPrices().Prices). Names are compared exactly, before
// Lookup's stripping: a table's gpt-4o does not replace base's
// gpt-4o-2024-05-13, which prices a request naming that snapshot. Neither
// table is changed; nil when both are empty, so that "no prices at all"
// stays "no cost" (AccountOf) rather than "every model unpriced".
func (p Prices) Over(base Prices) Prices {
	if len(p) == 0 && len(base) == 0 {
		return nil
	}
	out := make(Prices, len(base)+len(p))
	for _, t := range []Prices{base, p} {
		for m, price := range t {
			out[m] = price.clone()
		}
	}
	return out
}

// PriceTable is a price table with the date its figures were read and the
// pages they were read from: what lets a reader judge how far to trust an
// estimate made with it (prices change; a table does not follow them).
type PriceTable struct {
	Prices Prices
	// AsOf is the day the figures were read from Sources (zero when the
	// file does not say): not the day they were last true.
	AsOf    time.Time
	Sources []PriceSource
}

// PriceSource is a page a price table's figures were read from.
type PriceSource struct {
	Vendor string `yaml:"vendor" json:"vendor"`
	URL    string `yaml:"url" json:"url"`
}

// clone is t with maps and slices of its own.
func (t PriceTable) clone() PriceTable {
	t.Prices = Prices(nil).Over(t.Prices)
	t.Sources = slices.Clone(t.Sources)
	return t
}

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
	t, err := LoadPriceTable(path)
	return t.Prices, err
}

// LoadPriceTable reads a price table file with its as_of and sources, if
// it has them; its errors are LoadPrices'.
func LoadPriceTable(path string) (PriceTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return PriceTable{}, err
	}
	out, err := ParsePriceTable(b)
	var le *lineError
	switch {
	case errors.As(err, &le):
		return PriceTable{}, fmt.Errorf("%s:%d: %s", path, le.line, le.msg)
	case err != nil:
		return PriceTable{}, fmt.Errorf("%s: %w", path, err)
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
// The table's as_of and sources, if it has them, are checked and left out
// (ParsePriceTable keeps them).
func ParsePrices(b []byte) (Prices, error) {
	t, err := ParsePriceTable(b)
	return t.Prices, err
}

// Metadata keys a price table may have beside its models. Every other key
// is a model, whose value must be its prices: a misspelled "asof: ..." is
// an error, not a model nobody uses.
const (
	keyAsOf    = "as_of"
	keySources = "sources"
)

// ParsePriceTable parses a price table as ParsePrices does, with its
// metadata, both optional: "as_of: YYYY-MM-DD", the day the figures were
// read, and "sources: [{vendor: NAME, url: URL}]", where they were read.
func ParsePriceTable(b []byte) (PriceTable, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return PriceTable{}, &lineError{line, "not YAML: " + m[2]}
		}
		return PriceTable{}, fmt.Errorf("not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind == 0 || (root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
		return PriceTable{}, fmt.Errorf("no prices (%s)", pricesWant)
	}
	if root.Kind != yaml.MappingNode {
		return PriceTable{}, atLine(root, "a price table is a mapping of model to prices, not %s (%s)", yamlKind(root), pricesWant)
	}
	t := PriceTable{}
	out := Prices{}
	meta := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], resolve(root.Content[i+1])
		model := key.Value
		if key.Kind != yaml.ScalarNode {
			return PriceTable{}, atLine(key, "a model is a name, not %s (%s)", yamlKind(key), pricesWant)
		}
		if model == keyAsOf || model == keySources {
			if meta[model] {
				return PriceTable{}, atLine(key, "%s is given twice", model)
			}
			meta[model] = true
			var err error
			if model == keyAsOf {
				t.AsOf, err = parseAsOf(val)
			} else {
				t.Sources, err = parseSources(val)
			}
			if err != nil {
				return PriceTable{}, err
			}
			continue
		}
		if _, dup := out[model]; dup {
			return PriceTable{}, atLine(key, "model %q is given twice", model)
		}
		if val.Kind != yaml.MappingNode {
			return PriceTable{}, atLine(val, "%s: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not %s", model, yamlKind(val))
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
				return PriceTable{}, atLine(field, "%s: unknown field %q (known: input, output, reasoning, cache_read, cache_write)", model, field.Value)
			}
			if v.Kind != yaml.ScalarNode || v.Decode(dst) != nil {
				return PriceTable{}, atLine(v, "%s: %s: %s is not a number of USD per 1M tokens", model, field.Value, yamlValue(v))
			}
			if !(*dst >= 0) || math.IsInf(*dst, 0) {
				return PriceTable{}, atLine(v, "%s: %s: %s: prices must be finite and not negative", model, field.Value, v.Value)
			}
		}
		out[model] = p
	}
	if len(out) == 0 {
		return PriceTable{}, fmt.Errorf("no prices (%s)", pricesWant)
	}
	t.Prices = out
	return t, nil
}

// parseAsOf reads as_of: a day, as a date without a time, since a table is
// read from pages on a day and nothing finer is known.
func parseAsOf(v *yaml.Node) (time.Time, error) {
	if v.Kind == yaml.ScalarNode {
		if d, err := time.Parse(time.DateOnly, v.Value); err == nil {
			return d, nil
		}
	}
	return time.Time{}, atLine(v, "%s: %s is not a date (want YYYY-MM-DD: the day the prices were read)", keyAsOf, yamlValue(v))
}

const sourcesWant = "want a list of {vendor: NAME, url: https://...}"

// parseSources reads sources: the pages the figures were read from, each
// with the vendor it prices and a web address a reader can open.
func parseSources(v *yaml.Node) ([]PriceSource, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, atLine(v, "%s: %s, not %s", keySources, sourcesWant, yamlKind(v))
	}
	out := []PriceSource{}
	for _, item := range v.Content {
		item = resolve(item)
		if item.Kind != yaml.MappingNode {
			return nil, atLine(item, "%s: %s, not %s", keySources, sourcesWant, yamlKind(item))
		}
		var s PriceSource
		for k := 0; k+1 < len(item.Content); k += 2 {
			field, fv := item.Content[k], resolve(item.Content[k+1])
			var dst *string
			switch field.Value {
			case "vendor":
				dst = &s.Vendor
			case "url":
				dst = &s.URL
			default:
				return nil, atLine(field, "%s: unknown field %q (known: vendor, url)", keySources, field.Value)
			}
			if fv.Kind != yaml.ScalarNode {
				return nil, atLine(fv, "%s: %s: want text, not %s", keySources, field.Value, yamlKind(fv))
			}
			*dst = fv.Value
		}
		if s.Vendor == "" || s.URL == "" {
			return nil, atLine(item, "%s: a source needs a vendor and a url (%s)", keySources, sourcesWant)
		}
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, atLine(item, "%s: %q is not a web address (want https://...)", keySources, s.URL)
		}
		out = append(out, s)
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
