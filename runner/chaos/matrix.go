// Package chaos runs a goal graph on the simulator, first undisturbed (the
// reference), then once per fault case and target node, and checks that
// every node survives: completed, output byte-identical to the reference,
// recovery within the profile's bounds, nothing regenerated that its
// provider could have resumed; or, where a case expects a failure, that it
// ended the way the case expects (an Outcome). It is what `noderun chaos`
// runs.
package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/runner"
)

// Point is where in a node's stream a stream fault acts.
type Point string

// Points: early (after the first two events), middle, late (just before
// the terminal event: for chat, after finish_reason and usage, before
// [DONE]; for Responses, before response.completed).
const (
	PointEarly  Point = "early"
	PointMiddle Point = "middle"
	PointLate   Point = "late"
)

// Expect is what a case expects of its target node.
type Expect string

// Expectations.
const (
	// ExpectRecover: the node completes with the reference output (a
	// side_effects: unsafe node may be held instead: OutcomeUnsafeRefused).
	ExpectRecover Expect = "recover"
	// ExpectFail: the node does not complete: it ends with one of the case's
	// Outcomes (any failure when it names none).
	ExpectFail Expect = "fail"
)

// Case is one fault, aimed at one node at a time.
type Case struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Fault is the simulator fault (provider/sim schema). Its node is set
	// to each target in turn; an empty endpoint is the target's stream
	// endpoint (chat, or responses.create); empty requests are [1] (the
	// node's first attempt) and times 0 is 1.
	Fault sim.Fault `json:"fault"`
	// At places a close, reset, cut or silence in the target's stream
	// (sets after_events from the reference run); "" keeps after_events.
	At     Point  `json:"at,omitempty"`
	Expect Expect `json:"expect"`
	// Outcomes, for ExpectFail, are how the target may end (a
	// side_effects: unsafe node may always end OutcomeUnsafeRefused);
	// none: any failure.
	Outcomes []Outcome `json:"outcomes,omitempty"`
	// Meets, when set, is the error class the target must have met the
	// fault as before it gave up, shown by a fault of that class in its
	// journal (an outage: connect_failed). Agent harness nodes, which hide
	// the transport, and unsafe nodes held at the first fault are exempt.
	Meets diagnostics.Class `json:"meets,omitempty"`
	// Codes are diagnostic codes the target must show, by ID or name
	// ("NR903|NR904": either one): assertions a matrix file may add; the
	// default cases state their expectations in outcomes.
	Codes []string `json:"codes,omitempty"`
	// HarnessCodes, when set, replace Codes for harness nodes: an agent
	// harness hides the transport (Codex retries a refused connection
	// itself), so noderun sees other codes.
	HarnessCodes []string `json:"harness_codes,omitempty"`
	// Nodes, when set, are the only targets.
	Nodes []string `json:"nodes,omitempty"`
	// Kinds, when set, are the only provider kinds whose nodes it targets:
	// a fault only one API has (Anthropic's mid-stream error events, its
	// 529).
	Kinds []string `json:"kinds,omitempty"`
}

// Aims reports whether case c is aimed at node n of graph g: its nodes and
// provider kinds, when it names any, include n's.
func (c Case) Aims(g *runner.Graph, n *runner.Node) bool {
	if len(c.Nodes) > 0 && !slices.Contains(c.Nodes, n.ID) {
		return false
	}
	spec := g.Providers[n.Provider]
	return len(c.Kinds) == 0 || spec != nil && slices.Contains(c.Kinds, spec.Kind)
}

// CaseRuns is how many case runs cases make on g: each case once per node
// it is aimed at.
func CaseRuns(g *runner.Graph, cases []Case) int {
	n := 0
	for _, c := range cases {
		for _, nd := range g.Nodes {
			if c.Aims(g, nd) {
				n++
			}
		}
	}
	return n
}

// DefaultCases is the default matrix for profile p: what real networks do
// to a long stream, at several points of it. Durations follow the profile:
// the silence outlasts its idle window, the long outage its deadline.
func DefaultCases(p profile.Profile) []Case {
	silence := max(p.IdleTimeout.D(), p.PollAfter.D()) + 500*time.Millisecond
	var cs []Case
	for _, k := range []struct {
		kind sim.FaultKind
		what string
	}{
		{sim.FaultClose, "the server closes the stream cleanly, without terminal evidence"},
		{sim.FaultReset, "the connection is reset (TCP RST)"},
		{sim.FaultCut, "the connection drops in the middle of an SSE line"},
	} {
		for _, at := range []Point{PointEarly, PointMiddle, PointLate} {
			where := map[Point]string{PointEarly: "early in the stream", PointMiddle: "mid-stream",
				PointLate: "just before the terminal event"}[at]
			cs = append(cs, Case{Name: string(k.kind) + "-" + string(at), Description: k.what + ", " + where,
				Fault: sim.Fault{Kind: k.kind}, At: at, Expect: ExpectRecover})
		}
	}
	return append(cs,
		Case{Name: "idle-silence", Description: fmt.Sprintf("the stream goes silent for %s mid-stream, longer than the idle window", silence),
			Fault: sim.Fault{Kind: sim.FaultSilence, Duration: silence}, At: PointMiddle, Expect: ExpectRecover},
		Case{Name: "rate-limited", Description: "the first request is answered 429 with Retry-After: 1",
			Fault: sim.Fault{Kind: sim.FaultStatus, Status: 429, RetryAfter: "1"}, Expect: ExpectRecover},
		Case{Name: "server-error", Description: "the first request is answered 500",
			Fault: sim.Fault{Kind: sim.FaultStatus, Status: 500}, Expect: ExpectRecover},
		Case{Name: "unavailable", Description: "the first request is answered 503",
			Fault: sim.Fault{Kind: sim.FaultStatus, Status: 503}, Expect: ExpectRecover},
		// Anthropic's overload, as an error event mid-stream and as HTTP 529:
		// transient, recovered like a 5xx.
		Case{Name: "overloaded-event", Description: "an overloaded_error event mid-stream (Anthropic; transient, like HTTP 529)",
			Fault: sim.Fault{Kind: sim.FaultErrorEvent, Status: 529}, At: PointMiddle, Expect: ExpectRecover, Kinds: []string{runner.ProviderKindAnthropic}},
		Case{Name: "overloaded-529", Description: "the first request is answered HTTP 529, overloaded (Anthropic)",
			Fault: sim.Fault{Kind: sim.FaultStatus, Status: 529}, Expect: ExpectRecover, Kinds: []string{runner.ProviderKindAnthropic}},
		Case{Name: "outage-brief", Description: "the server goes down at the node's request and refuses connections until the node has retried into the outage once",
			Fault: sim.Fault{Kind: sim.FaultOutage, Duration: p.Deadline.D() + time.Second}, Expect: ExpectRecover},
		// The node must give up within its bounds, having met the outage as
		// refused connects. A harness hides them: one that resumes (Codex,
		// Claude Code) resumes until the deadline or, when each resume fails
		// fast, until its reconnects are spent (an unsafe node is then held);
		// one whose every recovery is a retry (Gemini CLI's dropped sessions)
		// may spend the retry budget first. An unsafe node cut at the
		// outage's start is held at once, which any case accepts.
		Case{Name: "outage-long", Description: "the server goes down at the node's request for longer than the profile's deadline: the node must fail fast as an outage (connects refused, then a spent budget or a passed deadline), or be held if it is side_effects: unsafe",
			Fault: sim.Fault{Kind: sim.FaultOutage, Duration: p.Deadline.D() + time.Second}, Expect: ExpectFail,
			Outcomes: []Outcome{OutcomeBudgetSpent, OutcomeDeadline, OutcomeTimedOut}, Meets: diagnostics.ClassConnect},
	)
}

// Matrix is a matrix file: which default cases to keep and which to add.
//
//	defaults: [close-early, rate-limited]   # omit for all, [] for none
//	cases:
//	  - name: slow-first-token
//	    description: a long silence before anything is sent
//	    at: early                             # early | middle | late
//	    expect: recover                       # recover | fail
//	    outcomes: [budget_spent]              # expect fail: how the target may end (default: any failure)
//	    codes: [NR107]                        # codes the target must show ("NR903|NR904": either)
//	    harness_codes: [NR305]                # ... when it is a harness node (default: codes)
//	    nodes: [plan]                         # omit for every node
//	    fault: {kind: silence, duration: 3s}  # the simulator's fault schema
type Matrix struct {
	Defaults []string // nil = all
	Cases    []Case
}

// LoadMatrix reads a matrix file. Errors name file:line.
func LoadMatrix(path string) (*Matrix, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chaos matrix: %w", err)
	}
	m, err := ParseMatrix(data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return m, nil
}

// ParseMatrix is LoadMatrix on bytes; errors start with "LINE: ".
func ParseMatrix(data []byte) (*Matrix, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Matrix{}, nil
		}
		return nil, fmt.Errorf("1: %v", err)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errAt(root, "a matrix is a mapping with defaults and cases")
	}
	m := &Matrix{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			return nil, errAt(k, "duplicate field %q", k.Value)
		}
		seen[k.Value] = true
		switch k.Value {
		case "defaults":
			m.Defaults = []string{}
			if err := v.Decode(&m.Defaults); err != nil {
				return nil, errAt(v, "defaults: want a list of case names")
			}
		case "cases":
			if v.Kind != yaml.SequenceNode {
				return nil, errAt(v, "cases: want a list")
			}
			for _, cn := range v.Content {
				c, err := decodeCase(cn)
				if err != nil {
					return nil, err
				}
				m.Cases = append(m.Cases, c)
			}
		default:
			return nil, errAt(k, "unknown field %q (want defaults, cases)", k.Value)
		}
	}
	return m, nil
}

func decodeCase(n *yaml.Node) (Case, error) {
	c := Case{Expect: ExpectRecover}
	if n.Kind != yaml.MappingNode {
		return c, errAt(n, "a case is a mapping")
	}
	var faultNode, expectNode, outcomesNode *yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return c, errAt(k, "duplicate field %q", k.Value)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "name":
			err = v.Decode(&c.Name)
		case "description":
			err = v.Decode(&c.Description)
		case "at":
			err = v.Decode(&c.At)
			if err == nil && !slices.Contains([]Point{PointEarly, PointMiddle, PointLate}, c.At) {
				return c, errAt(v, "at: want early, middle or late, got %q", c.At)
			}
		case "expect":
			expectNode = v
			err = v.Decode(&c.Expect)
			if err == nil && c.Expect != ExpectRecover && c.Expect != ExpectFail {
				return c, errAt(v, "expect: want recover or fail, got %q", c.Expect)
			}
		case "outcomes":
			outcomesNode = v
			if err = v.Decode(&c.Outcomes); err == nil {
				err = checkOutcomes(v, c.Outcomes)
			}
		case "codes":
			if err = v.Decode(&c.Codes); err == nil {
				err = checkCodes(v, c.Codes)
			}
		case "harness_codes":
			if err = v.Decode(&c.HarnessCodes); err == nil {
				err = checkCodes(v, c.HarnessCodes)
			}
		case "nodes":
			err = v.Decode(&c.Nodes)
		case "kinds":
			err = v.Decode(&c.Kinds)
		case "fault":
			faultNode = v
		default:
			return c, errAt(k, "unknown case field %q (want name, description, at, expect, outcomes, codes, harness_codes, nodes, kinds, fault)", k.Value)
		}
		var lerr *lineError
		switch {
		case errors.As(err, &lerr):
			return c, fmt.Errorf("%d: %s: %s", lerr.line, k.Value, lerr.msg)
		case err != nil:
			return c, errAt(v, "%s: %v", k.Value, err)
		}
	}
	if outcomesNode != nil {
		// outcomes say how a failure ends: they imply expect: fail
		if expectNode != nil && c.Expect != ExpectFail {
			return c, errAt(outcomesNode, "case %q: outcomes are for expect: fail", c.Name)
		}
		c.Expect = ExpectFail
	}
	if c.Name == "" || strings.ContainsAny(c.Name, " \t\n") {
		return c, errAt(n, "a case needs a name without spaces")
	}
	if faultNode == nil {
		return c, errAt(n, "case %q: fault is required", c.Name)
	}
	f, err := sim.DecodeFault(faultNode)
	if err != nil {
		var ce *sim.ConfigError
		if errors.As(err, &ce) {
			return c, fmt.Errorf("%d: case %q: fault: %s", ce.Line, c.Name, ce.Msg)
		}
		return c, err
	}
	if f.Node != "" {
		return c, errAt(faultNode, "case %q: fault.node is set per target; use the case's nodes to choose targets", c.Name)
	}
	if f.Kind == sim.FaultRefuse {
		return c, errAt(faultNode, "case %q: refuse cannot be aimed at a node; use kind outage", c.Name)
	}
	switch f.Kind {
	case sim.FaultClose, sim.FaultReset, sim.FaultCut, sim.FaultSilence, sim.FaultErrorEvent:
	default:
		if c.At != "" {
			return c, errAt(n, "case %q: at places a close, reset, cut, silence or error_event in the stream, not a %s", c.Name, f.Kind)
		}
	}
	c.Fault = f
	return c, nil
}

func errAt(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%d: %s", n.Line, fmt.Sprintf(format, args...))
}

// lineError is an error in one item of a list, at the item's line.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("%d: %s", e.line, e.msg) }

// checkOutcomes accepts the outcomes a failure may end with.
func checkOutcomes(list *yaml.Node, outcomes []Outcome) error {
	for i, o := range outcomes {
		if !slices.Contains(failureOutcomes(), o) {
			return &lineError{list.Content[i].Line, fmt.Sprintf("unknown outcome %q (want one of %v)", o, failureOutcomes())}
		}
	}
	return nil
}

// checkCodes accepts diagnostic codes by ID or name, and alternatives
// "NR903|NR904", so that a typo fails the matrix file rather than every case.
func checkCodes(list *yaml.Node, codes []string) error {
	for i, spec := range codes {
		for _, alt := range strings.Split(spec, "|") {
			if _, ok := diagnostics.Lookup(strings.TrimSpace(alt)); !ok {
				return &lineError{list.Content[i].Line, fmt.Sprintf("unknown diagnostic code %q (docs/diagnostics.md)", alt)}
			}
		}
	}
	return nil
}

// Select returns the cases to run: the defaults m keeps, then m's own. A
// nil m is every default case. Unknown default names and duplicate names
// are errors.
func Select(defaults []Case, m *Matrix) ([]Case, error) {
	if m == nil {
		return defaults, nil
	}
	var out []Case
	if m.Defaults == nil {
		out = append(out, defaults...)
	} else {
		for _, name := range m.Defaults {
			i := slices.IndexFunc(defaults, func(c Case) bool { return c.Name == name })
			if i < 0 {
				var names []string
				for _, c := range defaults {
					names = append(names, c.Name)
				}
				return nil, fmt.Errorf("defaults: no default case %q (they are %s)", name, strings.Join(names, ", "))
			}
			out = append(out, defaults[i])
		}
	}
	for _, c := range m.Cases {
		if slices.ContainsFunc(out, func(o Case) bool { return o.Name == c.Name }) {
			return nil, fmt.Errorf("case %q: the name is already taken", c.Name)
		}
		out = append(out, c)
	}
	return out, nil
}
