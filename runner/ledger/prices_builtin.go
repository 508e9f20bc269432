package ledger

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// builtinPricesYAML is the table as shipped; a string, so that nothing can
// change it.
//
//go:embed builtin_prices.yaml
var builtinPricesYAML string

// builtinPrices parses the table once: it is the same for the life of the
// binary, and a run's report may price against it more than once.
var builtinPrices = sync.OnceValue(func() PriceTable {
	t, err := ParsePriceTable([]byte(builtinPricesYAML))
	if err != nil {
		// The file ships with the binary and a test parses it: only a
		// broken build gets here.
		panic("ledger: the built-in price table does not parse: " + err.Error())
	}
	return t
})

// BuiltinPrices is noderun's own table of the prices of common OpenAI,
// Anthropic and Google models, dated (AsOf) and with the pages its figures
// were read from (Sources): what prices a run when neither the graph nor
// the user gives a table, and what a given table overrides
// (given.Over(BuiltinPrices().Prices)). Each call returns a copy of its own,
// which the caller may change.
func BuiltinPrices() PriceTable {
	return builtinPrices().clone()
}

// PricesFor is the table run is priced by: given over the built-in one
// (given wins model by model); or, when nothing is given, the built-in one
// if it prices any of the run's models. A run only of models it does not
// know (the simulator's "sim") stays unpriced: no cost, rather than a
// warning per node and a total of nothing.
func PricesFor(run *Run, given Prices) Prices {
	builtin := BuiltinPrices().Prices
	if given != nil {
		return given.Over(builtin)
	}
	for _, nd := range run.Nodes {
		if _, ok := builtin.Lookup(nd.Model); ok {
			return builtin
		}
	}
	return nil
}

// WriteText writes t as a table, a model a line in name order, with its
// date and sources.
func (t PriceTable) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tINPUT\tOUTPUT\tREASONING\tCACHE READ\tCACHE WRITE")
	for _, m := range slices.Sorted(maps.Keys(t.Prices)) {
		p := t.Prices[m]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m, usd(&p.Input), usd(&p.Output), usd(&p.Reasoning), usd(p.CacheRead), usd(p.CacheWrite))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nUSD per 1M tokens; a price not given costs as input.")
	if !t.AsOf.IsZero() {
		fmt.Fprintf(w, " As of %s, from:", t.AsOf.Format(time.DateOnly))
	}
	fmt.Fprintln(w)
	for _, s := range t.Sources {
		if _, err := fmt.Fprintf(w, "  %s: %s\n", s.Vendor, s.URL); err != nil {
			return err
		}
	}
	return nil
}

// usd is a price per 1M tokens as a price list writes it: cents at least,
// more digits where it has them (0.125, 2.50, 15.00); "-" when not given.
func usd(p *float64) string {
	if p == nil {
		return "-"
	}
	s := strconv.FormatFloat(*p, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i < 0 {
		s += ".00"
	} else if len(s)-i == 2 {
		s += "0"
	}
	return s
}

// MarshalJSON gives the table as `noderun prices --json` prints it:
// {"as_of": "YYYY-MM-DD", "sources": [...], "prices": {MODEL: {...}}}.
func (t PriceTable) MarshalJSON() ([]byte, error) {
	var asOf *string
	if !t.AsOf.IsZero() {
		d := t.AsOf.Format(time.DateOnly)
		asOf = &d
	}
	return json.Marshal(struct {
		AsOf    *string       `json:"as_of"`
		Sources []PriceSource `json:"sources"`
		Prices  Prices        `json:"prices"`
	}{asOf, t.Sources, t.Prices})
}
