package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"go.yaml.in/yaml/v3"
)

// Price is what a model costs, in USD per 1M tokens.
type Price struct {
	Input     float64 `yaml:"input"`
	Output    float64 `yaml:"output"`
	Reasoning float64 `yaml:"reasoning"`
}

// Prices maps a model, as the node's requests named it ("sim" on the
// simulator), to its price.
type Prices map[string]Price

func (p Price) cost(input, output, reasoning int) float64 {
	return (float64(input)*p.Input + float64(output)*p.Output + float64(reasoning)*p.Reasoning) / 1e6
}

const pricesWant = "want: MODEL: {input: USD, output: USD, reasoning: USD} per 1M tokens"

// LoadPrices reads a price table file.
func LoadPrices(path string) (Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := ParsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParsePrices parses a price table (YAML; a user's file: untrusted input).
func ParsePrices(b []byte) (Prices, error) {
	var out Prices
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&out); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w (%s)", err, pricesWant)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no prices (%s)", pricesWant)
	}
	for m, p := range out {
		if !(p.Input >= 0 && p.Output >= 0 && p.Reasoning >= 0) || math.IsInf(p.Input+p.Output+p.Reasoning, 0) {
			return nil, fmt.Errorf("%s: prices must be finite and not negative", m)
		}
	}
	return out, nil
}
