package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sse"
	"github.com/noderun/noderun/server"
)

// A watcher cut at every event boundary of a recorded run (the demo: cut
// streams continued, a response re-attached) and reconnected with
// Last-Event-ID receives exactly `noderun events --json`, then end.
func TestStreamResumesAtEveryBoundary(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	res := runGraph(t, context.Background(), db, "../testdata/graphs/demo.yaml")
	want := eventsJSON(t, db, res.RunID)
	if len(want) < 50 {
		t.Fatalf("the demo journaled %d events: too few to mean anything", len(want))
	}
	ts, _ := serve(t, db, server.Options{})
	url := ts.URL + "/api/runs/" + res.RunID + "/events"
	ctx := context.Background()
	for k := 0; k <= len(want); k++ {
		// The first connection is cut after k events...
		resp, r := watch(t, ctx, url, "")
		var got []sseEvent
		for len(got) < k {
			ev, err := next(t, r)
			if err != nil || ev.Type == "end" {
				t.Fatalf("cut %d: the first connection ended after %d events (%v)", k, len(got), err)
			}
			got = append(got, ev)
		}
		resp.Body.Close()
		// ... the second resumes from the last event it received.
		last := ""
		if k > 0 {
			last = got[k-1].ID
		}
		resp, r = watch(t, ctx, url, last)
		rest, end := readToEnd(t, r)
		resp.Body.Close()
		sameEvents(t, fmt.Sprintf("cut after %d", k), append(got, rest...), want)
		if end.Data["status"] != "completed" || end.Data["run_id"] != res.RunID {
			t.Fatalf("end: %v", end.Data)
		}
	}
	// ?after= is the same as the header (a client that cannot set one).
	resp, r := watch(t, ctx, url+"?after="+strconv.Itoa(len(want)/2), "")
	rest, _ := readToEnd(t, r)
	resp.Body.Close()
	sameEvents(t, "?after", rest, want[len(want)/2:])
	// The filters are the CLI's.
	resp, r = watch(t, ctx, url+"?node=plan&kind=diagnostic", "")
	rest, _ = readToEnd(t, r)
	resp.Body.Close()
	sameEvents(t, "?node&kind", rest, eventsJSON(t, db, res.RunID, "--node", "plan", "--kind", "diagnostic"))
}

// A watcher of a run that is going, cut at random byte offsets (mid-event
// too) and reconnected by the id of the last whole event it got, ends with
// exactly the run's events; so does one that never was cut.
func TestStreamFollowsALiveRunThroughCuts(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	graph := writeFile(t, "slow.yaml", slowGraph)
	// The run, in a process of its own, so the server reads what another
	// process commits.
	p := child(t, "run", "--db", db, graph)
	waitFor(t, "the run to be journaled", 20*time.Second, func() bool { return fileExists(db) })
	ts, srv := serve(t, db, server.Options{})
	var runID string
	waitFor(t, "the run", 20*time.Second, func() bool {
		var runs struct {
			Runs []struct {
				RunID string `json:"run_id"`
			}
		}
		if getJSON(t, ts.URL+"/api/runs", "", &runs) == http.StatusOK && len(runs.Runs) == 1 {
			runID = runs.Runs[0].RunID
		}
		return runID != ""
	})
	url := ts.URL + "/api/runs/" + runID + "/events"
	ctx := context.Background()

	whole := make(chan []sseEvent, 1)
	go func() {
		resp, r := watch(t, ctx, url, "")
		defer resp.Body.Close()
		evs, _ := readToEnd(t, r)
		whole <- evs
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	var got []sseEvent
	cuts := 0
	for {
		last := ""
		if len(got) > 0 {
			last = got[len(got)-1].ID
		}
		resp, _ := watch(t, ctx, url, last)
		// Cut this connection after a random number of bytes: a few of
		// the run's ~40 events (rows of up to 16 tokens, a few hundred
		// bytes on the wire each).
		limit := int64(100 + rng.IntN(800))
		r := sseReaderOf(io.LimitReader(resp.Body, limit))
		ended := false
		for {
			ev, err := next(t, r)
			if err != nil {
				break // cut: the event in flight, if any, is dropped
			}
			if ev.Type == "end" {
				ended = true
				break
			}
			got = append(got, ev)
		}
		resp.Body.Close()
		if ended {
			break
		}
		cuts++
		if cuts > 5000 {
			t.Fatal("the stream never ended")
		}
	}
	if err := p.wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, p.out.String())
	}
	want := eventsJSON(t, db, runID)
	t.Logf("%d events, %d cuts", len(want), cuts)
	if cuts < 10 {
		t.Errorf("only %d cuts", cuts)
	}
	sameEvents(t, "cut watcher", got, want)
	sameEvents(t, "whole watcher", <-whole, want)
	// While the whole watcher kept the run's hub, the cut one came back
	// from the events the hub held (not the journal), as it does when
	// its cut was recent.
	if st := srv.Stats(); st.FromMemory < int64(cuts)/2 {
		t.Errorf("%d of %d reconnections joined from the hub's recent events", st.FromMemory, cuts)
	}
}

// Every way a run stops ends its stream with end and the run's status:
// completed, failed, interrupted (SIGTERM), and a runner killed -9 (its run
// says running in the journal; the server reads that its runner is gone).
// A watcher that connects later gets the replay, then end.
func TestEndForEveryEnding(t *testing.T) {
	t.Parallel()
	failing := `name: failing
profile: ci
cache: false
providers:
  chat:
    kind: sim
    api: chat
    sim:
      tokens: 20
      faults:
        - {node: a, endpoint: chat, kind: status, status: 400}
nodes:
  - {id: a, provider: chat, prompt: hi}
  - {id: b, provider: chat, needs: [a], prompt: hi}
`
	cases := []struct {
		name   string
		graph  string
		stop   func(*testing.T, *proc)
		status string
	}{
		{"completed", slowGraph, nil, "completed"},
		{"failed", failing, nil, "failed"},
		{"interrupted", slowGraph, func(t *testing.T, p *proc) { p.signal(t, syscall.SIGTERM) }, "interrupted"},
		{"killed", slowGraph, func(t *testing.T, p *proc) { p.signal(t, syscall.SIGKILL) }, "interrupted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "j.db")
			p := child(t, "run", "--db", db, writeFile(t, "g.yaml", c.graph))
			waitFor(t, "the journal", 20*time.Second, func() bool { return fileExists(db) })
			ts, _ := serve(t, db, server.Options{})
			runID := lastRun(t, ts.URL)
			resp, r := watch(t, context.Background(), ts.URL+"/api/runs/"+runID+"/events", "")
			defer resp.Body.Close()
			if c.stop != nil {
				// Stop it mid-stream: once node a has streamed.
				for {
					ev, err := next(t, r)
					if err != nil {
						t.Fatal(err)
					}
					if ev.Type == "delta" {
						break
					}
				}
				c.stop(t, p)
			}
			done := make(chan sseEvent, 1)
			go func() {
				_, end := readToEnd(t, r)
				done <- end
			}()
			var end sseEvent
			select {
			case end = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("no end event 30 s on")
			}
			if end.Data["status"] != c.status {
				t.Errorf("end says %v, want %s", end.Data["status"], c.status)
			}
			// Later: the replay, then end at once.
			resp2, r2 := watch(t, context.Background(), ts.URL+"/api/runs/"+runID+"/events", "")
			defer resp2.Body.Close()
			evs, end2 := readToEnd(t, r2)
			if end2.Data["status"] != c.status || len(evs) == 0 {
				t.Errorf("a later watcher: %d events, end %v", len(evs), end2.Data)
			}
			if c.name == "killed" {
				// Its node: interrupted, no runner alive, its events replayable.
				var st server.StreamStatus
				getJSON(t, ts.URL+"/api/runs/"+runID+"/nodes/a/stream/status", "", &st)
				if st.Active || st.RunnerAlive || !st.ReplayAvailable || st.State != "canceled" || st.LastEventID == 0 {
					t.Errorf("stream status of a killed run's node: %+v", st)
				}
			}
		})
	}
}

// The stream status of a node across its run's life: pending (nothing to
// replay), streaming (active, its runner alive), completed (replayable up
// to its last event, no runner).
func TestStreamStatusAcrossARun(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	p := child(t, "run", "--db", db, writeFile(t, "g.yaml", slowGraph))
	waitFor(t, "the journal", 20*time.Second, func() bool { return fileExists(db) })
	ts, _ := serve(t, db, server.Options{})
	runID := lastRun(t, ts.URL)
	status := func(node string) server.StreamStatus {
		var st server.StreamStatus
		if code := getJSON(t, ts.URL+"/api/runs/"+runID+"/nodes/"+node+"/stream/status", "", &st); code != http.StatusOK {
			t.Fatalf("stream status: %d", code)
		}
		return st
	}
	var a, b server.StreamStatus
	// (running but before its first event is journaled, a node is active
	// with nothing to replay yet)
	waitFor(t, "node a streaming", 20*time.Second, func() bool { a, b = status("a"), status("b"); return a.Active && a.LastEventID > 0 })
	if !a.RunnerAlive || !a.ReplayAvailable || a.State != "running" || a.LastEventID == 0 {
		t.Errorf("a streaming: %+v", a)
	}
	if b.Active || b.ReplayAvailable || b.State != "pending" || !b.RunnerAlive || b.LastEventID != 0 {
		t.Errorf("b waiting for a: %+v", b)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, p.out.String())
	}
	rj, err := journal.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer rj.Close()
	for _, n := range []string{"a", "b"} {
		st := status(n)
		last, err := rj.LastSeq(context.Background(), runID, n)
		if err != nil {
			t.Fatal(err)
		}
		if st.Active || st.RunnerAlive || !st.ReplayAvailable || st.State != "completed" || st.LastEventID != last {
			t.Errorf("%s completed: %+v (its last event is %d)", n, st, last)
		}
	}
}

// A watcher that stops reading leaves the live feed once it is Buffer
// events behind (its queue never grows past that), without holding up the
// run or the other watchers, which get every event; when it reads again it
// catches up from the journal and ends with every event too.
func TestASlowWatcherFallsBehindAndCatchesUp(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	graph := writeFile(t, "g.yaml", `name: fast
cache: false
providers:
  chat: {kind: sim, api: chat, sim: {tokens: 12000, tokens_per_second: 4000}}
nodes:
  - {id: a, provider: chat, prompt: hi}
  - {id: b, provider: chat, prompt: hello}
  - {id: c, provider: chat, prompt: hey}
  - {id: d, provider: chat, prompt: hallo}
`) // 3,000 events (rows of 16 tokens), ~1 MB: more than the sockets hold
	p := child(t, "run", "--db", db, graph)
	waitFor(t, "the journal", 20*time.Second, func() bool { return fileExists(db) })
	ts, srv := serveBuffered(t, db, server.Options{Buffer: 256}, 8<<10)
	runID := lastRun(t, ts.URL)
	url := ts.URL + "/api/runs/" + runID + "/events"
	// The slow one reads nothing for now: the socket's buffers fill, then
	// its queue.
	slow := rawWatch(t, ts.Listener.Addr().String(), "/api/runs/"+runID+"/events")
	defer slow.Close()
	resp, r := watch(t, context.Background(), url, "")
	got, _ := readToEnd(t, r)
	resp.Body.Close()
	if err := p.wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, p.out.String())
	}
	want := eventsJSON(t, db, runID)
	sameEvents(t, "the reading watcher", got, want)
	if st := srv.Stats(); st.FellBehind < 1 {
		t.Fatalf("no watcher fell behind (%+v): the test proves nothing", st)
	}
	// The slow one reads now: everything, then end.
	_ = slow.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp2, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, end := readToEnd(t, sse.NewReader(resp2.Body))
	sameEvents(t, "the slow watcher, caught up", evs, want)
	if end.Data["status"] != "completed" {
		t.Errorf("end %v", end.Data)
	}
}

// readUntilEnd reads a stream's events; ended says it closed with end.
func readUntilEnd(r *sse.Reader) (evs []sseEvent, ended bool) {
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, false
		}
		if ev.Type == "end" {
			return evs, true
		}
		e := sseEvent{ID: ev.ID, Type: ev.Type}
		if json.Unmarshal([]byte(ev.Data), &e.Data) != nil {
			return evs, false
		}
		evs = append(evs, e)
	}
}
