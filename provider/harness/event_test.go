package harness

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/noderun/noderun/provider"
)

// Lines as Codex 0.169.0 printed them against the simulator.
var codexLines = []string{
	`{"type":"thread.started","thread_id":"01a229a1-9140-7423-82a3-d563ff93a33f"}`,
	`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for ` + "`sim`" + ` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}`,
	`{"type":"turn.started"}`,
	`{"type":"error","message":"Reconnecting... 1/1 (stream disconnected before completion: stream closed before response.completed)"}`,
	`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`,
	`{"type":"error","message":"stream disconnected before completion: stream closed before response.completed"}`,
	`{"type":"turn.failed","error":{"message":"stream disconnected before completion: stream closed before response.completed"}}`,
	`{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"The budget steady cursor"}}`,
	`{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Token budget déjà stream —!\nAnd is long"}}`,
	`{"type":"turn.completed","usage":{"input_tokens":3,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":64,"reasoning_output_tokens":32}}`,
	`{"type":"item.started","item":{"id":"item_3","type":"command_execution","command":"ls","status":"in_progress"}}`,
	`{"type":"turn.failed","error":{"message":{"nested":true}}}`,
}

func TestObserveCodex(t *testing.T) {
	d, err := Builtin("codex")
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]observation, len(codexLines))
	for i, l := range codexLines {
		if obs[i], err = d.observe([]byte(l)); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	if obs[0].ThreadID != "01a229a1-9140-7423-82a3-d563ff93a33f" {
		t.Errorf("thread: %+v", obs[0])
	}
	if o := obs[1]; o.Progress || o.Error || o.Output != nil {
		t.Errorf("a warning item is nothing: %+v", o)
	}
	if o := obs[2]; o.Type != "turn.started" || o.Progress || o.Success || o.Failure {
		t.Errorf("turn.started: %+v", o)
	}
	if o := obs[3]; !o.Error || o.Retry == nil || o.Retry.GiveUpAfter != 0 {
		t.Errorf("a counted retry: %+v", o)
	}
	if o := obs[4]; o.Retry == nil || o.Retry.GiveUpAfter != 2 {
		t.Errorf("the network wait: %+v", o)
	}
	if o := obs[5]; !o.Error || o.Retry != nil || o.Failure {
		t.Errorf("a final error report: %+v", o)
	}
	if o := obs[6]; !o.Failure || o.Message != "stream disconnected before completion: stream closed before response.completed" {
		t.Errorf("turn.failed: %+v", o)
	}
	if o := obs[7]; !o.Progress || o.Output != nil {
		t.Errorf("reasoning: %+v", o)
	}
	if o := obs[8]; !o.Progress || o.Output == nil || *o.Output != "Token budget déjà stream —!\nAnd is long" {
		t.Errorf("agent message: %+v", o)
	}
	if o := obs[9]; !o.Success || o.Usage == nil || *o.Usage != (provider.Usage{InputTokens: 3, OutputTokens: 64, ReasoningTokens: 32}) {
		t.Errorf("turn.completed: %+v %+v", o, o.Usage)
	}
	if o := obs[10]; o.Progress {
		t.Errorf("a started item is not progress: %+v", o)
	}
	if o := obs[11]; o.Message != `{"nested":true}` {
		t.Errorf("an object message is given as JSON: %q", o.Message)
	}
	if o, _ := d.observe([]byte(`{"type":"turn.completed"}`)); !o.Success || o.Usage != nil {
		t.Errorf("turn.completed without usage: %+v", o)
	}
}

func TestParseEvent(t *testing.T) {
	for _, bad := range []string{"", "   ", "null", "[1]", `"s"`, "{", `{"a":1} {"b":2}`, `{"a":1}x`, "Reading additional input from stdin..."} {
		if _, err := parseEvent([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	ev, err := parseEvent([]byte(` {"a":{"b":[{"c":"x"},7,true,null]},"n":12345678901234567890} `))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"a.b.0.c": "x", "a.b.1": "7", "a.b.2": "true", "a.b.3": "", "a.b.4": "",
		"a.b.-1": "", "a.b.x": "", "a": "", "n": "12345678901234567890", "nope": "", "a.b.0.c.d": "", "": ""} {
		if got := ev.str(path); got != want {
			t.Errorf("str(%q) = %q, want %q", path, got, want)
		}
	}
	if ev.int("a.b.1") != 7 || ev.int("n") != 0 || ev.int("a.b.0.c") != 0 {
		t.Errorf("int: %d %d", ev.int("a.b.1"), ev.int("n"))
	}
}

// FuzzParseEvent: no line, however malformed, makes the parser or the
// Codex descriptor's interpretation panic, and what they report is consistent.
func FuzzParseEvent(f *testing.F) {
	for _, l := range codexLines {
		f.Add([]byte(l))
	}
	for _, l := range []string{"", "{}", `{"type":1}`, `{"type":null}`, `{"type":"turn.completed","usage":{"input_tokens":-5,"output_tokens":1e99}}`,
		`{"type":"item.completed","item":[1,2]}`, `{"type":"thread.started","thread_id":{"x":1}}`, "{\"type\":\"error\",\"message\":\"\xff\"}",
		`{"type":"turn.failed","error":"flat"}`, `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`} {
		f.Add([]byte(l))
	}
	d, err := Builtin("codex")
	if err != nil {
		f.Fatal(err)
	}
	other, err := LoadDescriptor(otherAgent)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, perr := parseEvent(line)
		if perr == nil && ev == nil {
			t.Fatal("no error and no event")
		}
		if perr == nil && !bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			t.Fatalf("parsed a line that is not an object: %q", line)
		}
		for _, desc := range []*Descriptor{d, other} {
			o, err := desc.observe(line)
			if perr != nil && err == nil {
				t.Fatalf("observe accepted what parseEvent rejected: %q", line)
			}
			if err != nil {
				if o.Type != "" || o.Success || o.Failure || o.ThreadID != "" {
					t.Fatalf("an error with an observation: %+v", o)
				}
				continue
			}
			if o.Type == "" {
				t.Fatal("an observation without a type")
			}
			if o.Success && o.Failure {
				t.Fatalf("success and failure at once: %q", line)
			}
			if o.Retry != nil && !o.Error {
				t.Fatalf("a retry that is no error report: %+v", o)
			}
			if o.Usage != nil && (o.Usage.InputTokens < 0 || o.Usage.OutputTokens < 0 || o.Usage.ReasoningTokens < 0) {
				t.Fatalf("negative usage %+v", o.Usage)
			}
			if utf8.Valid(line) && !utf8.ValidString(o.Message) {
				t.Fatalf("invalid UTF-8 message from valid input: %q", o.Message)
			}
		}
	})
}
