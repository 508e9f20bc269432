package sim

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log sink the server's goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Issue 41: a fault's log line says what it did where: after how many
// events it acted (the events actually sent, not a fresh fault's zero), on
// which request, for which node.
func TestFaultLogSaysWhereItActed(t *testing.T) {
	for _, c := range []struct {
		kind FaultKind
		says string
	}{
		{FaultCut, "simulated fault: cut on chat after 150 events (node plan, request req_"},
		{FaultReset, "simulated fault: reset on chat after 150 events (node plan, request req_"},
		{FaultClose, "simulated fault: close on chat after 150 events (node plan, request req_"},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			logs := new(lockedBuffer)
			s := start(t, Config{Seed: 1, Tokens: 300, Logger: slog.New(slog.NewTextHandler(logs, nil)),
				Faults: []Fault{{Node: "plan", Endpoint: EndpointChat, Kind: c.kind, AfterEvents: 150}}})
			req, _ := http.NewRequest(http.MethodPost, s.BaseURL()+"/chat/completions",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(NodeHeader, "plan")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := logs.String()
			if !strings.Contains(got, c.says) || !strings.Contains(got, resp.Header.Get("X-Request-Id")) {
				t.Errorf("log does not say %q (request %s):\n%s", c.says, resp.Header.Get("X-Request-Id"), got)
			}
		})
	}
}
