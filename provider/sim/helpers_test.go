package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// leakChecked records the tests whose leak check is registered.
var leakChecked sync.Map

// start runs a simulator for the test and closes it at the end. After the
// test's last server closed, it checks that no goroutine of this package was
// left behind (cleanups run last-in first-out, so the check registered with
// the first server runs after every server's Close). setup runs between New
// and Start, before any goroutine of the server exists.
func start(t testing.TB, cfg Config, setup ...func(*Server)) *Server {
	t.Helper()
	if _, dup := leakChecked.LoadOrStore(t, true); !dup {
		t.Cleanup(func() {
			leakChecked.Delete(t)
			noSimGoroutines(t)
		})
	}
	s := New(cfg)
	for _, f := range setup {
		f(s)
	}
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// noSimGoroutines fails if a goroutine still runs code of this package
// (other than the test's own frames) shortly after a Close.
func noSimGoroutines(t testing.TB) {
	t.Helper()
	var leaked string
	for range 100 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = ""
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "noderun/provider/sim.") && !strings.Contains(g, "testing.tRunner") &&
				!strings.Contains(g, "_test.go") {
				leaked = g
				break
			}
		}
		if leaked == "" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("goroutine left after Close:\n%s", leaked)
}

// client is a real go-openai client for s, with its own transport.
func client(t testing.TB, s *Server) *openai.Client {
	t.Helper()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.BaseURL()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = &http.Client{Transport: tr}
	cfg.EmptyMessagesLimit = 10_000
	return openai.NewClientWithConfig(cfg)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// want is the text the simulator produces for a prompt.
func want(model, prompt string, seed int64, n int) string {
	return strings.Join(Text(model, prompt, seed, n), "")
}

// sseEvent is one raw SSE event.
type sseEvent struct {
	Name string
	Data string
}

// seq reads the event's sequence_number.
func (e sseEvent) seq() int {
	var v struct {
		N int `json:"sequence_number"`
	}
	_ = json.Unmarshal([]byte(e.Data), &v)
	return v.N
}

func (e sseEvent) field(name string) string {
	var v map[string]any
	_ = json.Unmarshal([]byte(e.Data), &v)
	s, _ := v[name].(string)
	return s
}

// readSSE is a minimal spec-following SSE reader: it returns the events and
// comments read until the body ends, and io.ErrUnexpectedEOF when an event
// was cut by the end of the body. The body's own read error wins.
func readSSE(r io.Reader, each func(sseEvent) bool) (comments int, err error) {
	br := bufio.NewReader(r)
	var ev sseEvent
	var data []string
	pending := false
	for {
		line, rerr := br.ReadString('\n')
		if rerr != nil {
			if rerr == io.EOF {
				if line != "" || pending {
					return comments, io.ErrUnexpectedEOF
				}
				return comments, io.EOF
			}
			return comments, rerr
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if pending && data != nil {
				ev.Data = strings.Join(data, "\n")
				if !each(ev) {
					return comments, nil
				}
			}
			ev, data, pending = sseEvent{}, nil, false
		case strings.HasPrefix(line, ":"):
			comments++
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			pending = true
			switch k {
			case "event":
				ev.Name = v
			case "data":
				data = append(data, v)
			}
		}
	}
}

// resume GETs a background stream from starting_after; it returns the raw
// HTTP response.
func resume(t testing.TB, ctx context.Context, s *Server, id string, after int) *http.Response {
	t.Helper()
	url := fmt.Sprintf("%s/responses/%s?stream=true&starting_after=%d", s.BaseURL(), id, after)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// post sends a raw JSON POST and returns status, headers and body.
func post(t testing.TB, url string, body any) (int, http.Header, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
