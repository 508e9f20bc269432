package server

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/view"
)

// A run's events reach its watchers in two ways that meet without a gap or a
// duplicate: each watcher replays the journal from where it left off (its
// Last-Event-ID) by itself, and the run's hub, one poller shared by every
// watcher of the run, publishes what is committed after the watcher joined.
// A watcher joins the hub first, noting the last seq the hub had published,
// replays at least up to it, then takes the hub's batches, skipping any seq
// it has already sent. Seqs are gap-free per run and become visible in
// order, so this is exact.

// replayPage bounds one replay read (a long run's history is read in pages).
const replayPage = 1000

// Stats are what the server's event streams are doing.
type Stats struct {
	Runs     int // runs being watched (a poller each)
	Watchers int // event streams open
	// FellBehind counts the times, since New, a watcher fell Buffer events
	// behind the live feed and went back to reading the journal.
	FellBehind int64
	// FromMemory counts the watchers, since New, that joined a run's live
	// feed from the events its hub still held, reading nothing from the
	// journal.
	FromMemory int64
}

// Stats reads the server's figures now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Runs: len(s.hubs), FellBehind: s.behind.Load(), FromMemory: s.fromMemory.Load()}
	for _, h := range s.hubs {
		h.mu.Lock()
		st.Watchers += len(h.watchers)
		h.mu.Unlock()
	}
	return st
}

// statusEvery: a hub reads the run's status every this many polls (new
// events are what a watcher waits for; an ending can wait a little).
const statusEvery = 10

// writeTimeout bounds one write to a watcher: a client that stops reading is
// let go, and reconnects with Last-Event-ID.
const writeTimeout = 30 * time.Second

// hub polls one run's journal for new events and fans them out.
type hub struct {
	s     *Server
	runID string
	ctx   context.Context // its poller's
	stop  context.CancelFunc

	mu        sync.Mutex
	published int64 // the last seq published
	// recent are the latest frames published, in order: every event of the
	// run after seq floor, up to published. A watcher that joins after
	// floor starts from them instead of reading the journal: hundreds of
	// watchers that open at once (a page shared, a dashboard reloaded)
	// would otherwise each read and encode the run's history, and the
	// live events would wait behind those reads.
	recent   []frame
	floor    int64
	watchers map[*watcher]struct{}
	ended    *view.Run // set when the run ended: the end event's data
}

// watcher is one event stream's queue: batches the hub published, up to
// Buffer events, and a signal that more (or the end, or a drop) arrived.
type watcher struct {
	notify chan struct{} // capacity 1
	queue  []frame
	behind bool      // too far behind: off the live feed, it reads the journal
	end    *view.Run // the run ended after queue
}

// frame is one event as a stream sends it, encoded once for every watcher
// of the run (at hundreds of watchers, encoding per watcher would be most of
// the server's work).
type frame struct {
	seq        int64
	node, kind string
	b          []byte // "id: …\nevent: …\ndata: …\n\n"
}

// frameOf encodes a journal event as a stream sends it: id its seq, event
// its kind, data the line `noderun events --json` prints for it.
func frameOf(e journal.Event) (frame, error) {
	data, err := json.Marshal(view.EventOf(e))
	if err != nil {
		return frame{}, err
	}
	b := make([]byte, 0, len(data)+len(e.Kind)+40)
	b = fmt.Appendf(b, "id: %d\nevent: %s\ndata: ", e.Seq, e.Kind)
	b = append(append(b, data...), "\n\n"...)
	return frame{seq: e.Seq, node: e.NodeID, kind: e.Kind, b: b}, nil
}

// subscribe joins the run's hub, starting it when it is the first watcher;
// it returns the seq the watcher replays from the journal up to, at least.
// A watcher whose last event (after) the hub still holds in recent gets
// the rest from there, queued, and replays nothing.
func (s *Server) subscribe(runID string, after int64) (*hub, *watcher, int64, error) {
	for {
		s.mu.Lock()
		if err := s.ctx.Err(); err != nil {
			s.mu.Unlock()
			return nil, nil, 0, err
		}
		if h := s.hubs[runID]; h != nil {
			w, joined := h.join(after)
			s.mu.Unlock()
			return h, w, joined, nil
		}
		s.mu.Unlock()
		// The first watcher of the run: its hub reads the journal without
		// s.mu, so that the other runs' watchers come and go meanwhile. Of
		// two first watchers that race, one hub is kept.
		fresh, err := s.newHub(runID)
		if err != nil {
			return nil, nil, 0, err
		}
		s.mu.Lock()
		if s.hubs[runID] == nil {
			s.hubs[runID] = fresh
			go fresh.poll(fresh.ctx)
		} else {
			fresh.stop()
		}
		s.mu.Unlock()
	}
}

// join adds a watcher to the hub (under s.mu, so that it is not retired
// meanwhile) and returns the seq it replays from the journal up to.
func (h *hub) join(after int64) (*watcher, int64) {
	w := &watcher{notify: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers[w] = struct{}{}
	if after < h.floor {
		return w, h.published
	}
	h.s.fromMemory.Add(1)
	i, _ := slices.BinarySearchFunc(h.recent, after+1, func(f frame, seq int64) int { return cmp.Compare(f.seq, seq) })
	if i < len(h.recent) {
		w.queue = slices.Clone(h.recent[i:])
		w.signal()
	}
	return w, after
}

// newHub makes a run's hub, holding the run's latest events, so that the
// watchers that open with the first (a page shared, a dashboard) start
// from memory too. Its poller is not started.
func (s *Server) newHub(runID string) (*hub, error) {
	last, err := s.j.LastSeq(s.ctx, runID, "")
	if err != nil {
		return nil, err
	}
	floor := max(0, last-int64(max(s.opts.Buffer/4, 1)))
	evs, err := s.j.Events(s.ctx, runID, journal.EventFilter{AfterSeq: floor})
	if err != nil {
		return nil, err
	}
	recent := make([]frame, 0, len(evs))
	for _, e := range evs {
		if e.Seq > last {
			break // committed since LastSeq: the poller publishes it
		}
		f, err := frameOf(e)
		if err != nil {
			return nil, err
		}
		recent = append(recent, f)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	return &hub{s: s, runID: runID, ctx: ctx, stop: cancel, published: last, floor: floor, recent: recent, watchers: map[*watcher]struct{}{}}, nil
}

// keep adds published frames to recent, which holds between Buffer/4 and
// Buffer/2 of the latest: a watcher that starts from them still has half
// its buffer for what comes next.
func (h *hub) keep(frames []frame) {
	h.recent = append(h.recent, frames...)
	if n := max(h.s.opts.Buffer/4, 1); len(h.recent) > 2*n {
		drop := len(h.recent) - n
		h.floor = h.recent[drop-1].seq
		h.recent = slices.Clone(h.recent[drop:])
	}
}

// unsubscribe leaves the hub; the last watcher stops it.
func (s *Server) unsubscribe(h *hub, w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.mu.Lock()
	delete(h.watchers, w)
	empty := len(h.watchers) == 0
	h.mu.Unlock()
	if empty && s.hubs[h.runID] == h {
		delete(s.hubs, h.runID)
		h.stop()
	}
}

// poll reads the run's new events every Poll and publishes them, until the
// run has ended (then it publishes the end) or nobody watches.
func (h *hub) poll(ctx context.Context) {
	t := time.NewTicker(h.s.opts.Poll)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.read(ctx); err != nil {
			if ctx.Err() == nil {
				h.s.log.Warn("serve: reading the journal: "+err.Error(), slog.String("run", h.runID))
			}
			continue
		}
		if n%statusEvery != 0 {
			continue
		}
		r, err := h.s.j.Run(ctx, h.runID)
		if err != nil {
			continue
		}
		abandoned := h.s.j.Abandoned(r)
		if r.Status == journal.RunRunning && !abandoned {
			continue
		}
		// Events read before the status may predate the run's last ones
		// (NR402 is journaled just before the status): one more read.
		if err := h.read(ctx); err != nil {
			continue
		}
		end := view.RunOf(h.s.j, r) // a run whose runner is gone: interrupted
		h.finish(&end)
		return
	}
}

// read publishes what was committed since the last read.
func (h *hub) read(ctx context.Context) error {
	evs, err := h.s.j.Events(ctx, h.runID, journal.EventFilter{AfterSeq: h.published})
	if err != nil || len(evs) == 0 {
		return err
	}
	frames := make([]frame, 0, len(evs))
	for _, e := range evs {
		f, err := frameOf(e)
		if err != nil {
			return err
		}
		frames = append(frames, f)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.published = evs[len(evs)-1].Seq
	h.keep(frames)
	for w := range h.watchers {
		if w.behind || w.end != nil {
			continue // it reads the journal
		}
		if len(w.queue) > 0 && len(w.queue)+len(evs) > h.s.opts.Buffer {
			// Too far behind: off the live feed rather than hold the
			// journal's pace to its reader's or grow without bound; what it
			// missed is in the journal. (A watcher that took everything
			// takes a burst of any size.)
			w.behind, w.queue = true, nil
			h.s.behind.Add(1)
		} else {
			w.queue = append(w.queue, frames...)
		}
		w.signal()
	}
	return nil
}

// finish tells every watcher the run ended and retires the hub: a watcher
// that comes later gets a hub of its own, which finds the run ended.
func (h *hub) finish(end *view.Run) {
	h.s.mu.Lock()
	if h.s.hubs[h.runID] == h {
		delete(h.s.hubs, h.runID)
	}
	h.s.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = end
	for w := range h.watchers {
		w.end = end
		w.signal()
	}
}

func (w *watcher) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// rejoin puts a watcher that fell behind back on the live feed, its queue
// empty; it returns the seq the hub has published: the watcher reads the
// journal up to it.
func (h *hub) rejoin(w *watcher) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.behind, w.queue = false, nil
	w.signal() // the end, if it came meanwhile, is still to be read
	return h.published
}

// take returns what the hub queued for the watcher.
func (h *hub) take(w *watcher) (evs []frame, behind bool, end *view.Run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs, w.queue = w.queue, nil
	return evs, w.behind, w.end
}

// streamFilter is what a watcher asked for (?node=, ?kind=), and where it
// starts (Last-Event-ID, or ?after=).
type streamFilter struct {
	node  string
	kinds []string
	after int64
}

func (f streamFilter) match(e frame) bool {
	return (f.node == "" || e.node == f.node) && (len(f.kinds) == 0 || slices.Contains(f.kinds, e.kind))
}

// parseStreamFilter reads a stream's query and Last-Event-ID.
func parseStreamFilter(r *http.Request) (streamFilter, error) {
	q := r.URL.Query()
	f := streamFilter{node: q.Get("node")}
	for _, k := range q["kind"] {
		for _, k := range strings.Split(k, ",") {
			if !slices.Contains(view.EventKinds, k) {
				return f, fmt.Errorf("kind %q: not an event kind (the kinds: %s)", k, strings.Join(view.EventKinds, ", "))
			}
			f.kinds = append(f.kinds, k)
		}
	}
	from, what := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if from == "" {
		from, what = q.Get("after"), "after"
	}
	if from != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(from), 10, 64)
		if err != nil || n < 0 {
			return f, fmt.Errorf("%s %q: want the seq of the last event received (0 or more)", what, from)
		}
		f.after = n
	}
	return f, nil
}

// events streams a run's events as server-sent events: the journal's from
// the one after Last-Event-ID, then live ones as they are committed, then
// `end` once the run is no longer running.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	run, ok := s.run(w, r)
	if !ok {
		return
	}
	f, err := parseStreamFilter(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if f.node != "" {
		if _, err := view.FindNode(r.Context(), s.j, run.ID, f.node); err != nil {
			s.readErr(w, r, err)
			return
		}
	}
	rc := http.NewResponseController(w)
	h, wt, joined, err := s.subscribe(run.ID, f.after)
	if err != nil {
		s.readErr(w, r, err)
		return
	}
	defer s.unsubscribe(h, wt)

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: pass each event on as it comes
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{rc: rc, bw: bufio.NewWriterSize(w, 32<<10), last: f.after}
	fmt.Fprintf(sw.bw, "retry: %d\n\n", s.opts.Retry.Milliseconds())
	if err := sw.flush(); err != nil {
		return
	}

	ctx := r.Context()
	// replay reads the journal after the last event sent, at least up to
	// what the hub had published when the watcher (re)joined it.
	replay := func(upTo int64) error {
		for seen := sw.last; seen < upTo; {
			evs, err := s.j.Events(ctx, run.ID, journal.EventFilter{Node: f.node, Kinds: f.kinds, AfterSeq: seen, Limit: replayPage})
			if err != nil || len(evs) == 0 {
				return err
			}
			for _, e := range evs {
				if err := sw.event(e); err != nil {
					return err
				}
			}
			seen = evs[len(evs)-1].Seq
			if err := sw.flush(); err != nil {
				return err
			}
		}
		return nil
	}
	if replay(joined) != nil {
		return
	}

	keep := time.NewTimer(s.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-keep.C:
			// A comment line: no event, but bytes, so that no gateway
			// takes the stream for idle and cuts it.
			fmt.Fprint(sw.bw, ": keep-alive\n\n")
			if err := sw.flush(); err != nil {
				return
			}
			keep.Reset(s.opts.KeepAlive)
			continue
		case <-wt.notify:
		}
		evs, behind, end := h.take(wt)
		if behind {
			// What it missed is in the journal: it reads it there, at its
			// own pace, and joins the live feed again.
			if replay(h.rejoin(wt)) != nil {
				return
			}
			continue
		}
		wrote := false
		for _, e := range evs {
			if e.seq <= sw.last || !f.match(e) {
				continue
			}
			if err := sw.frame(e); err != nil {
				return
			}
			wrote = true
		}
		if end != nil {
			data, _ := json.Marshal(end)
			fmt.Fprintf(sw.bw, "event: end\ndata: %s\n\n", data)
			_ = sw.flush()
			return
		}
		if wrote {
			if err := sw.flush(); err != nil {
				return
			}
			keep.Reset(s.opts.KeepAlive)
		}
	}
}

// sseWriter writes events to one watcher.
type sseWriter struct {
	rc   *http.ResponseController
	bw   *bufio.Writer
	last int64 // the seq of the last event written: duplicates are skipped
}

// event writes one journal event (frameOf), once.
func (w *sseWriter) event(e journal.Event) error {
	if e.Seq <= w.last {
		return nil
	}
	f, err := frameOf(e)
	if err != nil {
		return err
	}
	return w.frame(f)
}

// frame writes an encoded event, once.
func (w *sseWriter) frame(f frame) error {
	if f.seq <= w.last {
		return nil
	}
	_, _ = w.bw.Write(f.b)
	w.last = f.seq
	if w.bw.Buffered() > 16<<10 {
		return w.flush()
	}
	return nil
}

func (w *sseWriter) flush() error {
	if err := w.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	return w.rc.Flush()
}
