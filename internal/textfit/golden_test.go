package textfit_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// sample is a diagnostic as the runner and its adapters write it: the
// message (the call site's format, filled in with the longest values a run
// sees: response ids, URLs, addresses) and the error it carries, if any.
type sample struct{ msg, cause string }

const (
	respID = "resp_4797d1335e197ac97cb793d9b241c09327e1dc16c4f5985c"
	runID  = "59b9a36f-3901-4242-bb13-134385da92c1"
	thread = "019a2b3c-4d5e-7f80-9a1b-2c3d4e5f6a7b"
)

// samples has one entry for every diagnostic code (the test fails on a
// code without one, so a new code gets its line checked too).
var samples = map[string]sample{
	"NR101": {"disconnect detected after 104 bytes of output, silent for 60s before the cut: an intermediary (proxy, load balancer) likely cuts idle streams at ~60s",
		"responses " + respID + ": stream disconnected before completion: read tcp 127.0.0.1:55534->127.0.0.1:33753: unexpected EOF"},
	"NR102": {"re-attaching to the recorded work (7 reconnects left), 1/8 in 272ms (transport_disconnect)", ""},
	"NR103": {"sending the request again (2 retries left after this), 1/3 in 1.2s (server_error)", `HTTP 503: {"error": {"message": "The server is overloaded or not ready yet.", "type": "server_error"}}`},
	"NR104": {"rate limit wait after 0 bytes of output (retry after 20s)", `HTTP 429: {"error": {"message": "Rate limit reached for gpt-5 in organization org-abc on tokens per min (TPM): Limit 30000, Used 29800, Requested 1200.", "type": "tokens"}}`},
	"NR105": {"provider error after 512 bytes of output", `HTTP 502: <html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx/1.24.0</center></body></html>`},
	"NR106": {"connect failed after 0 bytes of output", `connect_failed: Post "http://127.0.0.1:9/v1/chat/completions": dial tcp 127.0.0.1:9: connect: connection refused`},
	"NR107": {"idle timeout after 2048 bytes of output", "responses " + respID + ": no event for 5m0s (idle_timeout): the stream is silent; checking the response's status"},
	"NR108": {"node completed after recovery", ""},
	"NR109": {"learnt: this route cuts streams silent for ~60s; later calls poll or keep the stream alive before that (poll every 45s)", ""},
	"NR110": {"continuing the answer from its delivered output (7 reconnects left), from byte 235, 1/8 in 202ms (transport_disconnect)", ""},
	"NR111": {"the server repeated the 235-byte prefix before the continuation; the repeat was stripped", ""},
	"NR112": {"the server rejected the continuation form, so continuation is off for this provider; sending the request again from scratch (2 retries left after this)",
		`HTTP 400: {"error": {"message": "Invalid value for 'messages[2].role': an assistant message cannot be last", "type": "invalid_request_error"}}`},
	"NR113": {"the continuation did not start where the delivered output ended: realigned at byte 233 of 235 (2 bytes overlapped)", ""},
	"NR201": {"re-attached to " + respID + " from sequence 59", ""},
	"NR202": {"polling " + respID + " every 5s until it completes (the stream could not be re-attached)", ""},
	"NR203": {"status: in_progress (poll 3, 15s since the cut)", ""},
	"NR204": {"cancelled the stuck response " + respID + " before retrying", ""},
	"NR205": {"sending the request again (1 retries left after this): the response cannot be re-attached (it is gone at the provider)", "responses " + respID + ": HTTP 404: response not found"},
	"NR206": {"output taken from the completed response (1211 bytes from the status, 104 of them already streamed)", ""},
	"NR207": {"response " + respID + " created; journaled for resume", ""},
	"NR208": {"the node failed: cancelled its response " + respID + " at the provider so it stops billing", ""},
	"NR209": {"response " + respID + " keeps running at the provider (detached)", ""},
	"NR210": {"the worker running this node was lost (its last heartbeat: sequence 59, 104 bytes); re-attaching to response " + respID + " from the heartbeated cursor and re-reading the generated part from the provider: nothing is regenerated", ""},
	"NR301": {"thread " + thread + " started", ""},
	"NR302": {"Reconnecting... 2/5 (stream disconnected before completion: error sending request for url (https://api.openai.com/v1/responses))", ""},
	"NR303": {"resuming codex thread " + thread, ""},
	"NR304": {"resume found no thread " + thread + ": the harness started a new session instead (its session store is not the one the thread was written to)", ""},
	"NR305": {"codex: turn failed: stream disconnected before completion: error sending request for url (https://api.openai.com/v1/responses)", ""},
	"NR306": {"codex: thread " + thread + " dropped by the harness: it started thread 019a2b3c-0000-7f80-9a1b-2c3d4e5f6a7b instead", ""},
	"NR401": {"run " + runID + " started: graph demo, profile default, 4 nodes", ""},
	"NR402": {"run completed", ""},
	"NR403": {"run interrupted", ""},
	"NR404": {"skipped: a node it needs did not complete (research failed: the retry budget is spent)", ""},
	"NR405": {"breaker open after 0 bytes of output: the provider failed 5 calls in a row; calls wait 30s before one is tried again", "circuit breaker open for provider chat"},
	"NR406": {"picked up after 235 bytes of attempt 1: re-attaching to response " + respID + " from sequence 59", ""},
	"NR407": {"cache hit: output of node plan of run 59b9a36f (produced 2026-12-04T13:24:24Z), reused without a provider call, from journal /home/user/ci-artifacts/previous-run/noderun.db", ""},
	"NR501": {"the answer exceeded a bound that keeps memory bounded, so it is not retried (see docs/diagnostics.md for the limits)", "chat stream: line of 1048577 bytes exceeds the 1 MiB bound: limit exceeded"},
	"NR502": {"the server's answer is not the protocol, so it is not retried: sending it again would get the same answer; check base_url", `chat stream: protocol violation: event "data: <!DOCTYPE html>" is not JSON`},
	"NR503": {"the journal cannot record, so no more provider work is done: free space (or fix the journal file), then `noderun resume` continues", "journal: append chunk: database or disk is full (SQLITE_FULL)"},
	"NR601": {"waited 1.4s for the quota of provider openai (requests per minute: 500)", ""},
	"NR602": {"parked: waiting 20s for the provider's quota (Retry-After), no retry spent", `HTTP 429: {"error": {"message": "Rate limit reached", "type": "requests"}}`},
	"NR603": {"provider primary unavailable (the provider's circuit breaker is open): moving to fallback backup, continuing its answer from byte 235 (attempt 1's)", ""},
	"NR901": {"node failed after 3 attempts, 2 of 2 retries used", "chat stream: stream disconnected before completion: body ended (finish_reason \"\", [DONE] false)"},
	"NR902": {"authentication failed (HTTP 401): check the API key in OPENAI_API_KEY (provider openai's api_key_env); not retried (https://platform.openai.com/api-keys)", `HTTP 401: {"error": {"message": "Incorrect API key provided: sk-...abcd.", "type": "invalid_request_error", "code": "invalid_api_key"}}`},
	"NR903": {"the retry budget is spent (and nothing is left to re-attach to)", "responses " + respID + ": stream disconnected before completion: read tcp 127.0.0.1:55534->127.0.0.1:33753: read: connection reset by peer"},
	"NR904": {"the profile's recovery deadline passed without the provider recovering", `connect_failed: Post "http://127.0.0.1:9/v1/responses": dial tcp 127.0.0.1:9: connect: connection refused`},
	"NR905": {"the reconnect budget is spent; the request may already have had side effects and the node is marked side_effects: unsafe, so it is not sent again; inspect its journal (noderun show RUN NODE), then rerun it with --retry NODE, or mark it side_effects: idempotent if replay is harmless",
		"chat stream: stream disconnected before completion: body ended (finish_reason \"\", [DONE] false)"},
	"NR906": {"the node was canceled", "context canceled"},
	"NR907": {"the node's timeout passed; raise timeout in the graph if the work needs longer", "context deadline exceeded"},
}

// widths are the room a message has: the live view on an 80- and a
// 100-column terminal, and a pipe's 160 columns less the time, node and
// code around the message.
var widths = []int{60, 80, 133}

// Every diagnostic message, shortened to every width, against a golden
// file: a change of the rule shows as a diff a person reads. The rule's
// promises are checked on each line too, so -update cannot bless a break.
func TestGoldenShortenedMessages(t *testing.T) {
	var b strings.Builder
	for _, c := range diagnostics.Codes() {
		s, ok := samples[c.ID]
		if !ok {
			t.Errorf("%s has no sample message: add one to samples", c)
			continue
		}
		for _, w := range widths {
			got := textfit.Pair(s.msg, s.cause, w)
			fmt.Fprintf(&b, "%s %-13s %3d | %s\n", c.ID, c.Name[:min(len(c.Name), 13)], w, got)
			checkRule(t, c.ID, s, w, got)
		}
	}
	path := filepath.Join("testdata", "shortened.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestGoldenShortenedMessages -update ./internal/textfit writes it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("the shortened messages changed; if that is meant, rerun with -update and read the diff\n%s", diffLines(string(want), b.String()))
	}
}

// checkRule checks what the rule promises of one shortened line.
func checkRule(t *testing.T, id string, s sample, w int, got string) {
	t.Helper()
	whole := s.msg
	if s.cause != "" {
		whole += ": " + s.cause
	}
	if n := utf8.RuneCountInString(got); n > w {
		t.Errorf("%s at %d: %d columns: %q", id, w, n, got)
	}
	const phrase = "stream disconnected before completion"
	if strings.Contains(got, "stream disconnected") && !strings.Contains(got, phrase) {
		t.Errorf("%s at %d: the phrase is cut: %q", id, w, got)
	}
	if strings.Contains(s.cause, phrase) && w >= 80 && !strings.Contains(got, phrase) {
		t.Errorf("%s at %d: the phrase is dropped: %q", id, w, got)
	}
	if strings.Count(got, "(") != strings.Count(got, ")") || strings.Count(got, "[") != strings.Count(got, "]") ||
		strings.Count(got, "{") != strings.Count(got, "}") || strings.Count(got, `"`)%2 != 0 {
		t.Errorf("%s at %d: brackets or quotes unbalanced: %q", id, w, got)
	}
	word := func(x string) string { return strings.Trim(x, "…([{:") } // a gap, an opening bracket split off
	words := map[string]bool{}
	for _, x := range strings.Fields(whole) {
		words[word(x)] = true
	}
	for _, x := range strings.Fields(got) {
		if x = word(x); x != "" && !words[x] {
			t.Errorf("%s at %d: %q is not a whole word of the message: %q", id, w, x, got)
		}
	}
	// The cause's last word ends the line, when its last clause fits in
	// half the room (a JSON or HTML body is one clause, kept only whole).
	if s.cause != "" && utf8.RuneCountInString(lastClause(s.cause)) < w/2 {
		last := strings.Fields(s.cause)
		if !strings.HasSuffix(got, last[len(last)-1]) {
			t.Errorf("%s at %d: the cause's end is lost: %q", id, w, got)
		}
	}
}

// diffLines lists the lines of want and got that differ.
func diffLines(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(wl), len(gl)) {
		var x, y string
		if i < len(wl) {
			x = wl[i]
		}
		if i < len(gl) {
			y = gl[i]
		}
		if x != y {
			fmt.Fprintf(&b, "-%s\n+%s\n", x, y)
		}
	}
	return b.String()
}

// lastClause is what follows the last ": " outside brackets and quotes.
func lastClause(s string) string {
	depth, quoted, start := 0, false, 0
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ':' && depth == 0 && !quoted && strings.HasPrefix(s[i:], ": "):
			start = i + 2
		}
	}
	return s[start:]
}
