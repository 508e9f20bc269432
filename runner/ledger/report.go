package ledger

import (
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/shell"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
)

// ReportOptions are what the page shows beyond what Load read. The zero
// value is a page whose commands name the default journal and that shows
// completed nodes' outputs only.
type ReportOptions struct {
	// DB is the journal as the page's commands name it (--db FILE), so that
	// they work when pasted; "" for the default journal, which they then
	// leave unnamed.
	DB string
	// MaxOutput is how much of each node's output the page holds, in bytes
	// (0: DefaultMaxOutput; negative: all). A longer output is cut, with the
	// command that prints all of it.
	MaxOutput int
	// Temporal is the Temporal frontend (HOST:PORT) of a run read from
	// Temporal (noderun report --temporal): the page's commands name it
	// instead of a journal. "" for a local run.
	Temporal string
	// Handovers are the nodes a Temporal run handed from a lost (or
	// stopped) worker to another, shown in a section of their own.
	Handovers []Handover
}

// Handover is a node taken over from a lost or stopped worker, as the
// page shows it (noderun diagnose --temporal computes it).
type Handover struct {
	Node, LostWorker, Worker string
	Failure                  string // how Temporal saw the lost attempt end
	LastHeartbeat, Resumed   string // times of day
	Took                     string // LastHeartbeat → Resumed
	TookMS                   int64
	Recovery                 string // re-attached, continued, retried…
	Generated, Regenerated   int
	Preserved                int
}

// DefaultMaxOutput is how much of a node's output the page holds unless
// ReportOptions say otherwise: enough to read, not enough to make a page of
// a thousand-node run too heavy to open.
const DefaultMaxOutput = 16 << 10

// maxEvents is how many of a node's diagnostics its table lists; the rest
// are counted, with the command that prints them.
const maxEvents = 300

// WriteReport writes a run as one self-contained HTML page (inline style and
// SVG, a few lines of optional script, nothing from the network): first
// what needs the operator — each failed, interrupted or stuck node with its
// error, class and verdict, and the exact command that goes on from there —
// then the run's duration, a timeline of every attempt (the gaps between
// the runners' sessions, backoff waits apart from the attempts), acct (the
// diagnose table; nil: accounted here without prices), and each node's
// diagnostics and output one click away.
func WriteReport(w io.Writer, run *Run, acct *Account, opts ReportOptions) error {
	if acct == nil {
		acct = AccountOf(run, nil)
	}
	return renderReport(w, buildPage(run, acct, opts, time.Now()))
}

// reportPage is what the template draws. Everything is computed here, from
// the ledger, so the page needs no script to show anything.
type reportPage struct {
	Run         journal.Run
	Generated   string
	D           *Account
	Figures     runFigures
	RunCommands []command
	Problems    []problem
	AllWell     string
	Graph       svgGraph
	Timeline    svgTimeline
	Nodes       []nodeDetail
	Handovers   []Handover
	Temporal    string
}

// runFigures are the run's times.
type runFigures struct {
	Status        string
	Started       string
	Took, Ran     string // Took: from start to end, wall time; Ran: what the sessions add up to
	TookMS, RanMS int64
	Sessions      int
	Gaps          string // each gap between sessions, "interrupted 12m03s"
	GapMS         int64
	// Stopped: no runner is running the run (it ended, was interrupted, or
	// its runner died).
	Stopped bool
}

// command is a command line the operator can paste.
type command struct {
	What string // resume, retry, cancel
	Why  string
	Line string
}

// problem is a node that did not complete and is not waiting for one that
// did not: what it needs the operator to know.
type problem struct {
	Node, State    string
	Class          diagnostics.Class
	Error          string
	Reason         string
	Verdict        string
	Skipped        []string // nodes skipped because it did not complete
	Commands       []command
	ErrorTruncated bool
}

// nodeDetail is a node's events and output, one click away.
type nodeDetail struct {
	ID, State, Verdict string
	Open               bool
	Attempts           []attemptRow
	Events             []eventRow
	MoreEvents         int
	EventsCmd          string
	OutputWhat         string
	Output             string
	OutputBytes        int
	Shown              int
	Cut                bool
	ShowCmd            string
	// Thinking went with the output, apart from it (cut like it).
	Thinking      string
	ThinkingBytes int
	ThinkingCut   bool
	ThinkingCmd   string
}

type attemptRow struct {
	N                   int
	Mode, Provider, Ref string
	At, Lasted          string
	Outcome             string
	Class               diagnostics.Class
	Error, Tokens       string
}

type eventRow struct {
	Seq              int64
	At               string
	Attempt          int
	Code, Name, Role string
	Message, Attrs   string
}

type svgGraph struct {
	W, H  int
	Boxes []svgBox
	Edges []svgEdge
}

type svgBox struct {
	X, Y, W, H int
	ID, State  string
}

type svgEdge struct{ X1, Y1, X2, Y2 int }

type svgTimeline struct {
	W, H  int
	Took  string
	Ticks []svgTick
	Gaps  []svgGap
	Rows  []svgRow
}

type svgTick struct {
	X     int
	Label string
}

// svgGap is a band between two sessions: nobody ran the run.
type svgGap struct {
	X, W, Mid      int
	Why, Label     string
	MS             int64
	FromISO, ToISO string
}

type svgRow struct {
	Node     string
	Y        int
	Attempts []svgAttempt
	Marks    []svgMark
}

type svgAttempt struct {
	N                   int
	Look, Mode, Outcome string
	ErrClass            diagnostics.Class
	Ref, Title          string
	StartISO, EndISO    string
	Segs                []svgSeg
	LabelX              int
	ShowLabel           bool
}

// svgSeg is a stretch of an attempt: run, wait or detached (segKind).
type svgSeg struct {
	Kind           string
	X, W           int
	FromISO, ToISO string
	// A wait's step.
	Code    string
	Seq     int64
	DelayMS int64
	Title   string
}

type svgMark struct {
	X          int
	Code, Kind string
	Title      string
}

// The timeline's geometry, in pixels.
const (
	tlLeft, tlWidth, tlRowH, tlTop = 160, 900, 30, 40
)

func buildPage(run *Run, acct *Account, opts ReportOptions, now time.Time) *reportPage {
	p := &reportPage{Run: run.Run, Generated: now.UTC().Format(time.RFC3339), D: acct}
	ax := timelineAxis(run)
	p.Figures = figures(run, acct, opts, ax)
	p.RunCommands, p.Problems, p.AllWell = attention(run, acct, opts, p.Figures.Stopped)
	p.Graph = layoutGraph(run)
	p.Timeline = layoutTimeline(run, ax)
	p.Nodes = nodeDetails(run, acct, opts, ax.start())
	p.Handovers, p.Temporal = opts.Handovers, opts.Temporal
	return p
}

// timelineAxis is the run's time axis: its sessions, widened to everything
// the run journaled.
func timelineAxis(run *Run) axis {
	lo, hi := run.Started, run.Finished
	for _, nd := range run.Nodes {
		for _, a := range nd.Attempts {
			lo = earlier(lo, a.Started)
			hi = later(hi, a.Started, a.Ended)
		}
		for _, r := range nd.Records {
			hi = later(hi, r.Time)
		}
	}
	for _, r := range run.Records {
		hi = later(hi, r.Time)
	}
	return newAxis(run.Sessions, lo, hi, tlLeft, tlWidth)
}

func figures(run *Run, acct *Account, opts ReportOptions, ax axis) runFigures {
	f := runFigures{Status: string(run.Status), Started: stamp(run.Started), Sessions: len(run.Sessions),
		RanMS: acct.WallMS, Ran: Clock(time.Duration(acct.WallMS) * time.Millisecond)}
	f.Stopped = run.stopped()
	if run.Status == journal.RunRunning && run.Abandoned {
		f.Status = "interrupted (its runner is gone)"
	}
	took := ax.end().Sub(ax.start())
	if n := len(run.Sessions); n > 0 {
		took = run.Sessions[n-1].To.Sub(run.Sessions[0].From)
	}
	// To the millisecond, as the account counts the time runners ran: a run
	// of one session reads the same twice.
	f.TookMS, f.Took = took.Milliseconds(), Clock(took.Truncate(time.Millisecond))
	var gaps []string
	for _, g := range runGaps(run, ax) {
		gaps = append(gaps, g.Label())
		f.GapMS += g.D().Milliseconds()
	}
	f.Gaps = strings.Join(gaps, ", ")
	return f
}

// runGap is a gap between sessions and how the session before it ended.
type runGap struct {
	axisPart
	Why string
}

// Label is the gap as the page names it: "interrupted 12m03s".
func (g runGap) Label() string { return g.Why + " " + Clock(g.D().Truncate(time.Millisecond)) }

func runGaps(run *Run, ax axis) []runGap {
	var out []runGap
	for _, g := range ax.gaps() {
		var before Span
		for _, s := range run.Sessions {
			if !s.To.After(g.From) {
				before = s
			}
		}
		out = append(out, runGap{g, gapWhy(run.Records, before)})
	}
	return out
}

// stamp is a wall time as the page prints it.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// attention finds what the operator must look at: the run's command to go
// on, and each node that did not complete for a reason of its own, with
// its error, verdict and the command that applies.
func attention(run *Run, acct *Account, opts ReportOptions, stopped bool) ([]command, []problem, string) {
	verdicts := map[string]string{}
	for _, n := range acct.Nodes {
		verdicts[n.ID] = n.Verdict.Text
	}
	var runCmds []command
	switch {
	case run.Status == journal.RunInterrupted:
		runCmds = append(runCmds, command{What: "resume", Line: opts.command("resume", run.ID),
			Why: "The run was interrupted. Continue it (what is still running at the provider is re-attached, not generated again)"})
	case run.Status == journal.RunRunning && run.Abandoned:
		runCmds = append(runCmds, command{What: "resume", Line: opts.command("resume", run.ID),
			Why: "The run's runner is gone (killed, or its machine lost) before it journaled an end. Continue it"})
	}
	skippedBy := map[string][]string{}
	completed, recovered := 0, 0
	for _, nd := range run.Nodes {
		if nd.State == journal.NodeCompleted {
			completed++
		}
		for _, r := range nd.Records {
			switch r.Code {
			case diagnostics.NodeSkipped:
				if cause, ok := diagnostics.KeyCause.Of(r.Record); ok {
					skippedBy[cause] = append(skippedBy[cause], nd.ID)
				}
			case diagnostics.Recovered:
				recovered++
			}
		}
	}
	var probs []problem
	for _, nd := range run.Nodes {
		switch nd.State {
		case journal.NodeFailed, journal.NodeAttention, journal.NodeCanceled:
		case journal.NodeRunning:
			if !stopped {
				continue
			}
		default:
			continue
		}
		pr := problem{Node: nd.ID, State: string(nd.State), Class: nd.ErrClass, Error: nd.Error, Reason: nd.Reason,
			Verdict: verdicts[nd.ID], Skipped: skippedBy[nd.ID]}
		if pr.Error == "" && len(nd.Attempts) > 0 {
			last := nd.Attempts[len(nd.Attempts)-1]
			pr.Class, pr.Error = last.ErrClass, last.Error
		}
		pr.Error, pr.ErrorTruncated = cut(pr.Error, 4000)
		if ref := nd.Detached(); ref != "" {
			pr.Commands = append(pr.Commands, command{What: "cancel", Line: opts.command("cancel", run.ID, nd.ID),
				Why: "Response " + ref + " keeps running at the provider, and billing, until it finishes; resuming re-attaches to it. To stop it instead"})
		}
		switch {
		case nd.State == journal.NodeAttention || refusedUnsafe(nd):
			pr.Commands = append(pr.Commands, command{What: "retry", Line: opts.command("resume", run.ID, "--retry", nd.ID),
				Why: "Its request may have had side effects, so it is not sent again by itself. Once you have checked what it did (its output below), run it anyway, from scratch"})
		case nd.State == journal.NodeFailed:
			pr.Commands = append(pr.Commands, command{What: "retry", Line: opts.command("resume", run.ID, "--retry", nd.ID),
				Why: "Once the cause is fixed, run it again from scratch (with a fresh retry budget)"})
		}
		probs = append(probs, pr)
	}
	allWell := ""
	if len(probs) == 0 && len(runCmds) == 0 {
		switch run.Status {
		case journal.RunCompleted:
			allWell = fmt.Sprintf("All %d nodes completed, %d of them after recovery (their verdicts are below).", completed, recovered)
			if completed == 1 {
				allWell = "The run's one node completed (its verdict is below)."
			}
		case journal.RunRunning:
			allWell = "The run is still running: this page is what the journal held when it was written."
		}
	}
	return runCmds, probs, allWell
}

// refusedUnsafe reports whether a node ended held because replaying it
// may repeat its side effects.
func refusedUnsafe(nd *Node) bool {
	out, ok := nd.Outcome()
	return ok && out.Code == diagnostics.UnsafeReplayRefused
}

// command is a noderun command line as the operator pastes it: every
// argument quoted for a POSIX shell where it needs it, and the journal named
// when it is not the default.
func (o ReportOptions) command(args ...string) string {
	parts := []string{"noderun"}
	for _, a := range args {
		parts = append(parts, shell.Quote(a))
	}
	switch {
	case o.Temporal != "":
		parts = append(parts, "--temporal", shell.Quote(o.Temporal))
	case o.DB != "":
		parts = append(parts, "--db", shell.Quote(o.DB))
	}
	return strings.Join(parts, " ")
}

// cut is s cut to at most n bytes, at a character boundary.
func cut(s string, n int) (string, bool) {
	if n < 0 || len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// layoutGraph places the nodes in columns by depth (longest path from a
// node that needs nothing), edges from each need.
func layoutGraph(run *Run) svgGraph {
	needs := map[string][]string{}
	if run.Graph != nil {
		for _, n := range run.Graph.Nodes {
			needs[n.ID] = n.Needs
		}
	}
	nodes := run.Nodes
	depth := map[string]int{}
	var depthOf func(id string, seen map[string]bool) int
	depthOf = func(id string, seen map[string]bool) int {
		if d, ok := depth[id]; ok {
			return d
		}
		if seen[id] {
			return 0
		}
		seen[id] = true
		d := 0
		for _, n := range needs[id] {
			d = max(d, depthOf(n, seen)+1)
		}
		depth[id] = d
		return d
	}
	const bw, bh, gx, gy, pad = 140, 34, 60, 18, 10
	rows := map[int]int{}
	pos := map[string]svgBox{}
	var g svgGraph
	for _, n := range nodes {
		d := depthOf(n.ID, map[string]bool{})
		b := svgBox{X: pad + d*(bw+gx), Y: pad + rows[d]*(bh+gy), W: bw, H: bh, ID: n.ID, State: string(n.State)}
		rows[d]++
		pos[n.ID] = b
		g.Boxes = append(g.Boxes, b)
		g.W = max(g.W, b.X+bw+pad)
		g.H = max(g.H, b.Y+bh+pad)
	}
	for _, n := range nodes {
		to := pos[n.ID]
		for _, need := range needs[n.ID] {
			from, ok := pos[need]
			if !ok {
				continue
			}
			g.Edges = append(g.Edges, svgEdge{from.X + from.W, from.Y + from.H/2, to.X, to.Y + to.H/2})
		}
	}
	return g
}

// markKind groups the records drawn on the timeline, by what their codes
// declare: faults, each means of recovery, and failures. An interruption is
// not a failure: the node stopped with its runner and a resume picks it up
// (the gap between the sessions shows the time in between).
func markKind(c diagnostics.Code) string {
	switch {
	case c == diagnostics.NodeResumed:
		return "resumed"
	case c == diagnostics.NodeCanceled, c == diagnostics.JournalUnavailable:
		return "interrupted"
	case c.Role == diagnostics.RoleFault:
		return "fault"
	case c.Role == diagnostics.RoleOutcome && c != diagnostics.Recovered && c != diagnostics.NodeSkipped:
		return "failure"
	case c.Role != diagnostics.RoleStep:
		return ""
	}
	switch c.Means {
	case diagnostics.ByReattach:
		return "reattach"
	case diagnostics.ByCheck, diagnostics.ByStatus:
		return "poll"
	case diagnostics.ByReconnect:
		return "reconnect"
	case diagnostics.ByRetry:
		return "retry"
	case diagnostics.ByContinue:
		return "continue"
	case diagnostics.ByCancel:
		return "cancel"
	}
	return ""
}

// layoutTimeline draws one row per node: its attempts cut into what a
// runner spent on them, their backoff waits and the stretches between
// sessions; the recovery diagnostics as marks; and a band for each gap.
func layoutTimeline(run *Run, ax axis) svgTimeline {
	x := func(t time.Time) int { return int(math.Round(ax.x(t))) }
	start := ax.start()
	tl := svgTimeline{W: tlLeft + tlWidth + 20, Took: Clock(ax.end().Sub(start))}
	tl.H = tlTop + len(run.Nodes)*tlRowH + 10
	for _, t := range ax.ticks(110) {
		tl.Ticks = append(tl.Ticks, svgTick{X: int(math.Round(t.X)), Label: t.Label})
	}
	for _, g := range runGaps(run, ax) {
		x0, x1 := int(math.Round(g.X0)), int(math.Round(g.X1))
		tl.Gaps = append(tl.Gaps, svgGap{X: x0, W: x1 - x0, Mid: (x0 + x1) / 2, Why: g.Why, Label: g.Label(), MS: g.D().Milliseconds(), FromISO: isoTime(g.From), ToISO: isoTime(g.To)})
	}
	for i, nd := range run.Nodes {
		rw := svgRow{Node: nd.ID, Y: tlTop + i*tlRowH}
		for k, a := range nd.Attempts {
			var next *journal.Attempt
			if k+1 < len(nd.Attempts) {
				next = &nd.Attempts[k+1].Attempt
			}
			rw.Attempts = append(rw.Attempts, attemptBar(a.Attempt, next, nd.Records, run.Sessions, x, run.stopped()))
		}
		for _, r := range nd.Records {
			kind := markKind(r.Code)
			if kind == "" {
				continue
			}
			title := fmt.Sprintf("%s at %s: %s", r.Code, offsetLabel(r.Time.Sub(start), time.Millisecond), r.Message)
			rw.Marks = append(rw.Marks, svgMark{X: x(r.Time), Code: r.Code.ID, Kind: kind, Title: oneLine(title, 300)})
		}
		tl.Rows = append(tl.Rows, rw)
	}
	return tl
}

// attemptBar draws an attempt: its segments, each at least a pixel wide
// (a wait two, so that every wait shows), and the attempt itself never
// narrower than a sliver.
func attemptBar(a journal.Attempt, next *journal.Attempt, recs []Record, sessions []Span, x func(time.Time) int, stopped bool) svgAttempt {
	span := attemptSpan(a, next, recs, sessions)
	segs := segments(span, waitsOf(recs, a.N, span, sessions), sessions)
	title := fmt.Sprintf("%s attempt %d (%s via %s): never ended (its runner stopped)", a.NodeID, a.N, a.Mode, a.Provider)
	if !a.Ended.IsZero() {
		title = fmt.Sprintf("%s attempt %d (%s via %s): %s, %s", a.NodeID, a.N, a.Mode, a.Provider, a.Outcome, Clock(a.Ended.Sub(a.Started)))
	}
	if a.Error != "" {
		title += " — " + oneLine(a.Error, 200)
	}
	bar := svgAttempt{N: a.N, Look: attemptLook(a, stopped), Mode: string(a.Mode), Outcome: outcomeWord(a, stopped), ErrClass: a.ErrClass,
		Ref: a.Ref, Title: title, StartISO: isoTime(a.Started), EndISO: isoTime(a.Ended)}
	for _, s := range segs {
		x1, x2 := x(s.From), x(s.To)
		seg := svgSeg{Kind: string(s.Kind), X: x1, W: x2 - x1, FromISO: isoTime(s.From), ToISO: isoTime(s.To)}
		switch {
		case s.Kind == segWait:
			d, _ := diagnostics.KeyDelay.Of(s.Wait.Record)
			seg.W = max(seg.W, 2)
			seg.Code, seg.Seq, seg.DelayMS = s.Wait.Code.ID, s.Wait.Seq, d.Milliseconds()
			seg.Title = fmt.Sprintf("backoff wait: %s before %s (%s %s; waited %s)", Clock(d), s.Wait.Code.Means, s.Wait.Code.ID,
				s.Wait.Code.Name, Clock(s.D()))
		case s.Kind == segDetached:
			seg.Title = fmt.Sprintf("no runner for %s: the attempt was picked up again after the gap", Clock(s.D()))
		}
		if seg.W < 1 {
			continue
		}
		bar.Segs = append(bar.Segs, seg)
	}
	if len(bar.Segs) == 0 { // shorter than a pixel: a sliver where it began
		bar.Segs = []svgSeg{{Kind: string(segRun), X: x(span.From), W: 2, FromISO: isoTime(span.From), ToISO: isoTime(span.To)}}
	}
	first := bar.Segs[0]
	bar.LabelX, bar.ShowLabel = first.X+3, first.Kind == string(segRun) && first.W > 24
	return bar
}

// attemptLook is how an attempt is drawn: completed, failed, interrupted
// (stopped with its runner, resumable: also one that never ended in a run
// that stopped, its runner killed), or running.
func attemptLook(a journal.Attempt, stopped bool) string {
	switch {
	case a.Outcome == journal.OutcomeOK:
		return "ok"
	case a.ErrClass == diagnostics.ClassCanceled, a.ErrClass == diagnostics.ClassJournal:
		return "interrupted"
	case a.Outcome == journal.OutcomeError:
		return "error"
	case stopped:
		return "interrupted"
	}
	return "running"
}

// outcomeWord is an attempt's outcome as the page says it: one that never
// ended in a run that stopped (its runner killed) was interrupted.
func outcomeWord(a journal.Attempt, stopped bool) string {
	if a.Outcome == journal.OutcomeRunning && stopped {
		return "interrupted"
	}
	return string(a.Outcome)
}

// stopped: nobody runs the run now (it ended, or its runner is gone).
func (r *Run) stopped() bool { return r.Standing() != journal.RunRunning }

// nodeDetails are each node's attempts, diagnostics and output.
func nodeDetails(run *Run, acct *Account, opts ReportOptions, start time.Time) []nodeDetail {
	verdicts := map[string]string{}
	for _, n := range acct.Nodes {
		verdicts[n.ID] = n.Verdict.Text
	}
	limit := opts.MaxOutput
	if limit == 0 {
		limit = DefaultMaxOutput
	}
	var out []nodeDetail
	for _, nd := range run.Nodes {
		d := nodeDetail{ID: nd.ID, State: string(nd.State), Verdict: verdicts[nd.ID]}
		switch nd.State {
		case journal.NodeFailed, journal.NodeAttention, journal.NodeCanceled:
			d.Open = true
		}
		for _, a := range nd.Attempts {
			row := attemptRow{N: a.N, Mode: string(a.Mode), Provider: a.Provider, Ref: a.Ref, At: offsetLabel(a.Started.Sub(start), time.Millisecond),
				Lasted: "never ended", Outcome: outcomeWord(a.Attempt, run.stopped()), Class: a.ErrClass, Error: oneLine(a.Error, 400)}
			if !a.Ended.IsZero() {
				row.Lasted = Clock(a.Ended.Sub(a.Started))
			}
			row.Tokens = fmt.Sprintf("%s in / %s out", Thousands(a.Usage.InputTokens), Thousands(a.Usage.OutputTokens))
			if a.Usage.Estimated {
				row.Tokens += " (est.)"
			}
			d.Attempts = append(d.Attempts, row)
		}
		for i, r := range nd.Records {
			if i == maxEvents {
				d.MoreEvents = len(nd.Records) - maxEvents
				d.EventsCmd = opts.command("events", run.ID, "--node", nd.ID, "--kind", "diagnostic")
				break
			}
			d.Events = append(d.Events, eventRow{Seq: r.Seq, At: offsetLabel(r.Time.Sub(start), time.Millisecond), Attempt: r.Attempt,
				Code: r.Code.ID, Name: r.Code.Name, Role: r.Code.Role.String(), Message: oneLine(r.Message, 600), Attrs: attrsText(r.Record)})
		}
		text, have := nd.Output, nd.State == journal.NodeCompleted
		d.OutputWhat = "Output"
		if !have && len(nd.Attempts) > 0 {
			text, have = nd.Partial, true
			d.OutputWhat = fmt.Sprintf("Partial output of attempt %d (the node did not complete)", nd.Attempts[len(nd.Attempts)-1].N)
		}
		switch {
		case !have:
			d.OutputWhat = "No output"
		case text == "":
			d.OutputWhat += ": nothing was journaled"
		}
		d.OutputBytes = len(text)
		d.Output, d.Cut = cut(text, limit)
		d.Shown = len(d.Output)
		if d.Cut {
			d.ShowCmd = opts.command("show", run.ID, nd.ID)
		}
		d.ThinkingBytes = len(nd.Thinking)
		if d.Thinking, d.ThinkingCut = cut(nd.Thinking, limit); d.ThinkingCut {
			d.ThinkingCmd = opts.command("show", run.ID, nd.ID, "--thinking")
		}
		out = append(out, d)
	}
	return out
}

// attrsText writes a record's attributes on one line, durations to the
// millisecond as `noderun events` does.
func attrsText(r diagnostics.Record) string {
	parts := make([]string, 0, len(r.Attrs))
	for _, a := range r.Attrs {
		v := a.Value.Resolve()
		s := v.String()
		if v.Kind() == slog.KindDuration {
			s = v.Duration().Round(time.Millisecond).String()
		}
		parts = append(parts, a.Key+"="+oneLine(s, 300))
	}
	return strings.Join(parts, " ")
}

// isoTime is t in RFC 3339 UTC, "" for zero.
func isoTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// oneLine folds whitespace and fits s to n columns by the one shortening
// rule (textfit.Text): the cause at its end and its codes stay.
func oneLine(s string, n int) string { return textfit.Text(s, n) }

func renderReport(w io.Writer, page *reportPage) error {
	funcs := template.FuncMap{
		"thousands": Thousands, "seconds": Seconds,
		"steps": func(m map[CodeName]int) string {
			var parts []string
			for _, k := range sortedKeys(m) {
				parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
			}
			return strings.Join(parts, ", ")
		},
		"usd": func(p *float64) string {
			if p == nil {
				return "–"
			}
			return fmt.Sprintf("$%.4f", *p)
		},
		"plus": func(a, b int) int { return a + b },
		"join": func(s []string) string { return strings.Join(s, ", ") },
	}
	t, err := template.New("report").Funcs(funcs).Parse(reportTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, page)
}
