package graph

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim/simconfig"
)

// The docs, the schema and the README against the code's own lists: the
// provider kinds (BuiltinKinds), the simulator's fault kinds, endpoints and
// fields (package simconfig). docs/graph.md and docs/graph.schema.json are
// generated from the field tables (TestReferenceUpToDate,
// TestSchemaFileUpToDate); the hand-written docs are held here. A kind, an
// endpoint or a field added to the code and not to a doc fails this test.

func readDoc(t *testing.T, rel ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, rel...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of doc from the heading line to the next heading of
// the same level or higher.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no heading %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	level := strings.Count(strings.Fields(heading)[0], "#")
	for _, l := range strings.SplitAfter(rest, "\n") {
		if f := strings.Fields(l); strings.HasPrefix(l, "#") && strings.Trim(f[0], "#") == "" && len(f[0]) <= level {
			return rest[:strings.Index(rest, l)]
		}
	}
	return rest
}

func faultKindNames() []string {
	var out []string
	for _, k := range simconfig.FaultKinds() {
		out = append(out, string(k))
	}
	return out
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	g, w = slices.Compact(g), slices.Compact(w)
	if !slices.Equal(g, w) {
		var missing, extra []string
		for _, x := range w {
			if !slices.Contains(g, x) {
				missing = append(missing, x)
			}
		}
		for _, x := range g {
			if !slices.Contains(w, x) {
				extra = append(extra, x)
			}
		}
		t.Errorf("%s: lacks %v, has unknown %v", what, missing, extra)
	}
}

func allSubmatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// The schema's enums are the code's lists.
func TestDriftSchemaEnums(t *testing.T) {
	var s struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Enum       []string
				Properties map[string]any
			}
		} `json:"$defs"`
	}
	if err := json.Unmarshal([]byte(readDoc(t, "docs", "graph.schema.json")), &s); err != nil {
		t.Fatal(err)
	}
	sameSet(t, "schema provider kinds", s.Defs["provider"].Properties["kind"].Enum, BuiltinKinds())
	sameSet(t, "schema fault kinds", s.Defs["fault"].Properties["kind"].Enum, faultKindNames())
	sameSet(t, "schema fault endpoints", s.Defs["fault"].Properties["endpoint"].Enum, simconfig.Endpoints())
	var limits []string
	for k := range s.Defs["sim"].Properties["limits"].Properties {
		limits = append(limits, k)
	}
	sameSet(t, "schema sim limits fields", limits, simconfig.LimitsFields())
	sameSet(t, "simulator block fields", fieldNames(fieldsSim), simconfig.ConfigFields())
	sameSet(t, "fault block fields", fieldNames(fieldsFault), simconfig.FaultFields())
	sameSet(t, "profile block fields", fieldNames(fieldsProfile), profile.Fields())
	sameSet(t, "backoff block fields", fieldNames(fieldsBackoff), profile.BackoffFields())
}

// docs/graph.md names every provider kind, fault kind and endpoint where it
// lists them.
func TestDriftGraphReference(t *testing.T) {
	doc := readDoc(t, "docs", "graph.md")
	row := func(block, field string) string {
		sec := section(t, doc, "## The "+block+" block")
		for _, l := range strings.Split(sec, "\n") {
			if strings.HasPrefix(l, "| `"+field+"` |") {
				return l
			}
		}
		t.Fatalf("graph.md: no row %s in the %s block", field, block)
		return ""
	}
	word := func(s string) *regexp.Regexp {
		return regexp.MustCompile(`(^|[^a-z_.])` + regexp.QuoteMeta(s) + `([^a-z_]|$)`)
	}
	for _, c := range []struct {
		block, field string
		want         []string
	}{
		{"provider", "kind", BuiltinKinds()},
		{"fault", "kind", faultKindNames()},
		{"fault", "endpoint", simconfig.Endpoints()},
	} {
		r := row(c.block, c.field)
		for _, w := range c.want {
			if !word(w).MatchString(r) {
				t.Errorf("graph.md: the %s block's %s row lacks %q", c.block, c.field, w)
			}
		}
	}
}

// docs/simulator.md: its endpoint table, fault-kind table and config
// examples list exactly the simulator's.
func TestDriftSimulatorDoc(t *testing.T) {
	doc := readDoc(t, "docs", "simulator.md")
	endpoints := section(t, doc, "## Endpoints")
	sameSet(t, "simulator.md endpoint table", allSubmatches(regexp.MustCompile("(?m)^\\| `[^`]+` \\| `([a-z.]+)` \\|"), endpoints), simconfig.Endpoints())

	faults := section(t, doc, "## Faults")
	sameSet(t, "simulator.md fault kind table", allSubmatches(regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|"), faults), faultKindNames())
	yamlBlock := func(sec string) string {
		i := strings.Index(sec, "```yaml\n")
		j := strings.Index(sec[i+8:], "```")
		if i < 0 || j < 0 {
			t.Fatal("no yaml block")
		}
		return sec[i+8 : i+8+j]
	}
	fy := yamlBlock(faults)
	sameSet(t, "simulator.md fault example's fields", allSubmatches(regexp.MustCompile(`(?m)^ {2}(?:- | {2})([a-z_]+):`), fy), simconfig.FaultFields())

	cy := yamlBlock(section(t, doc, "## Config file"))
	sameSet(t, "simulator.md config example's fields", allSubmatches(regexp.MustCompile(`(?m)^([a-z_]+):`), cy), simconfig.ConfigFields())
	sameSet(t, "simulator.md config example's limits", allSubmatches(regexp.MustCompile(`(?m)^ {2}([a-z_]+):`), cy), simconfig.LimitsFields())

	// The package doc's example (go doc ./provider/sim/simconfig) too.
	pkg := readDoc(t, "provider", "sim", "simconfig", "doc.go")
	m := regexp.MustCompile(`kind: close +# ([a-z_ |]+)\n`).FindStringSubmatch(pkg)
	if m == nil {
		t.Fatal("simconfig/doc.go: no kind comment")
	}
	sameSet(t, "simconfig/doc.go fault kinds", strings.Split(strings.TrimSpace(m[1]), " | "), faultKindNames())
}

// The README's provider example lists every kind; docs/observability.md
// says which kinds the metrics' provider label holds.
func TestDriftREADMEAndObservability(t *testing.T) {
	m := regexp.MustCompile(`(?m)^ +kind: openai +# ([a-z_ |]+)$`).FindStringSubmatch(readDoc(t, "README.md"))
	if m == nil {
		t.Fatal("README: no provider kind comment")
	}
	sameSet(t, "README provider kinds", strings.Split(strings.TrimSpace(m[1]), " | "), BuiltinKinds())

	obs := readDoc(t, "docs", "observability.md")
	i := strings.Index(obs, "The `provider` label holds the provider's **kind**")
	if i < 0 {
		t.Fatal("observability.md does not say what the metrics' provider label holds")
	}
	para := obs[i:]
	para = para[:strings.Index(para, "\n\n")]
	for _, k := range BuiltinKinds() {
		if !strings.Contains(para, "`"+k+"`") {
			t.Errorf("observability.md: the provider label's kinds lack %q", k)
		}
	}
}
