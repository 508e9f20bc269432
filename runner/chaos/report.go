package chaos

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/noderun/noderun/internal/shell"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
)

// Summary is the one line that ends a chaos run's output.
func (r *Report) Summary() string {
	verdict := "every case held"
	if !r.OK() {
		verdict = fmt.Sprintf("%d FAILED", r.Failed)
	}
	runs := "runs"
	if r.Runs == 1 {
		runs = "run"
	}
	at := ""
	if r.Parallel > 1 {
		at = fmt.Sprintf(", %d runs at once", r.Parallel)
	}
	return fmt.Sprintf("chaos %s: %d %s of a fault case against a node, %d passed, %s (profile %s, seed %d, %.1fs%s)",
		r.Graph, r.Runs, runs, r.Passed, verdict, r.Profile, r.Seed, r.Seconds, at)
}

// SilenceTail is how long the run went on only for silence cases (a fault
// of kind silence: the default idle-silence) after every other case had
// finished, and those cases' names. A silence case waits out the profile's
// idle window, so the tail is about what a shorter window would save.
func (r *Report) SilenceTail() (time.Duration, []string) {
	var lastSilence, lastOther time.Time
	var names []string
	for _, c := range r.Results {
		end := c.Started.Add(c.Time)
		if c.Fault.Kind != sim.FaultSilence {
			if end.After(lastOther) {
				lastOther = end
			}
			continue
		}
		if end.After(lastSilence) {
			lastSilence = end
		}
		if !slices.Contains(names, c.Case) {
			names = append(names, c.Case)
		}
	}
	if lastSilence.IsZero() {
		return 0, nil
	}
	if lastOther.IsZero() { // only silence cases: the whole run waited on them
		lastOther = r.Started
	}
	return max(0, lastSilence.Sub(lastOther)), names
}

// IdleHint is what a profile with a shorter idle window (the built-in ci)
// would save a chaos run that spent most of its wall time waiting only for
// its silence cases, which wait out the idle window.
type IdleHint struct {
	// Cases are the silence cases the run waited on.
	Cases []string
	// Idle is the run's idle window, Shorter the other profile's.
	Idle, Shorter time.Duration
	// Tail is how long the run went on for the silence cases alone, of
	// Wall, its wall time; Estimate bounds what it would take under the
	// other profile.
	Tail, Wall, Estimate time.Duration
}

// IdleHint says whether the ci profile of set (nil: the built-ins) would at
// least halve the run, run under prof. What ci would take is bounded from
// this run: the time the other cases needed (ci's shorter backoffs and
// cool-downs make them faster still), or a silence case under ci,
// whichever is longer. False when ci would not halve it, when prof is ci or
// its idle window is no longer, or when set has no ci.
func (r *Report) IdleHint(prof profile.Profile, set profile.Set) (IdleHint, bool) {
	if set == nil {
		set = profile.Builtins()
	}
	ci, err := set.Get("ci")
	if err != nil || prof.Name == ci.Name || prof.IdleTimeout <= ci.IdleTimeout {
		return IdleHint{}, false
	}
	tail, names := r.SilenceTail()
	wall := time.Duration(r.Seconds * float64(time.Second))
	if tail <= wall/2 {
		return IdleHint{}, false
	}
	estimate := max(wall-tail, ci.IdleTimeout.D()+500*time.Millisecond)
	if estimate > wall/2 {
		return IdleHint{}, false
	}
	return IdleHint{Cases: names, Idle: prof.IdleTimeout.D(), Shorter: ci.IdleTimeout.D(), Tail: tail, Wall: wall, Estimate: estimate}, true
}

// WriteCases writes cases as a table, under a line naming prof: each case's
// name, what it expects (for a failure, how it may end), its fault (and
// where in the stream it strikes) and its description (with the provider
// kinds it is limited to).
func WriteCases(w io.Writer, cases []Case, prof string) error {
	if _, err := fmt.Fprintf(w, "fault cases (profile %s), each aimed at every node in turn:\n", prof); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tEXPECT\tFAULT\tDESCRIPTION")
	for _, cs := range cases {
		f := string(cs.Fault.Kind)
		if cs.At != "" {
			f += "@" + string(cs.At)
		}
		expect := string(cs.Expect)
		if len(cs.Outcomes) > 0 {
			names := make([]string, len(cs.Outcomes))
			for i, o := range cs.Outcomes {
				names[i] = string(o)
			}
			expect += ": " + strings.Join(names, "|")
		}
		desc := cs.Description
		if len(cs.Kinds) > 0 {
			desc += " [" + strings.Join(cs.Kinds, ", ") + " nodes only]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cs.Name, expect, f, desc)
	}
	return tw.Flush()
}

// WriteTable prints one line per case and node, then the failures, each
// case's with the command that shows its target's diagnostics, and the
// summary.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tNODE\tRESULT\tOUTCOME\tSTEPS\tRETRIES\tRECONNECTS\tREGEN\tTIME\tCODES")
	for _, c := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.2fs\t%s\n", c.Case, c.Node, verdict(c), c.Outcome,
			c.RecoverySteps, c.Retries, c.Reconnects, c.Regenerated, c.Seconds, strings.Join(c.Codes, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Results {
		for _, f := range c.Failures {
			fmt.Fprintf(w, "FAIL %s @ %s: %s (run %s)\n", c.Case, c.Node, f, c.RunID)
		}
		if len(c.Failures) > 0 && c.RunID != "" {
			fmt.Fprintf(w, "     inspect: %s\n", r.Inspect(c))
		}
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// Inspect is the command that prints the diagnostics of a result's target,
// as a person would type it: with the journal's path when the report names
// one, since chaos's journal is seldom the default one.
func (r *Report) Inspect(c Result) string {
	cmd := fmt.Sprintf("noderun events %s --node %s --kind diagnostic", c.RunID, shell.Quote(c.Node))
	if r.Journal != "" {
		cmd += " --db " + shell.Quote(r.Journal)
	}
	return cmd
}

func verdict(c Result) string {
	if c.Pass {
		return "pass"
	}
	return "FAIL"
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// JUnit XML: the common format of Ant's junitreport, read by GitHub
// Actions test reporters, GitLab and Jenkins. One testsuite per case, one
// testcase per node the case was aimed at. A testcase's time is its case
// run's duration; a testsuite's timestamp is when its first case run
// started and its time the span until its last one ended (its runs may
// overlap, so the span can be shorter than their sum). The format has no
// timestamp per testcase; the JSON report has each run's start.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Package    string          `xml:"package,attr"`
	ID         int             `xml:"id,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out"`
	SystemErr  string          `xml:"system-err"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	doc := junitSuites{}
	index := map[string]int{}
	for _, c := range r.Results {
		i, ok := index[c.Case]
		if !ok {
			i = len(doc.Suites)
			index[c.Case] = i
			doc.Suites = append(doc.Suites, junitSuite{
				Name: "chaos." + c.Case, Package: "noderun.chaos." + r.Graph, ID: i, Hostname: host,
				Properties: []junitProperty{{"graph", r.Graph}, {"profile", r.Profile}, {"seed", fmt.Sprint(r.Seed)},
					{"case", c.Description}},
			})
		}
		s := &doc.Suites[i]
		tc := junitCase{Name: c.Node, Classname: "noderun.chaos." + r.Graph + "." + c.Case, Time: fmt.Sprintf("%.3f", c.Seconds)}
		if !c.Pass {
			codes := strings.Join(c.Codes, ",")
			if codes == "" {
				codes = "none"
			}
			tc.Failure = &junitFailure{
				Message: fmt.Sprintf("case %s, node %s: %s [diagnostics: %s]", c.Case, c.Node, strings.Join(c.Failures, "; "), codes),
				Type:    failureType(c),
				Text: fmt.Sprintf("case %s aimed at node %s (%s), expecting %s\noutcome %s, recovery steps %d, retries %d, reconnects %d, tokens regenerated %d\nverdict: %s\ndiagnostics: %s\ninspect: %s\n",
					c.Case, c.Node, faultLine(c), c.Expect, c.Outcome, c.RecoverySteps, c.Retries, c.Reconnects, c.Regenerated,
					c.Verdict, codes, r.Inspect(c)),
			}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
	for i := range doc.Suites {
		var first, last time.Time
		for _, c := range r.Results {
			if "chaos."+c.Case != doc.Suites[i].Name {
				continue
			}
			start := c.Started
			if start.IsZero() { // a result that never ran (it could not be aimed)
				start = r.Started
			}
			if first.IsZero() || start.Before(first) {
				first = start
			}
			if end := start.Add(c.Time); end.After(last) {
				last = end
			}
		}
		doc.Suites[i].Timestamp = first.UTC().Format("2006-01-02T15:04:05")
		doc.Suites[i].Time = fmt.Sprintf("%.3f", last.Sub(first).Seconds())
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// failureType is the diagnostic code a reader of a failed case looks up in
// docs/diagnostics.md: the one that says how the target ended (a spent
// budget rather than the generic node_failed), else its last fault or step.
func failureType(c Result) string {
	if c.Diagnostic != "" {
		return c.Diagnostic
	}
	return "no_diagnostic"
}

func faultLine(c Result) string {
	b, _ := json.Marshal(c.Fault)
	return string(b)
}
