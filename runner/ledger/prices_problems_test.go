package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A price file with several problems reports every one, each with the
// file, its line and its sentinel, not only the first.
func TestPriceFileReportsEveryProblem(t *testing.T) {
	src := "as_of: someday\n" + // 1
		"sources:\n" + // 2
		"  - {vendor: openai, url: pricing page}\n" + // 3
		"  - {vendor: anthropic, link: https://x.example}\n" + // 4
		"gpt-5:\n" + // 5
		"  input: ten\n" + // 6
		"  outptu: 1\n" + // 7
		"  reasoning: -2\n" + // 8
		"claude: [1, 2]\n" + // 9
		"gpt-5: {input: 1}\n" + // 10
		"ok-model: {input: 1, output: 2}\n" // 11
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPriceTable(path)
	want := []struct {
		line  string
		cause error
	}{
		{path + `:1: as_of: "someday" is not a date`, ErrPriceInvalid},
		{path + `:3: sources: "pricing page" is not a web address`, ErrPriceInvalid},
		{path + `:4: sources: unknown field "link" (known: vendor, url)`, ErrPriceUnknownField},
		{path + `:6: gpt-5: input: "ten" is not a number of USD per 1M tokens`, ErrPriceInvalid},
		{path + `:7: gpt-5: unknown field "outptu" (known: input, output, reasoning, cache_read, cache_write)`, ErrPriceUnknownField},
		{path + `:8: gpt-5: reasoning: -2: prices must be finite and not negative`, ErrPriceInvalid},
		{path + `:9: claude: want {input: USD, output: USD, reasoning: USD} per 1M tokens, not a list`, ErrPriceInvalid},
		{path + `:10: model "gpt-5" is given twice`, ErrPriceUnknownField},
	}
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d lines, want %d:\n%v", len(lines), len(want), err)
	}
	list := err.(interface{ Unwrap() []error }).Unwrap()
	for i, w := range want {
		if i >= len(lines) || i >= len(list) {
			break
		}
		if !strings.HasPrefix(lines[i], w.line) {
			t.Errorf("line %d = %q, want %q", i, lines[i], w.line)
		}
		if !errors.Is(list[i], w.cause) {
			t.Errorf("problem %d is not %v", i, w.cause)
		}
	}
	// Callers compare errors (the CLI's fileErr(...) != err): a slice type
	// would panic there.
	if same := err; err != same {
		t.Error("an error unequal to itself")
	}
	if _, err2 := LoadPrices(path); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("LoadPrices: %v", err2)
	}
}
