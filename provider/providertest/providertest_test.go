package providertest_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/providertest"
)

// words is what the line server streams, one numbered line an event.
var words = strings.Fields("sockets close and gateways cut idle streams but the work goes on at the provider and nothing is generated twice when a runner resumes by id and cursor")

// lineServer streams words as "SEQ WORD" lines after "REF r1", or the lines
// after ?after=SEQ on ?ref=r1; cut > 0 cuts the next stream after that many
// lines (for real: the handler aborts and the connection closes).
type lineServer struct {
	*httptest.Server
	cut atomic.Int32
}

func newLineServer(t *testing.T) *lineServer {
	s := &lineServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cut := int(s.cut.Swap(0))
		after := -1
		if r.URL.Query().Get("ref") == "" {
			fmt.Fprintln(w, "REF r1")
		} else {
			after, _ = strconv.Atoi(r.URL.Query().Get("after"))
		}
		sent := 0
		for i := after + 1; i < len(words); i++ {
			if cut > 0 && sent == cut {
				panic(http.ErrAbortHandler)
			}
			fmt.Fprintf(w, "%d %s\n", i, words[i])
			w.(http.Flusher).Flush()
			sent++
		}
		fmt.Fprintln(w, "[DONE]")
	}))
	t.Cleanup(s.Close)
	return s
}

// lineAdapter speaks lineServer's protocol; broken names a way to break
// the contract (for the suite's own test), "" for none.
type lineAdapter struct {
	url    string
	broken string
}

func (p *lineAdapter) Capabilities() provider.Capabilities {
	return provider.Capabilities{Resume: true}
}

func (p *lineAdapter) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	return p.get(ctx, p.url, emit)
}

func (p *lineAdapter) Resume(ctx context.Context, req provider.Request, cur provider.Cursor, emit provider.Emit) error {
	after := cur.Seq
	if p.broken == "resume from the start" {
		after = -1
	}
	return p.get(ctx, fmt.Sprintf("%s?ref=%s&after=%d", p.url, cur.Ref, after), emit)
}

func (p *lineAdapter) get(ctx context.Context, url string, emit provider.Emit) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return diagnostics.Classify(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ref, ok := strings.CutPrefix(line, "REF "); ok {
			if err := emit(provider.Event{Kind: provider.KindRef, Ref: ref, Seq: -1}); err != nil {
				return err
			}
			continue
		}
		if line == "[DONE]" {
			return emit(provider.Event{Kind: provider.KindDone, Seq: -1})
		}
		n, text, _ := strings.Cut(line, " ")
		seq, _ := strconv.ParseInt(n, 10, 64)
		if err := emit(provider.Event{Kind: provider.KindDelta, Text: text + " ", Seq: seq}); err != nil && p.broken != "ignore emit errors" {
			return err
		}
	}
	if p.broken == "an ended stream is done" {
		return emit(provider.Event{Kind: provider.KindDone, Seq: -1})
	}
	return fmt.Errorf("%w: %v", diagnostics.ErrDisconnected, sc.Err())
}

func config(t *testing.T, broken string) providertest.Config {
	s := newLineServer(t)
	return providertest.Config{
		New:     func() provider.Provider { return &lineAdapter{url: s.URL, broken: broken} },
		Request: provider.Request{Node: "n", Prompt: "p"},
		Want:    strings.Join(words, " ") + " ",
		CutNext: func(after int) { s.cut.Store(int32(after)) },
	}
}

// A conforming adapter passes.
func TestConforming(t *testing.T) {
	providertest.Test(t, config(t, ""))
}

// TestBroken runs the suite on a broken adapter; it is meant to fail, and
// runs only inside TestTheSuiteCatches.
func TestBroken(t *testing.T) {
	broken := os.Getenv("PROVIDERTEST_BROKEN")
	if broken == "" {
		return // run by TestTheSuiteCatches only
	}
	providertest.Test(t, config(t, broken))
}

// The suite fails an adapter for each way of breaking the contract, with
// the check that caught it and why: run in a child test process, since a
// failing check fails its test.
func TestTheSuiteCatches(t *testing.T) {
	var wg sync.WaitGroup
	for broken, want := range map[string]string{
		"an ended stream is done": "--- FAIL: TestBroken/cut",
		"ignore emit errors":      "--- FAIL: TestBroken/emit_error",
		"resume from the start":   "--- FAIL: TestBroken/resume",
	} {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBroken$", "-test.v")
			cmd.Env = append(os.Environ(), "PROVIDERTEST_BROKEN="+broken)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("an adapter that breaks the contract (%s): %v, want %q in:\n%s", broken, err, want, out)
			}
		})
	}
	wg.Wait()
}
