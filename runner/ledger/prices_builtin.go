package ledger

import (
	_ "embed"
	"sync"
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
