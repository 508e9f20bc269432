package runner

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simconfig"
	"github.com/noderun/noderun/runner/graph"
)

// The simulator, fault and profile blocks of docs/graph.md and of the JSON
// Schema come from tables in package graph, which cannot import the packages
// that decode those blocks; these tests hold the tables to the code.

func yamlTags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	slices.Sort(out)
	return out
}

func sortedNames(fs []graph.Field) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	slices.Sort(out)
	return out
}

func TestProfileFieldsMatchPackageProfile(t *testing.T) {
	if got, want := sortedNames(graph.BlockFields("profile")), yamlTags(reflect.TypeFor[profile.Profile]()); !slices.Equal(got, want) {
		t.Errorf("graph block profile: %v, profile.Profile %v", got, want)
	}
	if got, want := sortedNames(graph.BlockFields("backoff")), yamlTags(reflect.TypeFor[profile.Backoff]()); !slices.Equal(got, want) {
		t.Errorf("graph block backoff: %v, profile.Backoff %v", got, want)
	}
	def := profile.Builtins()["default"]
	want := map[string]string{
		"retries": strconv.Itoa(def.Retries), "reconnects": strconv.Itoa(def.Reconnects),
		"backoff":  "{base: " + def.Backoff.Base.String() + ", factor: " + strconv.FormatFloat(def.Backoff.Factor, 'g', -1, 64) + ", cap: " + def.Backoff.Cap.String() + "}",
		"deadline": def.Deadline.String(), "idle_timeout": def.IdleTimeout.String(), "poll_after": def.PollAfter.String(),
		"poll_interval": def.PollInterval.String(), "stuck_after": def.StuckAfter.String(), "max_retry_after": def.MaxRetryAfter.String(),
		"breaker": strconv.Itoa(def.Breaker), "breaker_cooldown": def.BreakerCooldown.String(),
		"max_output_bytes": def.MaxOutputBytes.String(), "max_events": strconv.Itoa(def.MaxEvents),
	}
	for _, f := range graph.BlockFields("profile") {
		if f.Default != want[f.Name] {
			t.Errorf("profile field %s: documented default %q, the default profile has %q", f.Name, f.Default, want[f.Name])
		}
	}
	for _, f := range graph.BlockFields("backoff") {
		w := map[string]string{"base": def.Backoff.Base.String(), "factor": strconv.FormatFloat(def.Backoff.Factor, 'g', -1, 64), "cap": def.Backoff.Cap.String()}[f.Name]
		if f.Default != w {
			t.Errorf("backoff field %s: documented default %q, the default profile has %q", f.Name, f.Default, w)
		}
	}
	// Every documented example is a value the profiles parser takes.
	var b strings.Builder
	b.WriteString("example:\n")
	for _, f := range graph.BlockFields("profile") {
		b.WriteString("  " + f.Name + ": " + f.Example + "\n")
	}
	if _, err := profile.Parse("example.yaml", []byte(b.String())); err != nil {
		t.Errorf("the documented examples do not parse as a profile: %v\n%s", err, b.String())
	}
}

func TestSimFieldsMatchPackageSim(t *testing.T) {
	known := simconfig.ConfigFields()
	slices.Sort(known)
	if got := sortedNames(graph.BlockFields("simulator")); !slices.Equal(got, known) {
		t.Errorf("graph block simulator: %v, package sim %v", got, known)
	}
	for _, f := range graph.BlockFields("simulator") {
		if _, err := sim.ParseConfig([]byte(f.Name + ": " + f.Example + "\n")); err != nil {
			t.Errorf("sim field %s: the documented example does not parse: %v", f.Name, err)
		}
	}
	if got, want := sortedNames(graph.BlockFields("fault")), yamlTags(reflect.TypeFor[sim.Fault]()); !slices.Equal(got, want) {
		t.Errorf("graph block fault: %v, sim.Fault %v", got, want)
	}
	for _, e := range simconfig.Endpoints() {
		if !strings.Contains(graph.BlockFields("fault")[1].Doc, e) {
			t.Errorf("the fault block's endpoint doc lacks %q", e)
		}
	}
	var schema struct {
		Defs struct {
			Fault struct {
				Properties struct {
					Kind struct{ Enum []string }
				}
			}
		} `json:"$defs"`
	}
	if err := json.Unmarshal(graph.Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	kinds := simconfig.FaultKinds()
	enum := schema.Defs.Fault.Properties.Kind.Enum
	if len(enum) != len(kinds) {
		t.Errorf("the schema's fault kinds %v, package sim's %v", enum, kinds)
	}
	for _, k := range kinds {
		if !strings.Contains(graph.BlockFields("fault")[0].Doc, string(k)) || !slices.Contains(enum, string(k)) {
			t.Errorf("fault kind %q is missing from the fault block's doc or the schema", k)
		}
	}
}
