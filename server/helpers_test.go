package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sse"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/server"
)

// slowGraph is one chat node on the simulator that streams for about two
// seconds and is cut once mid-way, and a second node after it.
const slowGraph = `name: slow
profile: ci
cache: false
providers:
  chat:
    kind: sim
    api: chat
    continuation: prefix
    sim:
      seed: 3
      tokens: 240
      tokens_per_second: 120
      faults:
        - {node: a, endpoint: chat, requests: [1], kind: reset, after_events: 60}
nodes:
  - {id: a, provider: chat, prompt: "Say a lot."}
  - {id: b, provider: chat, needs: [a], prompt: 'Sum up: {{ output "a" }}'}
`

// writeFile writes a test file and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runGraph runs a graph file to its end in this process, on db.
func runGraph(t *testing.T, ctx context.Context, db, graph string) *runner.Result {
	t.Helper()
	g, err := runner.LoadGraph(graph)
	if err != nil {
		t.Fatal(err)
	}
	j := testkit.OpenJournal(t, db)
	res, err := runner.Run(ctx, g, runner.Options{Journal: j})
	if err != nil && !errors.Is(err, runner.ErrInterrupted) {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return res
}

// serve serves db, read-only, on a real socket of 127.0.0.1.
func serve(t *testing.T, db string, opts server.Options) (*httptest.Server, *server.Server) {
	return serveBuffered(t, db, opts, 0)
}

// smallBuffers gives each connection it accepts a send buffer of n bytes
// (the kernel doubles it): a watcher that stops reading blocks the server's
// writes soon, not after megabytes.
type smallBuffers struct {
	net.Listener
	n int
}

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		err = c.(*net.TCPConn).SetWriteBuffer(l.n)
	}
	return c, err
}

// serveBuffered is serve with the send buffer of each connection at sndbuf
// bytes (0: the system's).
func serveBuffered(t *testing.T, db string, opts server.Options, sndbuf int) (*httptest.Server, *server.Server) {
	t.Helper()
	rj, err := journal.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	opts.Journal = rj
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	if sndbuf > 0 {
		ts.Listener = smallBuffers{ts.Listener, sndbuf}
	}
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		_ = rj.Close()
	})
	return ts, srv
}

// noderun runs the built command and returns its stdout; it fails the test
// unless it exits 0.
func noderun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(cli.Path(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("noderun %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// eventsJSON is `noderun events RUN --json`: one object a line.
func eventsJSON(t *testing.T, db, runID string, extra ...string) []map[string]any {
	t.Helper()
	out := noderun(t, append([]string{"events", runID, "--json", "--db", db}, extra...)...)
	var evs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("events --json: %v: %s", err, sc.Text())
		}
		evs = append(evs, m)
	}
	return evs
}

// sseEvent is one event a watcher received.
type sseEvent struct {
	ID, Type string
	Data     map[string]any
}

// watch opens a run's event stream after lastID ("" from the start).
func watch(t *testing.T, ctx context.Context, url, lastID string) (*http.Response, *sse.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	return resp, sse.NewReader(resp.Body)
}

// next reads the next event of a stream.
func next(t *testing.T, r *sse.Reader) (sseEvent, error) {
	t.Helper()
	ev, err := r.Next()
	if err != nil {
		return sseEvent{}, err
	}
	out := sseEvent{ID: ev.ID, Type: ev.Type}
	if err := json.Unmarshal([]byte(ev.Data), &out.Data); err != nil {
		t.Fatalf("event %s data is not JSON: %v: %q", ev.ID, err, ev.Data)
	}
	return out, nil
}

// readToEnd reads a stream's events up to its end event (returned apart).
func readToEnd(t *testing.T, r *sse.Reader) ([]sseEvent, sseEvent) {
	t.Helper()
	var evs []sseEvent
	for {
		ev, err := next(t, r)
		if err != nil {
			t.Fatalf("the stream ended without an end event after %d events: %v", len(evs), err)
		}
		if ev.Type == "end" {
			return evs, ev
		}
		evs = append(evs, ev)
	}
}

// sameEvents compares what a watcher received with `events --json`, as
// objects, and checks each id and event type.
func sameEvents(t *testing.T, what string, got []sseEvent, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		w := want[i]
		if got[i].ID != strconv.FormatInt(int64(w["seq"].(float64)), 10) || got[i].Type != w["kind"] {
			t.Fatalf("%s: event %d is id %s %s, want seq %v %v", what, i, got[i].ID, got[i].Type, w["seq"], w["kind"])
		}
		a, _ := json.Marshal(got[i].Data)
		b, _ := json.Marshal(w)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: event %d differs:\n got %s\nwant %s", what, i, a, b)
		}
	}
}

// getJSON GETs a document; it returns the status code.
func getJSON(t *testing.T, url, token string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}

// post POSTs a JSON body with the write token; it returns the status and body.
func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// proc is a noderun process a test started.
type proc struct {
	cmd    *exec.Cmd
	out    *testkit.Buffer // its stdout and stderr
	exited chan struct{}
	err    error // once exited is closed
}

// wait waits for the process to exit and returns how it did.
func (p *proc) wait() error {
	<-p.exited
	return p.err
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// child starts `noderun ARGS` as a process of its own; the test ends it.
func child(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(cli.Path(t), args...), out: new(testkit.Buffer), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { testkit.Terminate(p.cmd, p.exited, 5*time.Second) })
	return p
}

// waitFor polls cond until it holds or the test's patience ends.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fileExists: the journal at p has been created (its schema written), so
// it can be served.
func fileExists(p string) bool {
	j, err := journal.OpenReadOnly(context.Background(), p)
	if err != nil {
		return false
	}
	defer j.Close()
	runs, err := j.Runs(context.Background(), 1)
	return err == nil && len(runs) > 0
}

// lastRun is the newest run's id, once the journal has one.
func lastRun(t *testing.T, base string) string {
	t.Helper()
	var id string
	waitFor(t, "a run in the journal", 20*time.Second, func() bool {
		var runs struct {
			Runs []struct {
				RunID string `json:"run_id"`
			} `json:"runs"`
		}
		if getJSON(t, base+"/api/runs", "", &runs) == http.StatusOK && len(runs.Runs) > 0 {
			id = runs.Runs[0].RunID
		}
		return id != ""
	})
	return id
}

func sseReaderOf(r io.Reader) *sse.Reader { return sse.NewReader(r) }

// rawWatch opens an event stream on a socket and reads nothing of it yet: a
// watcher that fell asleep.
func rawWatch(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, addr); err != nil {
		t.Fatal(err)
	}
	return c
}

// syscallTERM is SIGTERM: an interruption the runner journals.
var syscallTERM os.Signal = syscall.SIGTERM
