package view

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/runner/ledger"
)

// GraphCheck is one graph file checked without running it, as `noderun
// validate` reports it: whether it is valid, its nodes, and why running it
// on this machine would be refused (a variable a provider needs is unset).
type GraphCheck struct {
	Path     string   `json:"path"`
	OK       bool     `json:"ok"`
	Nodes    int      `json:"nodes"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`

	// Err is why the graph is invalid, and Env why this machine would
	// refuse to run it (nil: nothing); Errors and Warnings are their lines.
	Err error `json:"-"`
	Env error `json:"-"`
}

// Validation is a set of graph files checked (`noderun validate`'s JSON).
type Validation struct {
	Graphs []GraphCheck `json:"graphs"`
	// Files are the profiles, price and fault files checked with
	// --profiles, --prices and --faults; left out when none were.
	Files []FileCheck `json:"files,omitempty"`
}

// FileKind is a kind of file a graph refers to that validate checks alone.
type FileKind string

const (
	FileProfiles FileKind = "profiles" // recovery profiles (profiles: in a graph, --file of noderun profiles)
	FilePrices   FileKind = "prices"   // a price table (--prices)
	FileFaults   FileKind = "faults"   // a simulator configuration (noderun sim serve --faults)
)

// FileCheck is a profiles, price or faults file checked in full: every
// problem, a line each, at its line.
type FileCheck struct {
	Path   string   `json:"path"`
	Kind   FileKind `json:"kind"`
	OK     bool     `json:"ok"`
	Errors []string `json:"errors"`

	Err error `json:"-"` // why it is invalid; nil when OK
}

// CheckFile reads the file at path as kind, as the command that uses it
// would, and reports every problem.
func CheckFile(kind FileKind, path string) FileCheck {
	var err error
	switch kind {
	case FileProfiles:
		_, err = profile.Load(path)
	case FilePrices:
		_, err = ledger.LoadPrices(path)
	case FileFaults:
		_, err = sim.LoadConfig(path)
	default:
		err = fmt.Errorf("%s: unknown kind of file %q", path, kind)
	}
	res := FileCheck{Path: path, Kind: kind, OK: err == nil, Errors: []string{}, Err: err}
	if err != nil {
		res.Errors = nonBlankLines(err.Error())
	}
	return res
}

// CheckGraph loads the graph file at path and checks it (runner.Check), and
// if it is valid, this machine's environment for it (runner.CheckEnvironment).
// Its error is ctx's alone: when ctx ended while the file was read (a FIFO
// nobody writes), nothing was checked.
func CheckGraph(ctx context.Context, path string) (GraphCheck, error) {
	res := GraphCheck{Path: path, Errors: []string{}, Warnings: []string{}}
	g, err := runner.LoadGraphContext(ctx, path)
	if ctx.Err() != nil {
		return GraphCheck{}, ctx.Err()
	}
	opts := runner.Options{}
	if err == nil {
		err = runner.Check(g, &opts)
	}
	if err != nil {
		res.Err, res.Errors = err, nonBlankLines(err.Error())
		return res, nil
	}
	res.OK, res.Nodes = true, len(g.Nodes)
	if err := runner.CheckEnvironment(g, &opts); err != nil {
		res.Env, res.Warnings = err, nonBlankLines(err.Error())
	}
	return res, nil
}

// nonBlankLines are the lines of s that hold more than white space: a
// graph's errors list a problem a line.
func nonBlankLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// Profiles are recovery profiles with their values (`noderun profiles`'s
// JSON); durations are in milliseconds.
type Profiles struct {
	Profiles []Profile `json:"profiles"`
}

// Profile is one recovery profile's values.
type Profile struct {
	Name              string  `json:"name"`
	Retries           int     `json:"retries"`
	Reconnects        int     `json:"reconnects"`
	BackoffBaseMS     int64   `json:"backoff_base_ms"`
	BackoffFactor     float64 `json:"backoff_factor"`
	BackoffCapMS      int64   `json:"backoff_cap_ms"`
	DeadlineMS        int64   `json:"deadline_ms"`
	IdleTimeoutMS     int64   `json:"idle_timeout_ms"`
	PollAfterMS       int64   `json:"poll_after_ms"`
	PollIntervalMS    int64   `json:"poll_interval_ms"`
	StuckAfterMS      int64   `json:"stuck_after_ms"`
	MaxRetryAfterMS   int64   `json:"max_retry_after_ms"`
	Breaker           int     `json:"breaker"`
	BreakerCooldownMS int64   `json:"breaker_cooldown_ms"`
	MaxOutputBytes    int64   `json:"max_output_bytes"`
	MaxEvents         int     `json:"max_events"`
}

// ProfilesOf is every profile of set, by name.
func ProfilesOf(set profile.Set) Profiles {
	out := Profiles{Profiles: []Profile{}}
	for _, name := range set.Names() {
		p := set[name]
		out.Profiles = append(out.Profiles, Profile{Name: name, Retries: p.Retries, Reconnects: p.Reconnects,
			BackoffBaseMS: p.Backoff.Base.D().Milliseconds(), BackoffFactor: p.Backoff.Factor, BackoffCapMS: p.Backoff.Cap.D().Milliseconds(),
			DeadlineMS: p.Deadline.D().Milliseconds(), IdleTimeoutMS: p.IdleTimeout.D().Milliseconds(), PollAfterMS: p.PollAfter.D().Milliseconds(),
			PollIntervalMS: p.PollInterval.D().Milliseconds(), StuckAfterMS: p.StuckAfter.D().Milliseconds(),
			MaxRetryAfterMS: p.MaxRetryAfter.D().Milliseconds(), Breaker: p.Breaker, BreakerCooldownMS: p.BreakerCooldown.D().Milliseconds(),
			MaxOutputBytes: int64(p.OutputBound()), MaxEvents: p.EventBound()})
	}
	return out
}

// WriteProfiles writes set as a table, a profile a line, in name order.
func WriteProfiles(w io.Writer, set profile.Set) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tRETRIES\tRECONNECTS\tBACKOFF (full jitter)\tDEADLINE\tIDLE\tPOLL AFTER\tPOLL\tSTUCK AFTER\tMAX RETRY-AFTER\tBREAKER\tMAX OUTPUT")
	for _, name := range set.Names() {
		p := set[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s × %g, cap %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Retries, p.Reconnects,
			p.Backoff.Base, p.Backoff.Factor, p.Backoff.Cap, p.Deadline, p.IdleTimeout, p.PollAfter, p.PollInterval, p.StuckAfter, p.MaxRetryAfter, breakerText(p),
			p.OutputBound())
	}
	return tw.Flush()
}

func breakerText(p profile.Profile) string {
	if p.Breaker == 0 {
		return "off"
	}
	return fmt.Sprintf("%d failures, %s cool-down", p.Breaker, p.BreakerCooldown)
}
