package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	ntemporal "github.com/noderun/noderun/runner/temporal"
	"github.com/noderun/noderun/server"
)

// temporalDev is a Temporal dev server (the real Temporal CLI from
// .tools), started by the first test that needs it.
var temporalDev testkit.TemporalDev

// serve --temporal against a real Temporal dev server, a real worker
// process and a run submitted by `noderun run --temporal`: while the run
// goes on, the runs list and the run's document say running; once it is
// over, every body equals the CLI's (status --temporal --json, diagnose
// --temporal --json, show --temporal), and the page, in Chromium, shows the
// run in the list and each node's output as show prints it.
func TestServeTemporal(t *testing.T) {
	t.Cleanup(temporalDev.Stop)
	hp := temporalDev.HostPort(t)
	simsrv := simtest.Start(t, sim.Config{Seed: 3, Tokens: 200, TokensPerSecond: 100})
	graph := writeFile(t, "remote.yaml", fmt.Sprintf("name: remote\nprofile: ci\ncache: false\nproviders:\n  chat: {kind: openai, base_url: %s, model: sim}\n"+
		"nodes:\n  - {id: a, provider: chat, prompt: say a lot}\n  - {id: b, provider: chat, needs: [a], prompt: 'sum up {{ output \"a\" }}'}\n", simsrv.BaseURL()))
	queue := "serve-" + time.Now().Format("150405.000")
	child(t, "worker", "--temporal", hp, "--task-queue", queue, "--db", filepath.Join(t.TempDir(), "w1.db"), "--identity", "w1")
	run := child(t, "run", "--temporal", hp, "--task-queue", queue, graph)
	var runID string
	waitFor(t, "the run's id", 60*time.Second, func() bool {
		m := regexp.MustCompile(`run ([0-9a-f-]{36}) submitted`).FindStringSubmatch(run.out.String())
		if m != nil {
			runID = m[1]
		}
		return m != nil
	})
	tc, err := ntemporal.Dial(context.Background(), hp, "default", "serve-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ts, _ := serve(t, emptyJournal(t), server.Options{Temporal: &server.Temporal{Client: tc, Address: hp}})
	base := ts.URL + "/api/temporal/runs"

	// While it runs: listed (the visibility store trails a moment), running.
	var list ntemporal.RunList
	waitFor(t, "the run in the runs list", 30*time.Second, func() bool {
		list = ntemporal.RunList{}
		return getJSON(t, base, "", &list) == http.StatusOK && len(list.Runs) > 0 && list.Runs[0].RunID == runID
	})
	if list.Temporal != hp || list.Runs[0].Status != "running" {
		t.Errorf("the runs list while the run goes on: %+v", list)
	}
	var d ntemporal.Diagnosis
	if code := getJSON(t, base+"/"+runID, "", &d); code != http.StatusOK || d.Status != "running" || d.Temporal.Status != "running" {
		t.Errorf("the run while it goes on: %d, status %q (workflow %q)", code, d.Status, d.Temporal.Status)
	}

	// The page, opened while it runs through a proxy that cuts every
	// connection within 1.5 s (its reads every 2 s meet cut ones), follows
	// it to its end.
	ctx := browser(t)
	cut := newCutter(t, ts.Listener.Addr().String())
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+cut.ln.Addr().String()+"/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, fmt.Sprintf(`!!document.querySelector('#temporal:not([hidden]) tr[data-temporal-run=%q] a')`, runID), 30*time.Second)
	clickWhenThere(t, ctx, fmt.Sprintf(`tr[data-temporal-run=%q] a`, runID))
	waitPage(t, ctx, `document.querySelector('#run-status') && document.querySelector('#run-status').textContent === 'running'`, 30*time.Second)
	if err := run.wait(); err != nil {
		t.Fatalf("run --temporal: %v\n%s", err, run.out.String())
	}
	waitPage(t, ctx, `document.querySelector('#run-status').textContent === 'completed' && `+
		`[...document.querySelectorAll('[data-node] pre.node-output')].filter((p) => !p.hidden).length === 2`, 30*time.Second)
	if cut.cuts.Load() == 0 {
		t.Error("the proxy cut no connection")
	}
	for _, n := range []string{"a", "b"} {
		want := noderun(t, "show", "--temporal", hp, runID, n)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('[data-node=%q] pre.node-output').textContent`, n)))
		if err != nil {
			t.Fatal(err)
		}
		if got != want || want == "" {
			t.Errorf("node %s on the page: %d bytes; show --temporal: %d bytes", n, len(got), len(want))
		}
		if body := getText(t, base+"/"+runID+"/nodes/"+n+"/output"); body != want {
			t.Errorf("node %s's output: %d bytes; show --temporal: %d bytes", n, len(body), len(want))
		}
	}

	// Over: every body is the CLI's document.
	sch := testkit.Schemas(t)
	waitFor(t, "the runs list to say completed", 30*time.Second, func() bool {
		list = ntemporal.RunList{}
		return getJSON(t, base, "", &list) == http.StatusOK && len(list.Runs) > 0 && list.Runs[0].Status == "completed"
	})
	sameDocument(t, "the runs list", getText(t, base), noderun(t, "status", "--temporal", hp, "--json"))
	testkit.ValidJSON(t, sch["temporal-runs"], "GET /api/temporal/runs", getText(t, base))
	body := getText(t, base+"/"+runID)
	sameDocument(t, "the run", body, noderun(t, "diagnose", "--temporal", hp, runID, "--json"))
	testkit.ValidJSON(t, sch["diagnose-temporal"], "GET /api/temporal/runs/RUN", body)

	// What the frontend does not know is a 404, as the CLI's exit 1 says.
	for _, path := range []string{"/no-such-run", "/" + runID + "/nodes/nope/output"} {
		if code := getJSON(t, base+path, "", &struct{}{}); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
}

// Without --temporal the Temporal endpoints say how to get them.
func TestServeWithoutTemporal(t *testing.T) {
	ts, _ := serve(t, emptyJournal(t), server.Options{})
	resp, err := http.Get(ts.URL + "/api/temporal/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusNotFound || !strings.Contains(e.Error, "serve --temporal HOST:PORT") {
		t.Errorf("GET /api/temporal/runs: %d %q (%v)", resp.StatusCode, e.Error, err)
	}
}

// sameDocument compares two JSON documents as objects.
func sameDocument(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s (the CLI's): %v\n%s", what, err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s differs from the CLI's --json:\nserver: %s\ncli:    %s", what, got, want)
	}
}

// getText is a GET's body; the test fails unless it is a 200.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return string(b)
}

// emptyJournal is the path of a journal without runs.
func emptyJournal(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "j.db")
	if err := testkit.OpenJournal(t, p).Close(); err != nil {
		t.Fatal(err)
	}
	return p
}
