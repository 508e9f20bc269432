package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/ledger"
)

// chromium runs headless Chromium on a page and returns its stdout and stderr.
func chromium(t *testing.T, args ...string) (string, string) {
	t.Helper()
	testkit.RealPeer(t, "Chromium")
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed (apt-get install chromium; make tools installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--window-size=1280,1000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helper processes go with it
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// reportDOM writes the report of db's last run with `noderun report` (and
// extra flags), checks that it is one self-contained file, renders it in
// headless Chromium and returns the page's path and the DOM the browser built.
func reportDOM(t *testing.T, db string, extra ...string) (page, dom string) {
	t.Helper()
	page = filepath.Join(t.TempDir(), "run.html")
	args := append([]string{"report", "last", "--db", db, "-o", page}, extra...)
	if code, out, errs := runCLI(t, args...); code != exitOK || out != "" {
		t.Fatalf("report: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(src|href)\s*=\s*"(https?:)?//`).Match(src) || bytes.Contains(src, []byte("@import")) ||
		bytes.Contains(src, []byte("url(http")) {
		t.Error("the report loads something from the network; it must be self-contained")
	}
	dom, logs := chromium(t, "--dump-dom", "file://"+page)
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Uncaught") {
			t.Errorf("console message: %s", l)
		}
	}
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Fatalf("the page's script did not run to the end:\n%s", dom)
	}
	if m := regexp.MustCompile(`(?s)<pre id="page-errors"[^>]*>(.*?)</pre>`).FindStringSubmatch(dom); m == nil || m[1] != "" {
		t.Errorf("page errors: %v", m)
	}
	return page, dom
}

// screenshot keeps a picture of the page's first screen as a test artifact.
func screenshot(t *testing.T, page, name string) {
	t.Helper()
	dir := os.Getenv("NODERUN_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(shot)
	chromium(t, "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("screenshot: %v %v", err, img)
	}
	t.Logf("screenshot: %s", shot)
}

// ledgerOf reads db's last run as the report does.
func ledgerOf(t *testing.T, db string) (*ledger.Run, *ledger.Account) {
	t.Helper()
	ctx := context.Background()
	j, err := journal.OpenReadOnly(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	runs, err := j.Runs(ctx, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	run, err := ledger.Load(ctx, j, runs[0].ID, ledger.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return run, ledger.AccountOf(run, nil)
}

// element is an element of the DOM: its attributes and its inner HTML.
type element struct {
	attrs map[string]string
	inner string
}

// text is the element's text, its markup and entities undone.
func (e element) text() string {
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(e.inner, ""))
}

var attrRE = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)

// elements finds the elements <tag class="class" ...>...</tag> of dom whose
// attributes include want (name, value, ...). Chromium serializes every
// element with its closing tag and attributes in source order; inner is up
// to the first closing tag of the same name, so tag must not nest in them.
func elements(dom, tag, class string, want ...string) []element {
	re := regexp.MustCompile(`(?s)<` + tag + ` class="` + regexp.QuoteMeta(class) + `"([^>]*)>(.*?)</` + tag + `>`)
	var out []element
	for _, m := range re.FindAllStringSubmatch(dom, -1) {
		e := element{attrs: map[string]string{}, inner: m[2]}
		for _, a := range attrRE.FindAllStringSubmatch(m[1], -1) {
			e.attrs[a[1]] = html.UnescapeString(a[2])
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && e.attrs[want[i]] == want[i+1]
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// one is the only element elements finds.
func one(t *testing.T, dom, tag, class string, want ...string) element {
	t.Helper()
	es := elements(dom, tag, class, want...)
	if len(es) != 1 {
		t.Fatalf("%d <%s class=%q %v> on the page, want 1", len(es), tag, class, want)
	}
	return es[0]
}

// byID is the element with that id.
func byID(t *testing.T, dom, id string) element {
	t.Helper()
	m := regexp.MustCompile(`(?s)<([a-z]+)[^>]* id="` + id + `"([^>]*)>(.*?)</([a-z]+)>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no element #%s on the page", id)
	}
	e := element{attrs: map[string]string{}, inner: m[3]}
	for _, a := range attrRE.FindAllStringSubmatch(m[0][:strings.Index(m[0], ">")], -1) {
		e.attrs[a[1]] = html.UnescapeString(a[2])
	}
	return e
}

// pasted runs a command line as the operator would paste it into a shell:
// a real shell splits it (its quoting included), and it runs here.
func pasted(t *testing.T, line string) (code int, stdout, stderr string) {
	t.Helper()
	out, err := exec.Command("sh", "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("sh cannot read %q: %v", line, err)
	}
	args := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if args[0] != "noderun" {
		t.Fatalf("%q does not start with noderun", line)
	}
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// iso is a time as the page's data attributes hold it.
func iso(tm time.Time) string { return tm.UTC().Format(time.RFC3339Nano) }

func parseISO(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return tm
}

// checkFigures: the run's duration and the time its runners ran are the
// ledger's (its sessions, and the account's wall time).
func checkFigures(t *testing.T, dom string, run *ledger.Run, acct *ledger.Account) {
	t.Helper()
	s := run.Sessions
	took := s[len(s)-1].To.Sub(s[0].From).Truncate(time.Millisecond) // the page's figures are to the millisecond
	if e := byID(t, dom, "took"); e.attrs["data-ms"] != fmt.Sprint(took.Milliseconds()) || e.text() != ledger.Clock(took) {
		t.Errorf("took %v %q, want %d ms, %q", e.attrs, e.text(), took.Milliseconds(), ledger.Clock(took))
	}
	ran := time.Duration(acct.WallMS) * time.Millisecond
	if e := byID(t, dom, "ran"); e.attrs["data-ms"] != fmt.Sprint(acct.WallMS) || e.text() != ledger.Clock(ran) ||
		e.attrs["data-sessions"] != fmt.Sprint(len(s)) {
		t.Errorf("ran %v %q, want %d ms in %d sessions, %q", e.attrs, e.text(), acct.WallMS, len(s), ledger.Clock(ran))
	}
}

// checkWaits: every recovery step that waited has its wait drawn as a
// segment of its own, in its attempt, from the step on for at most its
// delay, apart from every stretch of the attempt that ran.
func checkWaits(t *testing.T, dom string, run *ledger.Run) int {
	t.Helper()
	waits := 0
	for _, nd := range run.Nodes {
		for _, r := range nd.Records {
			delay, ok := diagnostics.KeyDelay.Of(r.Record)
			if r.Code.Role != diagnostics.RoleStep || !ok || delay <= 0 {
				continue
			}
			waits++
			g := one(t, dom, "g", "attempt "+attemptLookOf(t, dom, nd.ID, r.Attempt), "data-node", nd.ID, "data-attempt", fmt.Sprint(r.Attempt))
			ws := elements(g.inner, "rect", "seg wait", "data-seq", fmt.Sprint(r.Seq))
			if len(ws) != 1 {
				t.Errorf("%s#%d: the wait of step %s (seq %d, %s) is not drawn", nd.ID, r.Attempt, r.Code, r.Seq, delay)
				continue
			}
			from, to := parseISO(t, ws[0].attrs["data-from"]), parseISO(t, ws[0].attrs["data-to"])
			if !from.Equal(r.Time) || to.Sub(from) > delay || !to.After(from) || ws[0].attrs["data-code"] != r.Code.ID {
				t.Errorf("%s#%d: wait %v, want from the step at %s for at most %s", nd.ID, r.Attempt, ws[0].attrs, iso(r.Time), delay)
			}
			for _, run := range elements(g.inner, "rect", "seg run") {
				rf, rt := parseISO(t, run.attrs["data-from"]), parseISO(t, run.attrs["data-to"])
				if rf.Before(to) && from.Before(rt) {
					t.Errorf("%s#%d: a run segment %s..%s overlaps the wait %s..%s", nd.ID, r.Attempt, iso(rf), iso(rt), iso(from), iso(to))
				}
			}
		}
	}
	return waits
}

// attemptLookOf is the look the timeline gave an attempt (its class).
func attemptLookOf(t *testing.T, dom, node string, n int) string {
	t.Helper()
	m := regexp.MustCompile(`<g class="attempt ([a-z]+)" data-node="` + regexp.QuoteMeta(node) + `" data-attempt="` + fmt.Sprint(n) + `"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the timeline lacks %s attempt %d", node, n)
	}
	return m[1]
}

// checkNodes: each node's diagnostics and output are one click away, in
// its <details>: every record, and the output or partial output (cut at
// max bytes, with the command that prints all of it).
func checkNodes(t *testing.T, dom, db string, run *ledger.Run, max int) {
	t.Helper()
	for _, nd := range run.Nodes {
		d := one(t, dom, "details", "node", "data-node", nd.ID)
		if d.attrs["id"] != "node-"+nd.ID {
			t.Errorf("%s: details id %q", nd.ID, d.attrs["id"])
		}
		for _, r := range nd.Records {
			if !strings.Contains(d.inner, fmt.Sprintf(`<tr data-seq="%d" data-code="%s">`, r.Seq, r.Code.ID)) {
				t.Errorf("%s: its diagnostics lack %s (seq %d)", nd.ID, r.Code, r.Seq)
			}
		}
		if len(nd.Attempts) == 0 {
			continue
		}
		// What `noderun show` prints is what the page shows, or begins with.
		code, want, errs := runCLI(t, "show", run.ID, nd.ID, "--db", db)
		if code != exitOK {
			t.Fatalf("show %s: exit %d: %s", nd.ID, code, errs)
		}
		if want == "" {
			continue
		}
		pre := elements(d.inner, "pre", "output", "data-node", nd.ID)
		if len(pre) != 1 {
			t.Errorf("%s: no output on the page (%d bytes journaled)", nd.ID, len(want))
			continue
		}
		got := strings.TrimPrefix(pre[0].text(), "\n")
		cut := elements(d.inner, "code", "cmd", "data-node", nd.ID, "data-what", "show")
		switch {
		case len(want) <= max:
			if got != want || len(cut) != 0 {
				t.Errorf("%s: the page shows %d bytes of its %d-byte output (cut note: %d)", nd.ID, len(got), len(want), len(cut))
			}
		case len(got) > max || len(got) < max-3 || !strings.HasPrefix(want, got) || len(cut) != 1: // cut at a character boundary
			t.Errorf("%s: %d bytes shown of %d, want its first %d and the show command (%d)", nd.ID, len(got), len(want), max, len(cut))
		default:
			// The note's command prints all of it, pasted as it is.
			if code, all, errs := pasted(t, cut[0].text()); code != exitOK || all != want {
				t.Errorf("%s: %q: exit %d, %d bytes, want all %d\n%s", nd.ID, cut[0].text(), code, len(all), len(want), errs)
			}
		}
	}
}

// The demo run (every node recovered): the page renders in a real browser
// without errors; its timeline shows every attempt with its faults,
// continues and re-attach marked and every backoff wait apart; it says all
// went well; each node's diagnostics and output are one click away, a long
// output cut with the command that prints it.
func TestReportRendersInHeadlessChromium(t *testing.T) {
	t.Parallel()
	db, _ := demoRun(t)
	page, dom := reportDOM(t, db)
	run, acct := ledgerOf(t, db)

	atts := 0
	for _, nd := range run.Nodes {
		for _, a := range nd.Attempts {
			atts++
			g := one(t, dom, "g", "attempt "+attemptLookOf(t, dom, nd.ID, a.N), "data-node", nd.ID, "data-attempt", fmt.Sprint(a.N))
			if g.attrs["data-outcome"] != string(a.Outcome) || len(elements(g.inner, "rect", "seg run")) == 0 {
				t.Errorf("%s attempt %d: %v, want outcome %s and a bar", nd.ID, a.N, g.attrs, a.Outcome)
			}
		}
	}
	if got := strings.Count(dom, `<g class="attempt `); got != atts || byID(t, dom, "attempt-count").text() != fmt.Sprintf("%d attempts", atts) {
		t.Errorf("the timeline has %d attempts, the journal %d", got, atts)
	}
	// The demo's two chat drops are continued (NR110), its Responses drop re-attached.
	for kind, want := range map[string]int{"fault": 3, "reattach": 1, "continue": 2} {
		if got := strings.Count(dom, `data-kind="`+kind+`"`); got < want {
			t.Errorf("%d %s marks on the timeline, want at least %d", got, kind, want)
		}
	}
	checkWaits(t, dom, run) // a full-jitter delay may be below the journal's millisecond: no minimum here
	for _, n := range []string{"plan", "research", "critique", "report"} {
		if !strings.Contains(dom, `<tr data-node="`+n+`">`) || !strings.Contains(dom, `<g class="box state-completed" data-node="`+n+`">`) {
			t.Errorf("node %s is missing from the graph or the diagnose table", n)
		}
	}
	checkFigures(t, dom, run, acct)
	if w := byID(t, dom, "all-well"); !strings.Contains(w.text(), fmt.Sprintf("All %d nodes completed", len(run.Nodes))) ||
		strings.Contains(dom, `<div class="problem`) || strings.Contains(dom, "Needs attention") {
		t.Errorf("a recovered run: %q", w.text())
	}
	checkNodes(t, dom, db, run, ledger.DefaultMaxOutput)
	screenshot(t, page, "report.png")

	// Outputs longer than --max-output are cut, with the command that prints them.
	_, dom = reportDOM(t, db, "--max-output", "200")
	checkNodes(t, dom, db, run, 200)
	if n := strings.Count(dom, `data-what="show"`); n != len(run.Nodes) {
		t.Errorf("%d outputs cut at 200 bytes, want all %d", n, len(run.Nodes))
	}
}

// A run with failed nodes: a provider answering 401, an unsafe node whose
// stream was reset, a provider refusing connections, and one that recovers
// after two 503s. Near the top, in plain view, each failed node's verdict,
// error class and error, the nodes skipped with it, and the command that
// retries it, with the journal named so that it works when pasted (here
// from a directory with a space in its name).
func TestReportShowsFailuresFirst(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "my runs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(dir, "failing.yaml")
	src := `name: failing
profile: ci
providers:
  chat:
    kind: sim
    api: chat
    sim:
      seed: 3
      tokens: 120
      faults:
        - {node: auth, kind: status, status: 401}
        - {node: flaky, endpoint: chat, requests: [1, 2], kind: status, status: 503}
        - {node: deploy, endpoint: chat, requests: [1], kind: reset, after_events: 5}
  down: {kind: openai, base_url: http://127.0.0.1:9/v1, model: m}
nodes:
  - {id: auth, provider: chat, prompt: who am I}
  - {id: flaky, provider: chat, prompt: try again}
  - {id: deploy, provider: chat, prompt: deploy it, side_effects: unsafe}
  - {id: offline, provider: down, prompt: anyone there}
  - {id: after, provider: chat, needs: [auth], prompt: 'use {{ output "auth" }}'}
`
	if err := os.WriteFile(graph, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "run.db")
	if code, _, errs := runCLI(t, "run", "--db", db, graph); code != exitFailed {
		t.Fatalf("run: exit %d, want %d\n%s", code, exitFailed, errs)
	}
	page, dom := reportDOM(t, db)
	run, acct := ledgerOf(t, db)
	verdicts := map[string]string{}
	for _, n := range acct.Nodes {
		verdicts[n.ID] = n.Verdict.Text
	}

	top, tl := strings.Index(dom, `id="attention"`), strings.Index(dom, `id="timeline"`)
	var failed []string
	for _, nd := range run.Nodes {
		if nd.State != journal.NodeFailed {
			continue
		}
		failed = append(failed, nd.ID)
		p := one(t, dom, "div", "problem state-failed", "data-node", nd.ID)
		if at := strings.Index(dom, `<div class="problem state-failed" data-node="`+nd.ID+`"`); at < top || at > tl {
			t.Errorf("%s: its problem is not near the top (at %d; attention at %d, timeline at %d)", nd.ID, at, top, tl)
		}
		if v := one(t, p.inner, "dd", "verdict", "data-node", nd.ID).text(); v != verdicts[nd.ID] {
			t.Errorf("%s: verdict %q, want %q", nd.ID, v, verdicts[nd.ID])
		}
		if c := one(t, p.inner, "dd", "class", "data-node", nd.ID).text(); c != string(nd.ErrClass) || c == "" {
			t.Errorf("%s: class %q, want %q", nd.ID, c, nd.ErrClass)
		}
		if e := one(t, p.inner, "dd", "error", "data-node", nd.ID).text(); e != nd.Error || e == "" {
			t.Errorf("%s: error %q, want %q", nd.ID, e, nd.Error)
		}
		cmd := one(t, p.inner, "code", "cmd", "data-node", nd.ID, "data-what", "retry").text()
		out, err := exec.Command("sh", "-c", `printf '%s\0' `+cmd).Output()
		if want := strings.Join([]string{"noderun", "resume", run.ID, "--retry", nd.ID, "--db", db}, "\x00") + "\x00"; err != nil || string(out) != want {
			t.Errorf("%s: %q reads as %q, want %q", nd.ID, cmd, out, want)
		}
	}
	if fmt.Sprint(failed) != "[auth deploy offline]" {
		t.Fatalf("failed nodes %v", failed)
	}
	if s := one(t, dom, "dd", "skipped", "data-node", "auth").text(); s != "after" {
		t.Errorf("skipped with auth: %q", s)
	}
	if len(elements(dom, "div", "problem state-skipped")) != 0 || len(elements(dom, "div", "problem state-completed")) != 0 {
		t.Error("a skipped or completed node is listed as a problem")
	}
	// The failures are marked; flaky's retries wait apart from the attempts
	// they threw away.
	for _, n := range failed {
		if !strings.Contains(dom, `data-node="`+n+`" data-code="`+diagnostics.NodeFailed.ID+`" data-kind="failure"`) {
			t.Errorf("%s: no failure mark", n)
		}
	}
	// Of flaky's two retries and offline's three, a full-jitter delay may
	// fall below the journal's millisecond (then nothing waited to draw),
	// each with a chance of at most 1 in 10: two of five is certain enough.
	if n := checkWaits(t, dom, run); n < 2 {
		t.Errorf("%d waits checked, want at least 2", n)
	}
	checkFigures(t, dom, run, acct)
	checkNodes(t, dom, db, run, ledger.DefaultMaxOutput) // deploy's partial output among them
	for _, n := range failed {
		if d := one(t, dom, "details", "node", "data-node", n); !strings.Contains(dom, `<details class="node" id="node-`+n+`" data-node="`+n+`" data-state="failed" open="">`) {
			t.Errorf("%s: its details are not open: %v", n, d.attrs)
		}
	}
	screenshot(t, page, "report-failed.png")

	// The command works when pasted: the run is resumed and deploy sent again.
	cmd := one(t, dom, "code", "cmd", "data-node", "deploy", "data-what", "retry").text()
	if code, _, errs := pasted(t, cmd); code == exitUsage {
		t.Fatalf("%s: exit %d\n%s", cmd, code, errs)
	}
	after, _ := ledgerOf(t, db)
	if len(after.Sessions) != 2 || len(after.Nodes[2].Attempts) != 2 {
		t.Errorf("after %q: %d sessions, deploy has %d attempts; want 2 and 2", cmd, len(after.Sessions), len(after.Nodes[2].Attempts))
	}
}

// An interrupted run, then resumed with the command its report gives: the
// first page says it was interrupted, with the commands to resume it and
// to cancel the response it left running; the second draws the time
// between the sessions as a gap, the node's attempt across it, and no
// failure.
func TestReportDrawsTheGapOfAResumedRun(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{Seed: intSeed, Tokens: intTokens, TokensPerSecond: 1000})
	db, _, _ := interruptRun(t, srv, syscall.SIGTERM)
	_, dom := reportDOM(t, db)
	run, acct := ledgerOf(t, db)

	if s := byID(t, dom, "run-status").text(); s != string(journal.RunInterrupted) {
		t.Errorf("status %q", s)
	}
	words := func(line string) []string {
		out, err := exec.Command("sh", "-c", `printf '%s\0' `+line).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	}
	resume := one(t, dom, "code", "cmd", "data-what", "resume").text()
	if got, want := words(resume), []string{"noderun", "resume", run.ID, "--db", db}; !slices.Equal(got, want) {
		t.Errorf("resume command %q, want %q", got, want)
	}
	p := one(t, dom, "div", "problem state-canceled", "data-node", "a")
	if v := one(t, p.inner, "dd", "verdict", "data-node", "a").text(); v != acct.Nodes[0].Verdict.Text || !strings.Contains(v, "keeps running at the provider") {
		t.Errorf("a: verdict %q, want %q", v, acct.Nodes[0].Verdict)
	}
	if c := one(t, p.inner, "dd", "class", "data-node", "a").text(); c != string(diagnostics.ClassCanceled) {
		t.Errorf("a: class %q", c)
	}
	cancel := one(t, p.inner, "code", "cmd", "data-node", "a", "data-what", "cancel").text()
	if got, want := words(cancel), []string{"noderun", "cancel", run.ID, "a", "--db", db}; !slices.Equal(got, want) {
		t.Errorf("cancel command %q, want %q", got, want)
	}
	if attemptLookOf(t, dom, "a", 1) != "interrupted" || strings.Contains(dom, `data-kind="failure"`) ||
		!strings.Contains(dom, `data-node="a" data-code="`+diagnostics.NodeCanceled.ID+`" data-kind="interrupted"`) {
		t.Error("the interruption is not drawn as one")
	}
	checkNodes(t, dom, db, run, ledger.DefaultMaxOutput) // a's partial output

	// The page's resume command, pasted.
	if code, _, errs := pasted(t, resume); code != exitOK {
		t.Fatalf("%s: exit %d\n%s", resume, code, errs)
	}
	page, dom := reportDOM(t, db)
	run, acct = ledgerOf(t, db)
	if len(run.Sessions) != 2 || run.Status != journal.RunCompleted {
		t.Fatalf("after resume: %d sessions, %s", len(run.Sessions), run.Status)
	}
	s := run.Sessions
	gap := s[1].From.Sub(s[0].To).Truncate(time.Millisecond)
	g := one(t, dom, "g", "gap")
	label := "interrupted " + ledger.Clock(gap)
	if g.attrs["data-ms"] != fmt.Sprint(gap.Milliseconds()) || g.attrs["data-from"] != iso(s[0].To) || g.attrs["data-to"] != iso(s[1].From) ||
		one(t, g.inner, "text", "gap-label").text() != label {
		t.Errorf("gap %v %q, want %s..%s labelled %q", g.attrs, g.inner, iso(s[0].To), iso(s[1].From), label)
	}
	if e := byID(t, dom, "gaps"); e.text() != label || e.attrs["data-ms"] != fmt.Sprint(gap.Milliseconds()) {
		t.Errorf("figures: %q, want %q", e.text(), label)
	}
	checkFigures(t, dom, run, acct)
	// The attempt was re-attached: one attempt, drawn in both sessions and
	// across the gap between them.
	a := one(t, dom, "g", "attempt ok", "data-node", "a", "data-attempt", "1")
	var kinds []string
	for _, m := range regexp.MustCompile(`<rect class="seg ([a-z]+)"`).FindAllStringSubmatch(a.inner, -1) {
		if k := m[1]; len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
	}
	if !slices.Contains(kinds, "detached") || kinds[0] != "run" || kinds[len(kinds)-1] != "run" {
		t.Errorf("a's attempt is drawn as %v, want run, detached, run", kinds)
	}
	if d := one(t, a.inner, "rect", "seg detached"); d.attrs["data-from"] != iso(s[0].To) || d.attrs["data-to"] != iso(s[1].From) {
		t.Errorf("a's detached stretch %v, want the gap", d.attrs)
	}
	if strings.Contains(dom, `data-kind="failure"`) || !strings.Contains(dom, `data-kind="resumed"`) ||
		len(elements(dom, "div", "problem state-canceled")) != 0 {
		t.Error("the resumed run shows a failure, lacks its resume, or still lists a problem")
	}
	byID(t, dom, "all-well")
	screenshot(t, page, "report-resumed.png")
}
