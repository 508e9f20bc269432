package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
	"github.com/noderun/noderun/runner/graph"
)

const contTokens = 40 // short answers: the table runs 27 nodes

var contForms = []string{"prefix", "continue_final_message", "assistant_last"}

// contGraph is one chat node against baseURL whose provider continues in form.
func contGraph(t *testing.T, baseURL, form, node, extra string) *Graph {
	t.Helper()
	return parseTestGraph(t, fmt.Sprintf("name: t\nprofile: ci\nproviders:\n  p:\n    kind: openai\n    base_url: %s\n    model: sim\n    continuation: %s\nnodes:\n  - id: %s\n    prompt: write about %s\n%s",
		baseURL, form, node, node, extra))
}

func contAnswer(node string) string {
	return strings.Join(sim.Text("sim", "write about "+node, 1, contTokens), "")
}

func attr(ds []diagRec, code diagnostics.Code, key string) (any, bool) {
	for _, d := range ds {
		if d.Code == code.ID {
			v, ok := d.Attrs[key]
			return v, ok
		}
	}
	return nil, false
}

// The acceptance table of continuation: in each form, a chat node whose
// stream is closed, reset or cut mid-line at 10 %, 50 % and 95 % of its
// answer completes byte-identical to the undisturbed answer, and the
// simulator generated each token of the answer exactly once (nothing
// regenerated), in two requests: the dropped one and its continuation.
func TestChatNodeContinuesDroppedAnswer(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens})
	j := openJournal(t)
	for _, form := range contForms {
		for _, kind := range []sim.FaultKind{sim.FaultClose, sim.FaultReset, sim.FaultCut} {
			for _, pct := range []int{10, 50, 95} {
				node := fmt.Sprintf("n_%s_%s_%d", strings.ReplaceAll(form, "_", ""), kind, pct)
				t.Run(node, func(t *testing.T) {
					// after the role chunk and pct % of the tokens
					srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Times: 1, Kind: kind, AfterEvents: 1 + contTokens*pct/100})
					before := srv.Stats()
					res := runGraph(t, contGraph(t, srv.BaseURL(), form, node, ""), j)
					n := res.Nodes[0]
					if want := contAnswer(node); n.State != journal.NodeCompleted || n.Output != want {
						t.Fatalf("node %s (%v)\n got %q\nwant %q", n.State, n.Err, n.Output, want)
					}
					after := srv.Stats()
					if gen := after.TokensGenerated - before.TokensGenerated; gen != contTokens {
						t.Errorf("tokens generated = %d, want %d (0 regenerated)", gen, contTokens)
					}
					if req := after.Requests[sim.EndpointChat] - before.Requests[sim.EndpointChat]; req != 2 || after.ContinuedRequests != before.ContinuedRequests+1 {
						t.Errorf("%d chat requests, %d continued; want 2 and 1", req, after.ContinuedRequests-before.ContinuedRequests)
					}
					ds := diagRecs(t, j, res.RunID, node)
					got := codes(t, j, res.RunID, node)
					if !has(got, diagnostics.DisconnectDetected.ID, diagnostics.ContinueScheduled.ID, diagnostics.ContinueAccepted.ID, diagnostics.Recovered.ID) ||
						has(got, diagnostics.RetryStarted.ID) {
						t.Errorf("codes %v: want disconnect, continue, accepted, recovered and no retry", got)
					}
					from, _ := attr(ds, diagnostics.ContinueScheduled, "continued_from")
					if f, ok := from.(float64); !ok || f <= 0 || !strings.HasPrefix(n.Output, "") {
						t.Errorf("NR110 continued_from = %v", from)
					}
					if v, _ := attr(ds, diagnostics.Recovered, "regenerated_bytes"); v != float64(0) {
						t.Errorf("NR108 regenerated_bytes = %v, want 0", v)
					}
					if atts, err := j.Attempts(t.Context(), res.RunID, node); err != nil || len(atts) != 1 {
						t.Errorf("attempts %+v (%v): a continue goes on in its attempt", atts, err)
					}
					if out, err := j.RebuildOutput(t.Context(), res.RunID, node, 1); err != nil || out != n.Output {
						t.Errorf("journal rebuilds %q (%v)", out, err)
					}
				})
			}
		}
	}
}

// cutProxy forwards TCP connections to target and cuts the server's side of
// the next connection after a given number of bytes: byte-level cuts at any
// offset of the HTTP response, inside a frame, a JSON string or a character.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	limit  int // for the next connection; 0: none
	reset  bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) cutNext(n int, reset bool) {
	p.mu.Lock()
	p.limit, p.reset = n, reset
	p.mu.Unlock()
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		limit, reset := p.limit, p.reset
		p.limit = 0
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() {
			defer p.wg.Done()
			if limit <= 0 {
				_, _ = io.Copy(c, up)
			} else {
				_, _ = io.CopyN(c, up, int64(limit))
				if tc, ok := c.(*net.TCPConn); ok && reset {
					_ = tc.SetLinger(0) // RST
				}
			}
			_ = c.Close()
			_ = up.Close()
		}()
	}
}

// Byte-level cuts at arbitrary offsets of the response, several inside a
// multi-byte UTF-8 character of a data line: the output is byte-identical
// and nothing is regenerated, in each form.
func TestChatNodeContinuesThroughByteCuts(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens})
	px := startCutProxy(t, srv.Addr())
	base := "http://" + px.ln.Addr().String() + "/v1"
	j := openJournal(t)
	// Where the characters of an answer's frames fall in the response: the
	// frames have the same length from one response to the next.
	capture := startCutProxy(t, srv.Addr())
	raw := rawResponse(t, "http://"+capture.ln.Addr().String()+"/v1/chat/completions")
	var offsets []int
	body := strings.Index(raw, "\r\n\r\n") + 4
	for i := body + 200; i < len(raw)-40 && len(offsets) < 3; i++ {
		if !utf8.RuneStart(raw[i]) && strings.LastIndex(raw[:i], "data: ") > strings.LastIndex(raw[:i], "\n") { // inside a character of a data line
			offsets = append(offsets, i)
			i += 700
		}
	}
	if len(offsets) < 3 {
		t.Fatalf("found only %d cut points inside a character in %q", len(offsets), raw)
	}
	offsets = append(offsets, body+1, body+333, len(raw)*2/3+1)
	for fi, form := range contForms {
		for oi, off := range offsets {
			node := fmt.Sprintf("b_%s_%d", strings.ReplaceAll(form, "_", ""), off)
			px.cutNext(off, (fi+oi)%2 == 1)
			before := srv.Stats()
			res := runGraph(t, contGraph(t, base, form, node, ""), j)
			n := res.Nodes[0]
			if want := contAnswer(node); n.State != journal.NodeCompleted || n.Output != want {
				t.Fatalf("%s cut at byte %d: node %s (%v)\n got %q\nwant %q", form, off, n.State, n.Err, n.Output, want)
			}
			// The cut is the proxy's: the simulator wrote tokens into the
			// void that the client never got, and those are generated again.
			// What was delivered is not: the continuation generates exactly
			// the tokens after the delivered prefix.
			from, _ := attr(diagRecs(t, j, res.RunID, node), diagnostics.ContinueScheduled, "continued_from")
			f, _ := from.(float64)
			k := tokensIn(node, int(f))
			if k < 0 {
				t.Fatalf("%s cut at byte %d: continued from %v bytes, not a token boundary of the answer", form, off, from)
			}
			if got := doneUsage(t, j, res.RunID, node).OutputTokens; got != contTokens-k {
				t.Errorf("%s cut at byte %d: the continuation generated %d tokens, want %d (after %d delivered)", form, off, got, contTokens-k, k)
			}
			t.Logf("%s cut at byte %d: %d tokens delivered before the cut", form, off, k)
			// Before any output there is nothing to continue: that drop is retried.
			if continued := srv.Stats().ContinuedRequests - before.ContinuedRequests; continued != min(int64(k), 1) {
				t.Errorf("%s cut at byte %d, after %d tokens: %d continued requests", form, off, k, continued)
			}
		}
	}
}

// tokensIn is how many tokens of node's answer its first n bytes hold, -1
// when n is not on a token boundary.
func tokensIn(node string, n int) int {
	at := 0
	for i, tok := range sim.Text("sim", "write about "+node, 1, contTokens) {
		if at == n {
			return i
		}
		at += len(tok)
	}
	if at == n {
		return contTokens
	}
	return -1
}

// doneUsage is the usage journaled with the node's terminal event.
func doneUsage(t *testing.T, j *journal.Journal, run, node string) provider.Usage {
	t.Helper()
	evs, err := j.Events(t.Context(), run, journal.EventFilter{Node: node, Kinds: []string{"done"}, AfterSeq: -1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("done events %v %v", evs, err)
	}
	var u provider.Usage
	if err := json.Unmarshal(evs[0].Payload, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// rawResponse is the bytes of one streamed chat response, as they cross the wire.
func rawResponse(t *testing.T, url string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.Split(url, "/v1")[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"sim","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"write about b_x"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A server that rejects the form: one 400, then the node is retried from
// scratch (NR112 says why) and the provider is not asked to continue again
// in the run: a later node's drop is retried.
func TestChatNodeContinuationRejected(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens, Continuation: []string{sim.FormAssistantLast}})
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultClose, AfterEvents: 20})
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Requests: []int{4}, Kind: sim.FaultReset, AfterEvents: 20})
	j := openJournal(t)
	g := contGraph(t, srv.BaseURL(), "prefix", "first", "  - id: second\n    needs: [first]\n    prompt: write about second\n")
	res := runGraph(t, g, j)
	for i, node := range []string{"first", "second"} {
		if n := res.Nodes[i]; n.State != journal.NodeCompleted || n.Output != contAnswer(node) {
			t.Fatalf("%s: %s (%v), output equal %v", node, n.State, n.Err, n.Output == contAnswer(node))
		}
	}
	st := srv.Stats()
	if st.Requests[sim.EndpointChat] != 5 || st.ContinuedRequests != 0 {
		t.Errorf("chat requests %d, continued %d: want 5 (drop, rejected continue, retry; drop, retry) and 0", st.Requests[sim.EndpointChat], st.ContinuedRequests)
	}
	first := diagRecs(t, j, res.RunID, "first")
	var rejected []diagRec
	for _, d := range first {
		if d.Code == diagnostics.ContinueRejected.ID {
			rejected = append(rejected, d)
		}
	}
	if len(rejected) != 1 || !strings.Contains(rejected[0].Message, "retrying") {
		t.Fatalf("NR112 %+v in %s", rejected, dumpDiags(first))
	}
	if v, _ := attr(first, diagnostics.ContinueRejected, "regenerated_bytes"); v == float64(0) || v == nil {
		t.Errorf("the retry after the rejection regenerates the delivered output: regenerated_bytes = %v", v)
	}
	if got := codes(t, j, res.RunID, "second"); slices.Contains(got, diagnostics.ContinueScheduled.ID) || !has(got, diagnostics.RetryStarted.ID) {
		t.Errorf("second node: %v, want a plain retry (the form was rejected in this run)", got)
	}
	if got := codes(t, j, res.RunID, "first"); slices.Contains(got, diagnostics.DeterministicError.ID) {
		t.Errorf("the rejection was reported as a deterministic error: %v", got)
	}
}

// A continue re-sends the request: an unsafe node is not continued (nor
// retried), an idempotent one is.
func TestChatNodeContinuationSideEffects(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens})
	j := openJournal(t)
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Times: 1, Kind: sim.FaultClose, AfterEvents: 10})
	res := runGraph(t, contGraph(t, srv.BaseURL(), "prefix", "unsafe", "    side_effects: unsafe\n"), j)
	if n := res.Nodes[0]; n.State != journal.NodeFailed {
		t.Fatalf("unsafe node %s", n.State)
	}
	if got := codes(t, j, res.RunID, "unsafe"); !has(got, diagnostics.UnsafeReplayRefused.ID) || slices.Contains(got, diagnostics.ContinueScheduled.ID) {
		t.Errorf("unsafe: %v", got)
	}
	srv.AddFault(sim.Fault{Endpoint: sim.EndpointChat, Times: 1, Kind: sim.FaultClose, AfterEvents: 10})
	res = runGraph(t, contGraph(t, srv.BaseURL(), "prefix", "idem", "    side_effects: idempotent\n"), j)
	if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != contAnswer("idem") {
		t.Fatalf("idempotent node %s (%v)", n.State, n.Err)
	}
	if got := codes(t, j, res.RunID, "idem"); !has(got, diagnostics.ContinueScheduled.ID) {
		t.Errorf("idempotent: %v", got)
	}
}

// A server that repeats the prefix: stripped, and the journal says so.
func TestChatNodeContinuationRepeatedPrefix(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens, ContinuationEcho: true,
		Faults: []sim.Fault{{Endpoint: sim.EndpointChat, Requests: []int{1}, Kind: sim.FaultCut, AfterEvents: 25}}})
	j := openJournal(t)
	res := runGraph(t, contGraph(t, srv.BaseURL(), "assistant_last", "echo", ""), j)
	if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != contAnswer("echo") {
		t.Fatalf("node %s (%v)\n got %q\nwant %q", n.State, n.Err, n.Output, contAnswer("echo"))
	}
	if v, _ := attr(diagRecs(t, j, res.RunID, "echo"), diagnostics.ContinueAccepted, "prefix_repeated"); v != true {
		t.Errorf("NR111 prefix_repeated = %v", v)
	}
}

// The graph parser knows the same forms as the adapters.
func TestGraphContinuationForms(t *testing.T) {
	var want []string
	for _, c := range provider.Continuations() {
		want = append(want, string(c))
	}
	if got := graph.ContinuationForms(); !slices.Equal(got, want) {
		t.Fatalf("graph forms %v, provider forms %v", got, want)
	}
}

// Ctrl-C, then `noderun resume`: the interrupted chat answer is continued
// from its journaled output, not generated again.
func TestResumeContinuesInterruptedChatNode(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	srv := simtest.Start(t, sim.Config{Seed: 1, Tokens: contTokens, TokensPerSecond: 40})
	g := contGraph(t, srv.BaseURL(), "continue_final_message", "slow", "")
	j := openJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Interrupted once the answer has begun (not after a fixed time, which a
	// busy machine may spend before the first token).
	res, err := Run(ctx, g, Options{Journal: j, OnProgress: func(p Progress) {
		if p.State == ProgressData && p.Bytes > 0 {
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) || res.Status != journal.RunInterrupted {
		t.Fatalf("run %v %v", res, err)
	}
	part, err := j.RebuildOutput(context.Background(), res.RunID, "slow", 1)
	k := tokensIn("slow", len(part))
	if err != nil || k <= 0 || k >= contTokens {
		t.Fatalf("journaled %q (%d tokens, %v): want a partial answer", part, k, err)
	}
	res, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Nodes[0]; n.State != journal.NodeCompleted || n.Output != contAnswer("slow") {
		t.Fatalf("resumed node %s (%v)\n got %q\nwant %q", n.State, n.Err, n.Output, contAnswer("slow"))
	}
	if got := doneUsage(t, j, res.RunID, "slow").OutputTokens; got != contTokens-k {
		t.Errorf("the resumed request generated %d tokens, want %d (after the %d journaled)", got, contTokens-k, k)
	}
	if st := srv.Stats(); st.ContinuedRequests != 1 || st.Requests[sim.EndpointChat] != 2 {
		t.Errorf("%d chat requests, %d continued: want 2 and 1", st.Requests[sim.EndpointChat], st.ContinuedRequests)
	}
}
