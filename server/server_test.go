package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/internal/testkit"
	"github.com/noderun/noderun/runner"
	"github.com/noderun/noderun/server"
)

// Every JSON body of the API is the matching command's --json output, as
// objects: the runs list, a run, a node's output and attempts, diagnose.
func TestBodiesAreTheCommandsJSON(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	res := runGraph(t, context.Background(), db, "../testdata/graphs/demo.yaml")
	ts, _ := serve(t, db, server.Options{})
	id := res.RunID
	cases := []struct {
		path string
		args []string
	}{
		{"/api/runs", []string{"status"}},
		{"/api/runs/" + id, []string{"status", id}},
		{"/api/runs/last", []string{"status", "last"}},
		{"/api/runs/" + id[:8], []string{"status", id}},
		{"/api/runs/" + id + "/nodes/report/output", []string{"show", id, "report"}},
		{"/api/runs/" + id + "/nodes/plan/attempts", []string{"show", id, "plan", "--attempts"}},
		{"/api/runs/" + id + "/diagnose", []string{"diagnose", id}},
		{"/api/runs/" + id + "/diagnose?node=plan", []string{"diagnose", id, "plan"}},
	}
	for _, c := range cases {
		var got, want any
		if code := getJSON(t, ts.URL+c.path, "", &got); code != http.StatusOK {
			t.Fatalf("GET %s: %d", c.path, code)
		}
		out := noderun(t, append(c.args, "--json", "--db", db)...)
		if err := json.Unmarshal([]byte(out), &want); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("GET %s differs from noderun %s --json:\n got %s\nwant %s", c.path, strings.Join(c.args, " "), a, b)
		}
	}
	// ?format=text is what `noderun show` prints, byte for byte.
	resp, err := http.Get(ts.URL + "/api/runs/" + id + "/nodes/report/output?format=text")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := noderun(t, "show", id, "report", "--db", db); string(text) != want || want == "" {
		t.Errorf("output as text: %d bytes, show printed %d", len(text), len(want))
	}
	// The report is the HTML page report writes.
	resp, err = http.Get(ts.URL + "/api/runs/" + id + "/report")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<html") || !strings.Contains(string(page), id) {
		t.Errorf("report: %s, %d bytes", resp.Status, len(page))
	}
	// What is not there is a 404 with a JSON error naming it; bad input a 400.
	for path, code := range map[string]int{
		"/api/runs/nosuch":                         http.StatusNotFound,
		"/api/runs/" + id + "/nodes/nosuch/output": http.StatusNotFound,
		"/api/runs/" + id + "/events?kind=bogus":   http.StatusBadRequest,
		"/api/runs/" + id + "/events?after=x":      http.StatusBadRequest,
		"/api/runs/" + id + "/events?node=nosuch":  http.StatusNotFound,
		"/api/nothing":                             http.StatusNotFound,
	} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != code || e.Error == "" {
			t.Errorf("GET %s: %s, error %q; want %d with a message", path, resp.Status, e.Error, code)
		}
	}
}

// With a token, every request needs it (page and API): 401 for the API,
// the login form for a page; a login sets the cookie that carries it.
// Writes always need a token, and a page of another origin is refused.
func TestToken(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	res := runGraph(t, context.Background(), db, writeFile(t, "g.yaml", `name: tiny
cache: false
providers:
  chat: {kind: sim, api: chat, sim: {tokens: 5}}
nodes:
  - {id: a, provider: chat, prompt: hi}
`))
	const token = "0123456789abcdef0123"
	local := &server.Local{DB: db, Dir: t.TempDir()}
	defer local.Close()
	ts, _ := serve(t, db, server.Options{Token: token, Actions: local})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, auth string, cookie *http.Cookie) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	paths := []string{"/api/runs", "/api/runs/last", "/api/runs/last/events", "/api/runs/last/diagnose", "/api/runs/last/report",
		"/api/runs/last/nodes/a/output", "/api/runs/last/nodes/a/stream/status", "/", "/runs/" + res.RunID, "/assets/app.js"}
	for _, p := range paths {
		resp := get(p, "", nil)
		switch {
		case strings.HasPrefix(p, "/api/"):
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s without the token: %s", p, resp.Status)
			}
		case resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login"):
			t.Errorf("GET %s without the token: %s to %q, want the login form", p, resp.Status, resp.Header.Get("Location"))
		}
		if resp := get(p, "Bearer wrong-token-wrong-token", nil); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET %s with a wrong token: %s", p, resp.Status)
		}
		if p == "/api/runs/last/events" {
			continue // a stream: it answers 200 and goes on (the run has ended: end)
		}
		if resp := get(p, "Bearer "+token, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the token: %s", p, resp.Status)
		}
	}
	// The login form: a wrong token is refused, the right one sets the cookie.
	form := func(tok string) *http.Response {
		resp, err := noRedirect.PostForm(ts.URL+"/login", url.Values{"token": {tok}, "next": {"/runs/" + res.RunID}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := form("nope"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong login: %s, cookies %v", resp.Status, resp.Cookies())
	}
	resp := form(token)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs/"+res.RunID || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %s to %q, cookies %v", resp.Status, resp.Header.Get("Location"), resp.Cookies())
	}
	c := resp.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("the cookie is not HttpOnly and SameSite=Strict: %+v", c)
	}
	for _, p := range paths {
		if p == "/api/runs/last/events" {
			continue
		}
		if resp := get(p, "", c); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %s", p, resp.Status)
		}
	}
	// No open redirect after a login.
	if resp, _ := noRedirect.PostForm(ts.URL+"/login", url.Values{"token": {token}, "next": {"//evil.example/x"}}); resp.Header.Get("Location") != "/" {
		t.Errorf("login's next went to %q", resp.Header.Get("Location"))
	}
	// Writes: the token, JSON, and this origin.
	write := func(body string, hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/runs/"+res.RunID+"/resume", strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	auth := "Bearer " + token
	for _, c := range []struct {
		hdr  map[string]string
		want int
	}{
		{map[string]string{"Content-Type": "application/json"}, http.StatusUnauthorized},
		{map[string]string{"Authorization": auth}, http.StatusUnsupportedMediaType},
		{map[string]string{"Authorization": auth, "Content-Type": "application/json", "Origin": "http://evil.example"}, http.StatusForbidden},
		{map[string]string{"Authorization": auth, "Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		// The run completed: nothing to resume (the CLI's rule), a conflict.
		{map[string]string{"Authorization": auth, "Content-Type": "application/json", "Origin": ts.URL}, http.StatusConflict},
	} {
		if got := write(`{}`, c.hdr); got != c.want {
			t.Errorf("POST resume with %v: %d, want %d", c.hdr, got, c.want)
		}
	}
	if got := write(strings.Repeat(" ", server.MaxBody+1), map[string]string{"Authorization": auth, "Content-Type": "application/json"}); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the bound: %d", got)
	}
}

// On loopback without a token, reads are open but only to a loopback host
// name (a page of another site that names 127.0.0.1 by its own domain, DNS
// rebinding, is refused), and writes need the server's own token, which
// only its page carries.
func TestLoopbackWithoutAToken(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "j.db")
	runGraph(t, context.Background(), db, writeFile(t, "g.yaml", "name: t\ncache: false\nproviders:\n  c: {kind: sim, api: chat, sim: {tokens: 3}}\nnodes:\n  - {id: a, provider: c, prompt: hi}\n"))
	local := &server.Local{DB: db, Dir: t.TempDir()}
	defer local.Close()
	ts, srv := serve(t, db, server.Options{Actions: local, LoopbackOnly: true})
	if code := getJSON(t, ts.URL+"/api/runs", "", nil); code != http.StatusOK {
		t.Errorf("a read on loopback: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/runs", nil)
	req.Host = "rebound.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host rebound.example: %s", resp.Status)
	}
	if code, _ := post(t, ts.URL+"/api/runs/last/cancel", "", `{}`); code != http.StatusUnauthorized {
		t.Errorf("a write without the token: %d", code)
	}
	// The page carries the write token.
	resp, err = http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), srv.WriteToken()) || len(srv.WriteToken()) < 32 {
		t.Errorf("the page does not carry the write token")
	}
	if code, body := post(t, ts.URL+"/api/runs/last/cancel", srv.WriteToken(), `{}`); code != http.StatusOK {
		t.Errorf("cancel with the page's token: %d %s", code, body)
	}
}

// No API key reaches any body: a provider that echoes the key in its error
// bodies, journaled (redacted) by the runner, and every body served.
func TestNoKeyInAnyBody(t *testing.T) {
	t.Parallel()
	const key = "sk-served-0123456789abcdefghijKLMNOP"
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"bad key: %s (Authorization: %s)","code":"invalid_api_key"}}`, key, r.Header.Get("Authorization"))
	}))
	defer hostile.Close()
	graph := writeFile(t, "g.yaml", fmt.Sprintf("name: t\nprofile: ci\ncache: false\nproviders:\n  p: {kind: openai, base_url: %s/v1, api_key_env: SERVED_KEY, model: m}\nnodes:\n  - {id: a, prompt: hi}\n", hostile.URL))
	g, err := runner.LoadGraph(graph)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "j.db")
	j := testkit.OpenJournal(t, db)
	res, err := runner.Run(context.Background(), g, runner.Options{Journal: j, Getenv: func(k string) string {
		if k == "SERVED_KEY" {
			return key
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	ts, _ := serve(t, db, server.Options{})
	id := res.RunID
	var all strings.Builder
	for _, p := range []string{"/api/runs", "/api/runs/" + id, "/api/runs/" + id + "/nodes/a/output", "/api/runs/" + id + "/nodes/a/attempts",
		"/api/runs/" + id + "/diagnose", "/api/runs/" + id + "/report", "/api/runs/" + id + "/nodes/a/stream/status", "/api/runs/" + id + "/events", "/", "/runs/" + id} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body) // the event stream ends: the run has ended
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
		all.Write(b)
	}
	text := all.String()
	if !strings.Contains(text, "invalid_api_key") && !strings.Contains(text, "401") {
		t.Fatalf("the bodies do not show the failure at all: the test would prove nothing")
	}
	for i := 0; i+12 <= len(key); i++ {
		if strings.Contains(text, key[i:i+12]) {
			t.Fatalf("a piece of the key (%q) is in a body", key[i:i+12])
		}
	}
}

// Writes: a run started through the server runs in its process and its
// stream ends completed with the outputs of a run from the CLI; a run held
// by a live runner is a 409 naming it; an interrupted run resumes through
// the server to the same outputs; bad input is a 400 naming what is wrong.
func TestWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	graph := writeFile(t, "slow.yaml", slowGraph)
	ref := filepath.Join(t.TempDir(), "ref.db")
	refRun := runGraph(t, context.Background(), ref, graph) // the undisturbed outputs
	// A run in another process, held while it goes.
	p := child(t, "run", "--db", db, graph)
	waitFor(t, "the journal", 20*time.Second, func() bool { return fileExists(db) })
	local := &server.Local{DB: db, Dir: filepath.Dir(graph), Options: runner.Options{Parallel: 4}}
	defer local.Close()
	ts, srv := serve(t, db, server.Options{Actions: local})
	tok := srv.WriteToken()
	held := lastRun(t, ts.URL)
	code, body := post(t, ts.URL+"/api/runs/"+held+"/resume", tok, `{}`)
	if code != http.StatusConflict || !strings.Contains(body, fmt.Sprintf("pid %d", p.cmd.Process.Pid)) {
		t.Errorf("resume of a held run: %d %s", code, body)
	}
	// Interrupted mid-stream (SIGTERM), then resumed through the server.
	resp, r := watch(t, context.Background(), ts.URL+"/api/runs/"+held+"/events", "")
	for {
		ev, err := next(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "delta" {
			break
		}
	}
	p.signal(t, syscallTERM)
	_, end := readToEnd(t, r)
	resp.Body.Close()
	if end.Data["status"] != "interrupted" {
		t.Fatalf("after SIGTERM: %v", end.Data)
	}
	_ = p.wait()
	if code, body := post(t, ts.URL+"/api/runs/"+held+"/resume", tok, `{"retry": ["nosuch"]}`); code != http.StatusBadRequest || !strings.Contains(body, "nosuch") {
		t.Errorf("retry of a node the run lacks: %d %s", code, body)
	}
	if code, body := post(t, ts.URL+"/api/runs/"+held+"/resume", tok, `{"retri": []}`); code != http.StatusBadRequest || !strings.Contains(body, "retri") {
		t.Errorf("a misspelt field: %d %s", code, body)
	}
	if code, body := post(t, ts.URL+"/api/runs/"+held[:8]+"/resume", tok, `{}`); code != http.StatusAccepted {
		t.Fatalf("resume: %d %s", code, body)
	}
	resp, r = watch(t, context.Background(), ts.URL+"/api/runs/"+held+"/events?after=0", "")
	_, end = readToEnd(t, r)
	resp.Body.Close()
	if end.Data["status"] != "completed" {
		t.Fatalf("the resumed run ended %v", end.Data)
	}
	sameOutputs(t, ts.URL, held, ref, refRun.RunID)

	// Started through the server: a file under its directory, and YAML.
	for _, body := range []string{`{"graph": "slow.yaml"}`, fmt.Sprintf(`{"yaml": %q}`, slowGraph)} {
		code, out := post(t, ts.URL+"/api/runs", tok, body)
		if code != http.StatusCreated {
			t.Fatalf("start %s: %d %s", body, code, out)
		}
		var started server.Started
		if err := json.Unmarshal([]byte(out), &started); err != nil || started.URL != "/runs/"+started.RunID {
			t.Fatalf("start: %s", out)
		}
		resp, r := watch(t, context.Background(), ts.URL+"/api/runs/"+started.RunID+"/events", "")
		_, end := readToEnd(t, r)
		resp.Body.Close()
		if end.Data["status"] != "completed" {
			t.Fatalf("the started run ended %v", end.Data)
		}
		sameOutputs(t, ts.URL, started.RunID, ref, refRun.RunID)
	}
	for body, says := range map[string]string{
		`{"graph": "../slow.yaml"}`:                       "relative path",
		`{"graph": "nosuch.yaml"}`:                        "nosuch.yaml",
		`{"yaml": "name: x\nnodes: []\n"}`:                "node",
		`{}`:                                              "give graph",
		`{"graph": "slow.yaml", "yaml": "x"}`:             "not both",
		`{"graph": "slow.yaml", "inputs": {"nope": "1"}}`: "nope",
	} {
		if code, out := post(t, ts.URL+"/api/runs", tok, body); code != http.StatusBadRequest || !strings.Contains(out, says) {
			t.Errorf("start %s: %d %s; want 400 saying %q", body, code, out, says)
		}
	}
}

// sameOutputs checks that every node of a run served has the output of the
// same node in a reference run (noderun show, byte for byte).
func sameOutputs(t *testing.T, base, runID, refDB, refRun string) {
	t.Helper()
	for _, n := range []string{"a", "b"} {
		resp, err := http.Get(base + "/api/runs/" + runID + "/nodes/" + n + "/output?format=text")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := noderun(t, "show", refRun, n, "--db", refDB); string(got) != want {
			t.Errorf("node %s of run %s: %d bytes, the undisturbed run's %d", n, runID, len(got), len(want))
		}
	}
}

// The bodies no command prints match their schemas in docs/json.md: the end
// event, the stream status, a write's answers, an error.
func TestHTTPBodiesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	sch := testkit.Schemas(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "j.db")
	graph := writeFile(t, "tiny.yaml", "name: tiny\ncache: false\nproviders:\n  c: {kind: sim, api: chat, sim: {tokens: 5}}\nnodes:\n  - {id: a, provider: c, prompt: hi}\n")
	res := runGraph(t, context.Background(), db, graph)
	local := &server.Local{DB: db, Dir: filepath.Dir(graph)}
	defer local.Close()
	ts, srv := serve(t, db, server.Options{Actions: local})
	raw := func(method, path, body string) string {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+srv.WriteToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	testkit.ValidJSON(t, sch["http-stream-status"], "stream status", raw(http.MethodGet, "/api/runs/last/nodes/a/stream/status", ""))
	testkit.ValidJSON(t, sch["http-started"], "start", raw(http.MethodPost, "/api/runs", `{"graph": "tiny.yaml"}`))
	testkit.ValidJSON(t, sch["http-cancel"], "cancel", raw(http.MethodPost, "/api/runs/"+res.RunID+"/cancel", `{"nodes": ["a"]}`))
	testkit.ValidJSON(t, sch["http-error"], "an error", raw(http.MethodGet, "/api/runs/nosuch", ""))
	resp, r := watch(t, context.Background(), ts.URL+"/api/runs/"+res.RunID+"/events", "")
	defer resp.Body.Close()
	evs, end := readToEnd(t, r)
	b, _ := json.Marshal(end.Data)
	testkit.ValidJSON(t, sch["http-end"], "end", string(b))
	for _, e := range evs {
		b, _ := json.Marshal(e.Data)
		testkit.ValidJSON(t, sch["events"], "an event", string(b))
	}
}
