package server_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/chromedp"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/server"
)

// The page, in a real Chromium (Debian's), driven by chromedp: it is
// watched through a proxy that cuts its connections mid-stream many times,
// and behind a real nginx that cuts every silent stream after 2 s.

// browser starts one headless Chromium for a test; a missing one fails it.
func browser(t *testing.T) context.Context {
	t.Helper()
	testkit.RealPeer(t, "Chromium")
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed (make tools installs Debian's): " + err.Error())
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		// Chromium makes its singleton socket's directory in $TMPDIR and
		// removes it only when it exits by itself: killed at the test's
		// end, it left one behind in /tmp for every test.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(412, 900)} // a phone's width
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	return ctx
}

// cutter is a TCP proxy in front of the server that cuts each connection
// a moment after it opened (0.4 to 1.5 s): an event stream mid-event, as a
// gateway or a lost network does; the page's loads, which take
// milliseconds, pass.
type cutter struct {
	ln   net.Listener
	to   string
	cuts atomic.Int64
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newCutter(t *testing.T, to string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, to: to, conns: map[net.Conn]bool{}}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		rng := rand.New(rand.NewPCG(7, 8))
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			life := time.Duration(400+rng.IntN(1100)) * time.Millisecond
			c.wg.Add(1)
			go func() { defer c.wg.Done(); c.pipe(down, life) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		for conn := range c.conns { // the browser keeps idle ones open
			conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
	return c
}

func (c *cutter) track(conns ...net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range conns {
		c.conns[conn] = true
	}
}

// pipe forwards one connection until it has lived for life, then cuts both
// sides (counted when it was still carrying something).
func (c *cutter) pipe(down net.Conn, life time.Duration) {
	defer down.Close()
	up, err := net.Dial("tcp", c.to)
	if err != nil {
		return
	}
	defer up.Close()
	c.track(down, up)
	var done atomic.Bool
	cut := time.AfterFunc(life, func() {
		if !done.Load() {
			c.cuts.Add(1)
		}
		down.Close()
		up.Close()
	})
	defer cut.Stop()
	go func() { _, _ = io.Copy(up, down); up.Close() }()
	_, _ = io.Copy(down, up)
	done.Store(true)
}

// watchPage opens a run's page in the browser and watches it until the
// run has ended: every 100 ms it samples each node's text and the
// connection state. It fails the test if a node's text ever leaves the
// DOM or shrinks, and returns the states seen and the final texts.
func watchPage(t *testing.T, ctx context.Context, url string, limit time.Duration) (states map[string]bool, texts map[string]string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	states, longest := map[string]bool{}, map[string]int{}
	deadline := time.Now().Add(limit)
	for {
		type sample struct {
			Conn  string            `json:"conn"`
			Texts map[string]string `json:"texts"`
		}
		s, err := chromedp.Run(ctx, chromedp.Evaluate[sample](`(() => {
			const c = document.getElementById('conn');
			const texts = {};
			for (const n of document.querySelectorAll('[data-node]')) {
				const pre = n.querySelector('pre.node-output');
				if (pre) texts[n.dataset.node] = pre.textContent;
			}
			return {conn: c ? c.dataset.state : '', texts};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		states[s.Conn] = true
		for id, text := range s.Texts {
			if n := len(text); n < longest[id] {
				t.Fatalf("node %s's text went from %d bytes to %d: it left the DOM (connection %s)", id, longest[id], n, s.Conn)
			}
			longest[id] = len(text)
		}
		if s.Conn == "ended" {
			// The page reads each completed node's output once: let it land.
			return states, pageTexts(t, ctx)
		}
		if s.Conn == "error" {
			t.Fatalf("the page gave up: %v", states)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end on the page within %s (states %v)", limit, states)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sameAsShow checks each node's final text on the page against `noderun
// show`, byte for byte, and the size the page's figures say it is (kept
// as the text grew, was replaced, was read again after a cut).
func sameAsShow(t *testing.T, ctx context.Context, texts map[string]string, db, runID string, nodes ...string) {
	t.Helper()
	figures := pageBytes(t, ctx)
	for _, n := range nodes {
		want := noderun(t, "show", runID, n, "--db", db)
		if got, ok := texts[n]; !ok || got != want {
			t.Errorf("node %s on the page: %d bytes, noderun show: %d bytes", n, len(got), len(want))
		}
		if figures[n] != len(want) {
			t.Errorf("node %s: the page's figure says %d bytes, noderun show has %d", n, figures[n], len(want))
		}
	}
}

// serveLive starts a run in a process of its own and serves its journal
// in this one; it returns the server's address and the run's id.
func serveLive(t *testing.T, graph string, opts server.Options) (addr, db, runID string, p *proc) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "j.db")
	p = child(t, "run", "--db", db, graph)
	waitFor(t, "the run to be journaled", 20*time.Second, func() bool { return fileExists(db) })
	ts, _ := serve(t, db, opts)
	return ts.Listener.Addr().String(), db, lastRun(t, ts.URL), p
}

// liveGraph streams two nodes for a few seconds each, the first cut once
// by the simulator (and continued).
const liveGraph = `name: live
profile: ci
cache: false
providers:
  chat:
    kind: sim
    api: chat
    continuation: prefix
    sim:
      seed: 5
      tokens: 300
      tokens_per_second: 100
      faults:
        - {node: a, endpoint: chat, requests: [1], kind: reset, after_events: 90}
nodes:
  - {id: a, provider: chat, prompt: "Say a lot."}
  - {id: b, provider: chat, needs: [a], prompt: 'Sum up: {{ output "a" }}'}
`

// Through a proxy that cuts every connection after a few KiB or a second:
// the page keeps every node's text, says it is reconnecting and recovers,
// and ends with each node's text equal to noderun show.
func TestBrowserThroughCuts(t *testing.T) {
	ctx := browser(t)
	addr, db, runID, p := serveLive(t, writeFile(t, "live.yaml", liveGraph), server.Options{})
	c := newCutter(t, addr)
	states, texts := watchPage(t, ctx, "http://"+c.ln.Addr().String()+"/runs/"+runID, 60*time.Second)
	if err := p.wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, p.out.String())
	}
	t.Logf("states %v, %d cuts", states, c.cuts.Load())
	if c.cuts.Load() < 5 || !states["reconnecting"] || !states["live"] {
		t.Errorf("the page was cut %d times, states %v: want several cuts, reconnecting and live again", c.cuts.Load(), states)
	}
	sameAsShow(t, ctx, texts, db, runID, "a", "b")
}

// Behind nginx with a 2 s proxy_read_timeout, and a server whose
// keep-alives come every 10 s: nginx cuts the stream at every silence of
// the run; the page resumes and ends with noderun show's texts.
func TestBrowserBehindNginx(t *testing.T) {
	ctx := browser(t)
	graph := writeFile(t, "silent.yaml", `name: silent
profile: patient
cache: false
providers:
  chat:
    kind: sim
    api: chat
    sim: {seed: 6, tokens: 120, tokens_per_second: 200, burst_tokens: 40, silence: 2500ms, keepalive: 500ms}
nodes:
  - {id: a, provider: chat, prompt: "Think, then say."}
`)
	addr, db, runID, p := serveLive(t, graph, server.Options{KeepAlive: 10 * time.Second})
	ng := testkit.StartNginx(t, addr, 2*time.Second)
	states, texts := watchPage(t, ctx, "http://"+ng.Addr+"/runs/"+runID, 90*time.Second)
	if err := p.wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, p.out.String())
	}
	cuts := strings.Count(ng.Log(t), "upstream timed out")
	t.Logf("states %v, nginx cut %d streams", states, cuts)
	if cuts < 1 || !states["reconnecting"] {
		t.Errorf("nginx cut %d streams, the page's states %v: want cuts and reconnecting", cuts, states)
	}
	sameAsShow(t, ctx, texts, db, runID, "a")
}

// The page's actions: a run started from its form completes; a run whose
// runner was stopped (SIGTERM) mid-stream is resumed from the page and
// completes with the undisturbed output; cancel is offered for the
// background response an interruption left running, and stops it.
func TestBrowserActions(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	writeFileIn(t, dir, "live.yaml", liveGraph)
	// A run interrupted mid-stream by SIGTERM, in a process of its own.
	p := child(t, "run", "--db", db, filepath.Join(dir, "live.yaml"))
	waitFor(t, "the run to stream", 20*time.Second, func() bool { return streamed(t, db) })
	p.signal(t, syscall.SIGTERM)
	_ = p.wait()
	local := &server.Local{DB: db, Dir: dir, Options: runner.Options{Parallel: 4}}
	defer local.Close()
	ts, _ := serve(t, db, server.Options{Actions: local, Poll: 20 * time.Millisecond})
	interrupted := lastRun(t, ts.URL)

	// Resume it from its page.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+interrupted)); err != nil {
		t.Fatal(err)
	}
	clickWhenThere(t, ctx, `button[data-action="resume"]`)
	waitPage(t, ctx, `document.getElementById('run-status').textContent === 'completed' && document.getElementById('conn').dataset.state === 'ended'`, 60*time.Second)
	texts := pageTexts(t, ctx)
	ref := filepath.Join(t.TempDir(), "ref.db")
	refRun := runGraph(t, context.Background(), ref, filepath.Join(dir, "live.yaml"))
	for _, n := range []string{"a", "b"} {
		want := noderun(t, "show", refRun.RunID, n, "--db", ref)
		if texts[n] != want {
			t.Errorf("resumed node %s: %d bytes on the page, the undisturbed run's %d", n, len(texts[n]), len(want))
		}
		if got := pageBytes(t, ctx)[n]; got != len(want) {
			t.Errorf("resumed node %s: the page's figure says %d bytes, the undisturbed run has %d", n, got, len(want))
		}
	}

	// Start a run from the form.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`form#start`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="graph"]`), "live.yaml")); err != nil {
		t.Fatal(err)
	}
	clickWhenThere(t, ctx, `form#start button[type="submit"]`)
	waitPage(t, ctx, `location.pathname.startsWith('/runs/') && document.getElementById('run-status').textContent === 'completed' && document.getElementById('conn').dataset.state === 'ended'`, 60*time.Second)
	started, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname.slice(6)`))
	if err != nil {
		t.Fatal(err)
	}
	if started == interrupted || started == "" {
		t.Fatalf("the form did not start a run (at %q)", started)
	}
	sameAsShow(t, ctx, pageTexts(t, ctx), db, started, "a", "b")

	// Cancel: a Responses node interrupted while its background response
	// goes on at the provider (an external simulator) is offered "Cancel at
	// the provider", which cancels that response.
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: 3000, TokensPerSecond: 200})
	writeFileIn(t, dir, "bg.yaml", fmt.Sprintf(`name: bg
profile: ci
cache: false
providers:
  r: {kind: responses, base_url: %s, model: sim}
nodes:
  - {id: r, provider: r, prompt: "Reason at length."}
`, srv.BaseURL()))
	p = child(t, "run", "--db", db, filepath.Join(dir, "bg.yaml"))
	waitFor(t, "the background response to stream", 20*time.Second, func() bool { return srv.Stats().TokensGenerated > 50 })
	bg := lastRun(t, ts.URL)
	p.signal(t, syscall.SIGTERM)
	_ = p.wait()
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+bg)); err != nil {
		t.Fatal(err)
	}
	clickWhenThere(t, ctx, `button[data-action="cancel"]`)
	waitPage(t, ctx, `[...document.querySelectorAll('#actions .note')].some((e) => /^r: cancelled/.test(e.textContent))`, 30*time.Second)
	if n := srv.Stats().Requests[sim.EndpointResponsesCancel]; n != 1 {
		t.Errorf("%d cancel requests reached the provider, want 1", n)
	}
	// The partial answer's size, as the page counts it and as the executor
	// journaled it when the run was interrupted, in the same unit (bytes of
	// a text far from ASCII: the simulator's words include €, π, 日本, 🚀).
	waitPage(t, ctx, `/interrupted after [0-9,]+ bytes/.test(document.querySelector('[data-node="r"] .node-verdict').textContent)`, 10*time.Second)
	verdict, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-node="r"] .node-verdict').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	var journaled int
	if _, err := fmt.Sscanf(strings.ReplaceAll(verdict[strings.Index(verdict, "after ")+len("after "):], ",", ""), "%d", &journaled); err != nil {
		t.Fatalf("verdict %q: %v", verdict, err)
	}
	text := pageTexts(t, ctx)["r"]
	if got := pageBytes(t, ctx)["r"]; got != journaled || got != len(text) || len(text) == utf8.RuneCountInString(text) {
		t.Errorf("r: the page's figure says %d bytes; the journal %d; its text is %d bytes, %d characters", got, journaled, len(text), utf8.RuneCountInString(text))
	}
}

// pageBytes are the nodes' byte figures on the page.
func pageBytes(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	figs, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => { const t = {}; for (const n of document.querySelectorAll('[data-node]')) t[n.dataset.node] = n.querySelector('.node-figures').textContent; return t; })()`))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for id, f := range figs {
		var n int
		if _, err := fmt.Sscanf(f, "%d bytes", &n); err != nil {
			t.Fatalf("node %s's figures %q: %v", id, f, err)
		}
		out[id] = n
	}
	return out
}

func writeFileIn(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// streamed: the journal's newest run has a delta.
func streamed(t *testing.T, db string) bool {
	j, err := journal.OpenReadOnly(context.Background(), db)
	if err != nil {
		return false
	}
	defer j.Close()
	runs, err := j.Runs(context.Background(), 1)
	if err != nil || len(runs) == 0 {
		return false
	}
	evs, err := j.Events(context.Background(), runs[0].ID, journal.EventFilter{Kinds: []string{journal.KindDelta}, Limit: 1})
	return err == nil && len(evs) > 0
}

// waitPage waits until a JavaScript condition holds on the page.
func waitPage(t *testing.T, ctx context.Context, cond string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waited %s for %s; the page says:\n%s", d, cond, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clickWhenThere clicks the element sel names once the page shows it (the
// page redraws its actions: a node found one moment may be gone the next).
func clickWhenThere(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	waitPage(t, ctx, `(() => { const b = document.querySelector(`+"`"+sel+"`"+`); if (!b || b.disabled) return false; b.click(); return true; })()`, 30*time.Second)
}

// pageTexts are the nodes' texts on the page.
func pageTexts(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // the last output reads land
	texts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => { const t = {}; for (const n of document.querySelectorAll('[data-node]')) t[n.dataset.node] = n.querySelector('pre.node-output').textContent; return t; })()`))
	if err != nil {
		t.Fatal(err)
	}
	return texts
}
