package runner

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/graph"
)

// Issue 42, point 3: a harness provider's env values (the token its CLI
// logs in with) are never journaled, and a resume gives them back. Codex
// runs against the simulator through a proxy that records the bearer
// tokens it sends; the run is interrupted mid-stream; with the graph file
// gone, a resume without the token in its environment is refused naming
// it, and one with it completes, Codex sending the token. No 12 characters
// of the token are anywhere in the journal's files.
func TestHarnessEnvIsNeverJournaled(t *testing.T) {
	t.Parallel() // no CPU slot: Codex mostly waits on the paced simulator here
	const token = "sk-cli-login-7f3a9c2e5b8d1f4a6c0e9b2d7a5f3c1e8b6d4a2f"
	srv := simtest.Start(t, sim.Config{Tokens: 400, TokensPerSecond: 100})
	var mu sync.Mutex
	var sent []string
	target, _ := url.Parse(srv.BaseURL())
	root := *target
	root.Path = ""
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		rp := httputil.NewSingleHostReverseProxy(&root)
		rp.FlushInterval = -1
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	sentToken := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range sent {
			if s == token {
				n++
			}
		}
		return n
	}

	rig := codexGraph(t, proxy.URL+target.Path, harnessProfile{reconnects: 3, deadline: 60 * time.Second}, "", "")
	src := strings.Replace(string(rig.g.Source), `"SIM_KEY":"sim-test-key"`, `"SIM_KEY":"`+token+`"`, 1)
	if src == string(rig.g.Source) {
		t.Fatal("the rig's graph no longer sets SIM_KEY as this test expects")
	}
	g := parseTestGraph(t, src) // from a file: the resume below removes it
	path := g.Path
	j := openJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // mid-stream: Codex shows its answer only when its turn is done
		for srv.Stats().TokensGenerated < 50 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	res, err := Run(ctx, g, Options{Journal: j})
	if !errors.Is(err, ErrInterrupted) || sentToken() == 0 {
		t.Fatalf("the first run: %v, the token sent %d times (want interrupted, having sent it)", err, sentToken())
	}
	run, err := j.Run(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if jg, err := ParseGraph(run.GraphPath, run.GraphText); err != nil || len(jg.Providers["agent"].Env) != 2 ||
		jg.Providers["agent"].Env["SIM_KEY"] != graph.EnvHidden || jg.Providers["agent"].Env["CODEX_HOME"] != graph.EnvHidden {
		t.Errorf("the journaled graph does not keep the env names with their values hidden (%v):\n%s", err, run.GraphText)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	_, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j, Getenv: noEnv})
	var missing *MissingEnvError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "SIM_KEY (env of provider agent)") {
		t.Fatalf("a resume that cannot find the env values: %v, want a MissingEnvError naming SIM_KEY", err)
	}
	before := sentToken()
	env := map[string]string{"SIM_KEY": token, "CODEX_HOME": rig.home}
	res, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j, Getenv: func(k string) string { return env[k] }})
	if err != nil || res.Status != journal.RunCompleted || res.Nodes[0].Output == "" {
		t.Fatalf("resume with the values in the environment: %v, %+v", err, res)
	}
	if sentToken() == before {
		t.Errorf("the resumed Codex did not send the token: %d requests before, sent %q", before, sent)
	}
	if err := j.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(j.Path() + suffix)
		if err != nil {
			continue
		}
		for i := 0; i+12 <= len(token); i++ {
			if strings.Contains(string(b), token[i:i+12]) {
				t.Fatalf("the journal's file %s holds %q, 12 characters of the token", j.Path()+suffix, token[i:i+12])
			}
		}
	}
}
