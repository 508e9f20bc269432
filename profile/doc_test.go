package profile

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// docLine is how Builtins' doc comment lists a built-in profile: its name
// and every value, in the units `noderun profiles` prints.
func docLine(p Profile) string {
	return fmt.Sprintf("%s: retries %d, reconnects %d, backoff {base %s, factor %g, cap %s}, deadline %s, idle_timeout %s, "+
		"poll_after %s, poll_interval %s, stuck_after %s, max_retry_after %s, breaker %d, breaker_cooldown %s, max_output_bytes %s, max_events %d",
		p.Name, p.Retries, p.Reconnects, p.Backoff.Base, p.Backoff.Factor, p.Backoff.Cap, p.Deadline, p.IdleTimeout,
		p.PollAfter, p.PollInterval, p.StuckAfter, p.MaxRetryAfter, p.Breaker, p.BreakerCooldown, p.MaxOutputBytes, p.MaxEvents)
}

// `go doc ./profile Builtins` is where a Go programmer looks for the
// profile names and their values: the doc comment lists exactly the
// profiles Builtins returns, with their current values.
func TestBuiltinsDocListsEveryProfile(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "profile.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Builtins" && fn.Doc != nil {
			doc = fn.Doc.Text()
		}
	}
	if doc == "" {
		t.Fatal("Builtins has no doc comment")
	}
	var got []string
	for l := range strings.Lines(doc) {
		if strings.HasPrefix(l, "\t") && strings.Contains(l, ": retries ") {
			got = append(got, strings.TrimSpace(l))
		}
	}
	var want []string
	for _, name := range Set(Builtins()).Names() {
		want = append(want, docLine(Builtins()[name]))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("Builtins' doc lists\n\t%s\nwant (from Builtins)\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
