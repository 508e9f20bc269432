package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// interactionText reads a whole interaction stream body: the concatenated
// text deltas, the event ids in order, and the last event's type.
func interactionText(t *testing.T, r io.Reader) (text string, ids []string, last string) {
	t.Helper()
	var b strings.Builder
	_, err := readSSE(r, func(e sseEvent) bool {
		var v struct {
			EventType string `json:"event_type"`
			EventID   string `json:"event_id"`
			Delta     struct {
				Type, Text string
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(e.Data), &v); err != nil || v.EventType != e.Name || v.EventID == "" {
			t.Fatalf("event %q: %s (%v)", e.Name, e.Data, err)
		}
		if v.Delta.Type == "text" {
			b.WriteString(v.Delta.Text)
		}
		ids = append(ids, v.EventID)
		last = v.EventType
		return true
	})
	if err != io.EOF {
		t.Fatalf("stream: %v", err)
	}
	return b.String(), ids, last
}

func getURL(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// A background interaction's stream, resumed after any event_id, is the
// rest of it; without last_event_id, all of it; nothing is generated twice.
func TestInteractionResumeByEventID(t *testing.T) {
	s := start(t, Config{Seed: 4, Tokens: 30})
	root := "http://" + s.Addr() + "/v1beta/interactions"
	body, _ := json.Marshal(map[string]any{"model": "sim", "input": "hi", "background": true, "stream": true})
	resp, err := http.Post(root, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	full, ids, last := interactionText(t, resp.Body)
	resp.Body.Close()
	if full != want("sim", "hi", 4, 30) || last != "interaction.completed" || len(ids) != 30+5 {
		t.Fatalf("create stream: %d events ending %s, text %q", len(ids), last, full)
	}
	resp2, err := http.Get(root + "/" + idOf(t, s) + "?stream=true")
	if err != nil {
		t.Fatal(err)
	}
	again, ids2, _ := interactionText(t, resp2.Body)
	resp2.Body.Close()
	if again != full || strings.Join(ids2, ",") != strings.Join(ids, ",") {
		t.Fatal("a stream from the start differs from the create stream")
	}
	for _, k := range []int{0, 2, 17, len(ids) - 2} {
		resp, err := http.Get(root + "/" + idOf(t, s) + "?stream=true&last_event_id=" + ids[k])
		if err != nil {
			t.Fatal(err)
		}
		rest, rids, _ := interactionText(t, resp.Body)
		resp.Body.Close()
		if strings.Join(rids, ",") != strings.Join(ids[k+1:], ",") || !strings.HasSuffix(full, rest) {
			t.Fatalf("after event %d: %d events, text %q", k, len(rids), rest)
		}
	}
	if st := s.Stats(); st.InteractionsCreated != 1 || st.TokensGenerated != 30 {
		t.Fatalf("stats %+v", st)
	}
	code, b := getURL(t, root+"/"+idOf(t, s))
	var got struct {
		Status string
		Steps  []struct {
			Type    string
			Content []struct{ Type, Text string }
		}
	}
	if err := json.Unmarshal(b, &got); code != 200 || err != nil || got.Status != "completed" || len(got.Steps) != 1 ||
		got.Steps[0].Type != "model_output" || len(got.Steps[0].Content) != 1 || got.Steps[0].Content[0].Text != full {
		t.Fatalf("GET: %d %s (want the steps shape)", code, b)
	}
	if code, _ := getURL(t, root+"/"+idOf(t, s)+"?stream=true&last_event_id=bm9wZS8x"); code != 400 {
		t.Fatalf("a foreign last_event_id: %d", code)
	}
}

// idOf is the one interaction s holds.
func idOf(t *testing.T, s *Server) string {
	t.Helper()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	for id := range s.store.byID {
		if strings.HasPrefix(id, "v1_") {
			return id
		}
	}
	t.Fatal("no interaction")
	return ""
}

func TestInteractionRequestsRejected(t *testing.T) {
	s := start(t, Config{Tokens: 3})
	root := "http://" + s.Addr() + "/v1beta/interactions"
	for _, body := range []map[string]any{
		{"input": "x", "background": true, "stream": true},
		{"model": "m", "agent": "a", "input": "x", "background": true, "stream": true},
		{"model": "m", "input": "x", "stream": true},
		{"model": "m", "input": "x", "background": true, "stream": true, "store": false},
	} {
		if code, _, b := post(t, root, body); code != 400 {
			t.Errorf("%v: %d %s", body, code, b)
		}
	}
	if code, _ := getURL(t, root+"/v1_nope"); code != 404 {
		t.Errorf("unknown interaction: %d", code)
	}
	if s.Stats().InteractionsCreated != 0 {
		t.Error("a rejected request created an interaction")
	}
}
