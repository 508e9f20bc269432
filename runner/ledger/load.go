// Package ledger is the read side of a run's journal. Load reads a run — its
// nodes, their attempts and usage, and every diagnostic record, decoded
// with diagnostics.Decode — and AccountOf says what recovery did, saved and
// cost, in figures that add up (see Figures) and a verdict a node.
// WriteReport renders the same as one self-contained HTML page, WriteText as
// the text `noderun diagnose` prints.
//
// Everything in noderun that reports on recovery reads it here: the
// verdicts at the end of `noderun run` and `resume`, `noderun diagnose`,
// `noderun report`, the judge of `noderun chaos` and `status --temporal`;
// a Go program that embeds runner.Run gets the same figures (see the example).
package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/graph"
)

// Run is a journaled run, as Load reads it.
type Run struct {
	journal.Run
	// Graph is the run's graph as journaled, whatever kinds it uses: they
	// need not be registered to be read (graph.Options.AnyKind); or the
	// caller's own (LoadOptions.Graph). Nil only if its text no longer
	// parses (a journal of an older noderun whose graph language has since
	// changed).
	Graph *graph.Graph
	// Nodes are in the order the run registered them (graph order).
	Nodes []*Node
	// Records are the run-level records: started, resumed, finished, interrupted.
	Records []Record
	// Abandoned: the run says it is running but no live runner holds it (its
	// runner died): `noderun resume` continues it.
	Abandoned bool
	// Sessions are the stretches of time a runner was running the run: from
	// its start (or a resume) to its end, its interruption, or the last
	// thing it journaled before it died. Time between them is nobody's.
	Sessions []Span
}

// Standing is the run's status as it stands now (journal.Standing): a run
// whose runner is gone is interrupted.
func (r *Run) Standing() journal.RunStatus {
	if r.Abandoned {
		return journal.RunInterrupted
	}
	return r.Status
}

// Node is one node of a run.
type Node struct {
	journal.Node
	// Model is what the node's requests were priced by: the model its
	// attempts named ("sim" on the simulator).
	Model    string
	Attempts []Attempt
	// Records are the node's diagnostics, in journal order.
	Records []Record
	// Active is when a runner was working on the node: from its first
	// attempt to its outcome, within the run's sessions.
	Active []Span
	// Partial is what the journal holds of an unfinished node's last
	// attempt (what `noderun show` prints for it); "" for a completed node,
	// whose output is Output.
	Partial string
	// PartialBytes is len(Partial), also when LoadOptions.NoPartial left
	// Partial out.
	PartialBytes int
	// Thinking is the reasoning the node's last attempt streamed apart
	// from its output (thinking blocks, thought or reasoning summaries);
	// read only with LoadOptions.Thinking.
	Thinking string
}

// Attempt is one request (or re-attachment) of a node, with what it cost.
type Attempt struct {
	journal.Attempt
	Usage journal.Usage
	// UsageRecorded is false for an attempt whose runner died before it
	// ended: its usage is then estimated from the output its journal holds.
	UsageRecorded bool
}

// Record is a diagnostic as journaled: where and when, and the typed record.
type Record struct {
	diagnostics.Record
	Node    string // "" for the run's own
	Attempt int
	Seq     int64
	Time    time.Time
	// NextData is when the node's next output (or reasoning) chunk was
	// journaled after this record, for a fault: the end of the time it
	// lost. Zero when none was, and on records of a load without faults,
	// which does not read the chunks (Run.events).
	NextData time.Time
}

// Span is a stretch of time.
type Span struct{ From, To time.Time }

// D is the span's length (0 for an empty or inverted one).
func (s Span) D() time.Duration { return max(s.To.Sub(s.From), 0) }

// LoadOptions are the options of Load.
type LoadOptions struct {
	// Thinking also rebuilds each node's thinking (Node.Thinking): what the
	// report shows, and nothing else needs (one more query a node).
	Thinking bool
	// NoPartial leaves Node.Partial out (PartialBytes still says its
	// size): an account that shows sizes, not the text, reads no chunk's
	// text (the run's closing summary after a 32 MiB answer).
	NoPartial bool
	// NoOutput leaves a completed node's Output out (empty): a caller that
	// holds the outputs (a run's result, view.ResultFrom) or shows only
	// figures need not read them all again.
	NoOutput bool
	// Graph is the run's graph when the caller holds it (the runner that
	// ran it): Load then does not parse the journaled text again, which at
	// 1,000 nodes was a fifth of the CPU of a run's closing account. It
	// must be the graph the run was started with.
	Graph *graph.Graph
	// everything reads every data event, as a load of a faulted run does
	// (a test checks that leaving them out changes no figure).
	everything bool
	// ordered reads a finished run's nodes before the rest, as a running
	// run's are (a test checks that reading them side by side changes
	// nothing).
	ordered bool
}

// Load reads run runID from j. It reads only; it runs beside a live runner.
func Load(ctx context.Context, j *journal.Journal, runID string, opts LoadOptions) (*Run, error) {
	jr, err := j.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	run := &Run{Run: jr, Abandoned: j.Abandoned(jr), Graph: opts.Graph}
	var wg sync.WaitGroup // the graph is parsed while the nodes are read
	if run.Graph == nil {
		wg.Go(func() {
			if g, err := graph.ParseWith(jr.GraphPath, jr.GraphText, graph.Options{AnyKind: true}); err == nil {
				run.Graph = g
			}
		})
	}
	// A run that completed or failed changes no more and has every node
	// settled (Run.events then needs its records, never all its data
	// first), so its reads need no order: its attempts and records are read
	// beside its nodes, not after them (the account a run closes with
	// waits for them). Any other run's are read after its nodes, as they
	// stood then: a running one's may change, and an interrupted one's
	// unsettled nodes make Run.events read everything instead.
	var pre *prefetch
	if (jr.Status == journal.RunCompleted || jr.Status == journal.RunFailed) && !opts.ordered {
		pre = run.prefetch(ctx, j, &wg)
	}
	readNodes := j.Nodes
	if opts.NoOutput {
		readNodes = j.NodeStates
	}
	nodes, err := readNodes(ctx, runID)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	for i := range nodes { // as they stand: interrupted where the runner died
		nodes[i].State = journal.NodeStanding(nodes[i].State, run.Abandoned)
	}
	if err := run.load(ctx, j, nodes, "", opts, pre); err != nil {
		return nil, err
	}
	return run, nil
}

// prefetch is what Load read of a finished run beside its nodes: its
// attempts, and its records without data (Run.events' first read), decoded.
type prefetch struct {
	atts       []journal.Attempt
	attErr     error
	records    []journal.Event
	recordsErr error
	// decoded holds the records' diagnostics by seq, usage what their
	// usage events say (journal.UsageOf); each nil when one of them did
	// not decode, which the load that follows then reports.
	decoded map[int64]diagnostics.Record
	usage   map[string]map[int]journal.Usage
}

// prefetch starts reading the run's attempts and records on wg, and
// decoding the records as soon as they are read: the payloads' JSON is
// most of a wide run's account (2,000 records at 1,000 nodes), and decoded
// here it takes the other core while the nodes are read, not the time
// after.
func (run *Run) prefetch(ctx context.Context, j *journal.Journal, wg *sync.WaitGroup) *prefetch {
	p := &prefetch{}
	wg.Go(func() { p.atts, p.attErr = j.Attempts(ctx, run.ID, "") })
	wg.Go(func() {
		if p.records, p.recordsErr = run.readEvents(ctx, j, "", recordKinds); p.recordsErr != nil {
			return
		}
		wg.Go(func() { p.usage, _ = journal.UsageOf(p.records) }) // wg counts this goroutine still: Add is allowed
		decoded := make(map[int64]diagnostics.Record, len(p.records))
		for _, e := range p.records {
			if e.Kind != journal.KindDiagnostic {
				continue
			}
			d, err := diagnostics.Decode(e.Payload)
			if err != nil {
				return
			}
			decoded[e.Seq] = d
		}
		p.decoded = decoded
	})
	return p
}

// LoadNode reads one node of run runID: its attempts, usage and records,
// without the rest of the run (a Temporal worker reports on the node it
// ran). The node's active time is its own, not clipped to the run's
// sessions, which LoadNode does not read.
func LoadNode(ctx context.Context, j *journal.Journal, runID, nodeID string) (*Node, error) {
	jr, err := j.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	g, err := graph.Parse(jr.GraphPath, jr.GraphText)
	if err != nil {
		g = nil
	}
	return LoadNodeOf(ctx, j, g, runID, nodeID)
}

// LoadNodeOf is LoadNode for a caller that holds the run's graph g (nil:
// none), such as a runner reporting each node as it settles: it reads
// neither the run nor its graph again, which for a wide graph would cost a
// parse of the whole graph per node.
func LoadNodeOf(ctx context.Context, j *journal.Journal, g *graph.Graph, runID, nodeID string) (*Node, error) {
	n, err := j.Node(ctx, runID, nodeID)
	if err != nil {
		return nil, err
	}
	run := &Run{Run: journal.Run{ID: runID}, Graph: g}
	if err := run.load(ctx, j, []journal.Node{n}, nodeID, LoadOptions{}, nil); err != nil {
		return nil, err
	}
	return run.Nodes[0], nil
}

// load reads nodes' attempts and events (of one node when only is set),
// and their thinking when asked.
func (run *Run) load(ctx context.Context, j *journal.Journal, nodes []journal.Node, only string, opts LoadOptions, pre *prefetch) error {
	runID := run.ID
	byID := make(map[string]*Node, len(nodes))
	for _, n := range nodes {
		nd := &Node{Node: n}
		run.Nodes = append(run.Nodes, nd)
		byID[n.ID] = nd
	}
	var atts []journal.Attempt
	var attErr error
	var wg sync.WaitGroup // side by side: an account is waited for
	if pre != nil {
		atts, attErr = pre.atts, pre.attErr
	} else {
		wg.Go(func() { atts, attErr = j.Attempts(ctx, runID, only) })
	}
	evs, decoded, err := run.events(ctx, j, nodes, only, opts.everything, pre)
	wg.Wait()
	if err = cmp.Or(attErr, err); err != nil {
		return err
	}
	// An attempt ended twice (interrupted, then continued by a resume)
	// keeps its last figure, which covers the whole attempt.
	// A finished run's usage events are the same in its records as in all
	// its events: what prefetch decoded serves whichever events() read.
	var usage map[string]map[int]journal.Usage
	if pre != nil {
		usage = pre.usage
	}
	if usage == nil {
		if usage, err = journal.UsageOf(evs); err != nil {
			return fmt.Errorf("run %s: %w", runID, err)
		}
	}
	// The usage events, read with the others, are not the node's doings:
	// they leave its last event and the run's sessions as they were.
	evs = slices.DeleteFunc(evs, func(e journal.Event) bool { return e.Kind == journal.KindUsage })
	for _, a := range atts {
		if nd := byID[a.NodeID]; nd != nil {
			u, ok := usage[a.NodeID][a.N]
			nd.Attempts = append(nd.Attempts, Attempt{Attempt: a, Usage: u, UsageRecorded: ok})
		}
	}
	last := map[string]time.Time{} // a node's last event
	waiting := map[string][]int{}  // a node's records that wait for its next data
	var runEnd time.Time           // the last event of the run
	var starts, ends []Record      // the run's session boundaries
	for _, e := range evs {
		runEnd = later(runEnd, e.Time)
		nd := byID[e.NodeID]
		if nd != nil {
			last[e.NodeID] = e.Time
		}
		switch e.Kind {
		case journal.KindDiagnostic:
			d, ok := decoded[e.Seq]
			if !ok {
				var err error
				if d, err = diagnostics.Decode(e.Payload); err != nil {
					return fmt.Errorf("run %s: event %d: %w", runID, e.Seq, err)
				}
			}
			rec := Record{Record: d, Node: e.NodeID, Attempt: e.Attempt, Seq: e.Seq, Time: e.Time}
			if nd == nil {
				run.Records = append(run.Records, rec)
				switch d.Code {
				case diagnostics.RunStarted:
					starts = append(starts, rec)
				case diagnostics.RunFinished, diagnostics.RunInterrupted:
					ends = append(ends, rec)
				}
				continue
			}
			nd.Records = append(nd.Records, rec)
			waiting[e.NodeID] = append(waiting[e.NodeID], len(nd.Records)-1)
		case journal.KindDelta, journal.KindReasoning:
			if nd == nil {
				continue
			}
			for _, i := range waiting[e.NodeID] {
				nd.Records[i].NextData = e.Time
			}
			waiting[e.NodeID] = waiting[e.NodeID][:0]
		}
	}
	if only == "" {
		run.Sessions = sessions(run.Run, starts, ends, evs, runEnd)
	}
	for _, nd := range run.Nodes {
		if err := run.finishNode(ctx, j, nd, last[nd.ID], opts); err != nil {
			return err
		}
	}
	return nil
}

// events reads the diagnostics, output, reasoning and usage events load
// needs, in one walk of the rows. The data events give a fault record the
// time the node's data came back (NextData), a node its last event, and a
// session its runner never ended (killed) its last: of nodes that all
// settled without a fault, in sessions that all ended, they add nothing
// the ends do not give (a node's last chunk came before it finished), and
// reading back every chunk streamed was most of what accounting cost: a
// node of 300 chunks is 300 rows, a run of 10,000 such nodes 3 million. Such
// a run (or node) is read without them. The diagnostics decoded to find
// that out come back by seq, for load not to decode them again.
func (run *Run) events(ctx context.Context, j *journal.Journal, nodes []journal.Node, only string, everything bool, pre *prefetch) ([]journal.Event, map[int64]diagnostics.Record, error) {
	readAll := func(decoded map[int64]diagnostics.Record) ([]journal.Event, map[int64]diagnostics.Record, error) {
		evs, err := run.readEvents(ctx, j, only, allKinds)
		return evs, decoded, err
	}
	if everything {
		return readAll(nil)
	}
	for _, n := range nodes {
		if !settled(n.State) || n.Finished.IsZero() {
			return readAll(nil)
		}
	}
	var some []journal.Event
	var err error
	var pred map[int64]diagnostics.Record // decoded by prefetch
	if pre != nil {
		some, err, pred = pre.records, pre.recordsErr, pre.decoded
	} else {
		some, err = run.readEvents(ctx, j, only, recordKinds)
	}
	if err != nil {
		return nil, nil, err
	}
	decoded := pred
	if decoded == nil {
		decoded = make(map[int64]diagnostics.Record, len(some))
	}
	var starts, ends []int64 // the run's sessions, by their records' seqs
	for _, e := range some {
		if e.Kind != journal.KindDiagnostic {
			continue
		}
		d, ok := pred[e.Seq]
		if !ok {
			if d, err = diagnostics.Decode(e.Payload); err != nil {
				return readAll(decoded) // load reports the error
			}
			decoded[e.Seq] = d
		}
		if d.Code.IsFault() {
			return readAll(decoded)
		}
		switch {
		case e.NodeID != "":
		case d.Code == diagnostics.RunStarted:
			starts = append(starts, e.Seq)
		case d.Code == diagnostics.RunFinished || d.Code == diagnostics.RunInterrupted:
			ends = append(ends, e.Seq)
		}
	}
	if only == "" && !sessionsEnded(starts, ends) {
		return readAll(decoded)
	}
	return some, decoded, nil
}

// The kinds of event load reads: every one (allKinds), or the records
// without data (recordKinds).
var (
	allKinds    = []string{journal.KindDiagnostic, journal.KindUsage, journal.KindDelta, journal.KindReasoning}
	recordKinds = []string{journal.KindDiagnostic, journal.KindUsage}
)

// readEvents reads the run's events of kinds (of node only when set),
// without the data events' text.
func (run *Run) readEvents(ctx context.Context, j *journal.Journal, only string, kinds []string) ([]journal.Event, error) {
	return j.Events(ctx, run.ID, journal.EventFilter{Node: only, AfterSeq: -1, Kinds: kinds, NoText: true})
}

// sessionsEnded: there were sessions, and each start (seqs ascending) has
// an end before the next start.
func sessionsEnded(starts, ends []int64) bool {
	if len(starts) == 0 {
		return false // a journal from before NR401: its end is its last event
	}
	for i, s := range starts {
		next := int64(1<<62 - 1)
		if i+1 < len(starts) {
			next = starts[i+1]
		}
		if !slices.ContainsFunc(ends, func(e int64) bool { return e > s && e < next }) {
			return false
		}
	}
	return true
}

// finishNode estimates what an unended attempt streamed, finds the node's
// model, and places it in the run's sessions.
func (run *Run) finishNode(ctx context.Context, j *journal.Journal, nd *Node, lastEvent time.Time, opts LoadOptions) error {
	for i := range nd.Attempts {
		a := &nd.Attempts[i]
		if nd.Model == "" && a.UsageRecorded {
			nd.Model = a.Usage.Model
		}
		last := i == len(nd.Attempts)-1 && nd.State != journal.NodeCompleted
		if a.UsageRecorded && !last {
			continue
		}
		// One count serves both: an unfinished attempt's size, and, when
		// its runner died before the attempt ended, what it streamed,
		// counted a token a chunk.
		st, err := j.Streamed(ctx, run.ID, nd.ID, a.N)
		if err != nil {
			return err
		}
		if last {
			nd.PartialBytes = st.Bytes
			if !opts.NoPartial {
				if nd.Partial, err = j.RebuildOutput(ctx, run.ID, nd.ID, a.N); err != nil {
					return err
				}
			}
		}
		if !a.UsageRecorded {
			a.Usage = journal.Usage{OutputTokens: st.Chunks, StreamedTokens: st.Chunks, Estimated: true}
		}
	}
	if n := len(nd.Attempts); opts.Thinking && n > 0 {
		th, err := j.RebuildReasoning(ctx, run.ID, nd.ID, nd.Attempts[n-1].N)
		if err != nil {
			return err
		}
		nd.Thinking = th
	}
	if nd.Model == "" {
		nd.Model = run.modelOf(nd.ID)
	}
	if len(nd.Attempts) == 0 && !nd.ranWithoutAttempts() {
		return nil // never ran (skipped, or never reached): no time of its own
	}
	from := nd.Started
	if len(nd.Attempts) > 0 {
		from = earlier(from, nd.Attempts[0].Started)
	}
	for _, r := range nd.Records {
		if r.Code == diagnostics.QuotaWait { // the node waited for quota before it started: its time too
			waited, _ := diagnostics.KeyWaited.Of(r.Record)
			from = earlier(from, r.Time.Add(-waited))
		}
	}
	to := lastEvent
	if settled(nd.State) && !nd.Finished.IsZero() {
		to = later(to, nd.Finished)
	}
	for _, a := range nd.Attempts {
		to = later(to, a.Ended)
	}
	nd.Active = clip(Span{from, to}, run.Sessions)
	return nil
}

// ranWithoutAttempts: a node that made no request still took a runner's
// time when it waited for quota before its first, or was answered from the
// cache. A skipped node, or one its run never reached, did not run.
func (nd *Node) ranWithoutAttempts() bool {
	for _, r := range nd.Records {
		if r.Code == diagnostics.QuotaWait || r.Code == diagnostics.CacheHit {
			return true
		}
	}
	return false
}

// modelOf is the model a node is priced by when no attempt recorded one
// (journals written before usage named it): the node's, else its
// provider's, and "sim" for the simulator, as the runner calls it.
func (run *Run) modelOf(id string) string {
	if run.Graph == nil {
		return ""
	}
	n := run.Graph.Node(id)
	if n == nil {
		return ""
	}
	if n.Model != "" {
		return n.Model
	}
	if p := run.Graph.Providers[n.Provider]; p != nil {
		if p.Model != "" {
			return p.Model
		}
		if p.Kind == graph.ProviderKindSim {
			return "sim"
		}
	}
	return ""
}

// sessions are the stretches a runner ran the run: each start (or resume)
// to the end or interruption that follows it, or to the last event before
// the next start when the runner died (kill -9, a lost machine).
func sessions(r journal.Run, starts, ends []Record, evs []journal.Event, runEnd time.Time) []Span {
	if len(starts) == 0 { // a journal from before NR401, or a run that never started
		if r.Started.IsZero() {
			return nil
		}
		return []Span{{r.Started, later(runEnd, r.Finished)}}
	}
	var out []Span
	for i, s := range starts {
		from := s.Time
		if i == 0 {
			from = earlier(from, r.Started)
		}
		nextSeq := int64(1<<62 - 1)
		if i+1 < len(starts) {
			nextSeq = starts[i+1].Seq
		}
		to := time.Time{}
		for _, e := range ends {
			if e.Seq > s.Seq && e.Seq < nextSeq {
				to = e.Time
				break
			}
		}
		if to.IsZero() { // died, or still running: its last event
			k, _ := slices.BinarySearchFunc(evs, nextSeq, func(e journal.Event, seq int64) int { return cmp.Compare(e.Seq, seq) })
			if k > 0 {
				to = evs[k-1].Time
			}
			if i+1 == len(starts) && !r.Finished.IsZero() {
				to = later(to, r.Finished)
			}
		}
		out = append(out, Span{from, later(to, from)})
	}
	return out
}

// clip is s within the sessions.
func clip(s Span, sessions []Span) []Span {
	if len(sessions) == 0 {
		if s.D() > 0 {
			return []Span{s}
		}
		return nil
	}
	var out []Span
	for _, ss := range sessions {
		c := Span{later(s.From, ss.From), earlier(s.To, ss.To)}
		if c.D() > 0 {
			out = append(out, c)
		}
	}
	return out
}

func settled(s journal.NodeState) bool {
	switch s {
	case journal.NodeCompleted, journal.NodeFailed, journal.NodeSkipped, journal.NodeCanceled, journal.NodeAttention:
		return true
	}
	return false
}

func later(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// earlier is the earliest of the non-zero times.
func earlier(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if !u.IsZero() && (t.IsZero() || u.Before(t)) {
			t = u
		}
	}
	return t
}
