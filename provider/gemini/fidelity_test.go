package gemini

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
)

// shape is a stream's events as event_type (and, for a delta, its type),
// runs of one folded into one: its shape, whatever the answer's length.
func shape(t *testing.T, stream string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"event_type"`
			Delta struct {
				Type string `json:"type"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		name := ev.Type
		if ev.Delta.Type != "" {
			name += "/" + ev.Delta.Type
		}
		if len(out) == 0 || out[len(out)-1] != name {
			out = append(out, name)
		}
	}
	return out
}

// Issue 43: the documented Interactions stream (docEvents, from
// https://ai.google.dev/gemini-api/docs/interactions/streaming), replayed
// over a real socket, is read by the adapter as the answer it carries; and
// the simulator's stream of a thinking interaction has the documented shape.
func TestFidelityWithTheDocumentedStream(t *testing.T) {
	doc := sseOf(docEvents)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(doc))
	}))
	defer ts.Close()
	p, err := New(Config{BaseURL: ts.URL, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rec := &recorder{}
	if err := p.Stream(t.Context(), simRequest("doc"), rec.emit); err != nil {
		t.Fatal(err)
	}
	done := rec.events()[len(rec.events())-1]
	if rec.text(provider.KindDelta) != "1, 2, 3, 4, 5" || rec.text(provider.KindReasoning) != "Counting." || done.Kind != provider.KindDone ||
		done.Usage == nil || done.Usage.OutputTokens != 9+3 || done.Usage.ReasoningTokens != 3 {
		t.Fatalf("the documented stream: %q, thoughts %q, last %+v", rec.text(provider.KindDelta), rec.text(provider.KindReasoning), done)
	}

	s := startSim(t, sim.Config{Tokens: 12})
	resp, err := http.Post("http://"+s.Addr()+"/v1beta/interactions", "application/json", strings.NewReader(
		`{"model":"sim","input":"hi","stream":true,"background":true,"store":true,"generation_config":{"thinking_level":"low","thinking_summaries":"auto"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	want, have := shape(t, doc), shape(t, b.String())
	if !slices.Equal(want, have) {
		t.Errorf("the simulator's stream has the shape\n%v\nthe documented one\n%v", have, want)
	}
}
