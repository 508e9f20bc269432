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

	"github.com/noderun/noderun/internal/yamlnode"
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
// it has them; its errors are LoadPrices'. Every problem of the file is
// reported, one a line, each naming the file and its line.
func LoadPriceTable(path string) (PriceTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return PriceTable{}, err
	}
	out, err := ParsePriceTable(b)
	if l, ok := errors.AsType[*lineErrors](err); ok {
		for _, e := range l.list {
			e.file = path
		}
		return PriceTable{}, l
	}
	if err != nil {
		return PriceTable{}, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Sentinels of a price table's problems, for errors.Is.
var (
	// ErrPriceUnknownField: a field a price or a source does not have, or
	// a model or metadata key given twice.
	ErrPriceUnknownField = errors.New("unknown price table field")
	// ErrPriceInvalid: a value of the wrong form or range.
	ErrPriceInvalid = errors.New("invalid price table value")
)

// lineError is a problem at a line of a price table.
type lineError struct {
	file string // "" until LoadPriceTable names it
	line int
	msg  string
	err  error // ErrPriceUnknownField or ErrPriceInvalid
}

func (e *lineError) Error() string {
	if e.file != "" {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

func (e *lineError) Unwrap() error { return e.err }

// lineErrors are every problem of a price table, in line order, one a line.
type lineErrors struct{ list []*lineError }

func (l *lineErrors) Error() string   { return yamlnode.Lines(l.list) }
func (l *lineErrors) Unwrap() []error { return yamlnode.Errors(l.list) }

// priceParser collects a table's problems, so that a file is reported
// whole rather than one problem per try.
type priceParser struct{ errs []*lineError }

func (p *priceParser) at(n *yaml.Node, cause error, format string, args ...any) {
	p.errs = append(p.errs, &lineError{line: n.Line, msg: fmt.Sprintf(format, args...), err: cause})
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
// Every problem is reported (one a line, in line order).
func ParsePriceTable(b []byte) (PriceTable, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return PriceTable{}, &lineErrors{[]*lineError{{line: line, msg: "not YAML: " + m[2], err: ErrPriceInvalid}}}
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
	p := &priceParser{}
	if root.Kind != yaml.MappingNode {
		p.at(root, ErrPriceInvalid, "a price table is a mapping of model to prices, not %s (%s)", yamlnode.Got(root), pricesWant)
		return PriceTable{}, &lineErrors{p.errs}
	}
	t := PriceTable{}
	out := Prices{}
	meta := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], yamlnode.Resolve(root.Content[i+1])
		model := key.Value
		if key.Kind != yaml.ScalarNode {
			p.at(key, ErrPriceInvalid, "a model is a name, not %s (%s)", yamlnode.Got(key), pricesWant)
			continue
		}
		if model == keyAsOf || model == keySources {
			if meta[model] {
				p.at(key, ErrPriceUnknownField, "%s is given twice", model)
				continue
			}
			meta[model] = true
			if model == keyAsOf {
				t.AsOf = p.asOf(val)
			} else {
				t.Sources = p.sources(val)
			}
			continue
		}
		if _, dup := out[model]; dup {
			p.at(key, ErrPriceUnknownField, "model %q is given twice", model)
			continue
		}
		if val.Kind != yaml.MappingNode {
			p.at(val, ErrPriceInvalid, "%s: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not %s", model, yamlnode.Got(val))
			continue
		}
		out[model] = p.price(model, val)
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *lineError) int { return a.line - b.line })
		return PriceTable{}, &lineErrors{p.errs}
	}
	if len(out) == 0 {
		return PriceTable{}, fmt.Errorf("no prices (%s)", pricesWant)
	}
	t.Prices = out
	return t, nil
}

// price reads one model's prices.
func (p *priceParser) price(model string, val *yaml.Node) Price {
	var pr Price
	for k := 0; k+1 < len(val.Content); k += 2 {
		field, v := val.Content[k], yamlnode.Resolve(val.Content[k+1])
		var dst *float64
		switch field.Value {
		case "input":
			dst = &pr.Input
		case "output":
			dst = &pr.Output
		case "reasoning":
			dst = &pr.Reasoning
		case "cache_read":
			pr.CacheRead = new(float64)
			dst = pr.CacheRead
		case "cache_write":
			pr.CacheWrite = new(float64)
			dst = pr.CacheWrite
		default:
			p.at(field, ErrPriceUnknownField, "%s: unknown field %q (known: input, output, reasoning, cache_read, cache_write)", model, field.Value)
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Decode(dst) != nil {
			p.at(v, ErrPriceInvalid, "%s: %s: %s is not a number of USD per 1M tokens", model, field.Value, yamlnode.Got(v))
			continue
		}
		if !(*dst >= 0) || math.IsInf(*dst, 0) {
			p.at(v, ErrPriceInvalid, "%s: %s: %s: prices must be finite and not negative", model, field.Value, v.Value)
		}
	}
	return pr
}

// asOf reads as_of: a day, as a date without a time, since a table is
// read from pages on a day and nothing finer is known.
func (p *priceParser) asOf(v *yaml.Node) time.Time {
	if v.Kind == yaml.ScalarNode {
		if d, err := time.Parse(time.DateOnly, v.Value); err == nil {
			return d
		}
	}
	p.at(v, ErrPriceInvalid, "%s: %s is not a date (want YYYY-MM-DD: the day the prices were read)", keyAsOf, yamlnode.Got(v))
	return time.Time{}
}

const sourcesWant = "want a list of {vendor: NAME, url: https://...}"

// sources reads sources: the pages the figures were read from, each with
// the vendor it prices and a web address a reader can open.
func (p *priceParser) sources(v *yaml.Node) []PriceSource {
	if v.Kind != yaml.SequenceNode {
		p.at(v, ErrPriceInvalid, "%s: %s, not %s", keySources, sourcesWant, yamlnode.Got(v))
		return nil
	}
	out := []PriceSource{}
	for _, item := range v.Content {
		item = yamlnode.Resolve(item)
		if item.Kind != yaml.MappingNode {
			p.at(item, ErrPriceInvalid, "%s: %s, not %s", keySources, sourcesWant, yamlnode.Got(item))
			continue
		}
		var s PriceSource
		ok := true
		for k := 0; k+1 < len(item.Content); k += 2 {
			field, fv := item.Content[k], yamlnode.Resolve(item.Content[k+1])
			var dst *string
			switch field.Value {
			case "vendor":
				dst = &s.Vendor
			case "url":
				dst = &s.URL
			default:
				p.at(field, ErrPriceUnknownField, "%s: unknown field %q (known: vendor, url)", keySources, field.Value)
				ok = false
				continue
			}
			if fv.Kind != yaml.ScalarNode {
				p.at(fv, ErrPriceInvalid, "%s: %s: want text, not %s", keySources, field.Value, yamlnode.Got(fv))
				ok = false
				continue
			}
			*dst = fv.Value
		}
		if !ok {
			continue
		}
		if s.Vendor == "" || s.URL == "" {
			p.at(item, ErrPriceInvalid, "%s: a source needs a vendor and a url (%s)", keySources, sourcesWant)
			continue
		}
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.at(item, ErrPriceInvalid, "%s: %q is not a web address (want https://...)", keySources, s.URL)
			continue
		}
		out = append(out, s)
	}
	return out
}
