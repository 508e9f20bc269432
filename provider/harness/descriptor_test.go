package harness

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
)

const minimal = `name: m
command: m
start: [run, "{prompt}"]
success: {event: done}
output: {event: msg, text: text}
`

func TestParseDescriptorErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // each "line N: msg" or a message fragment
	}{
		{"empty", "", []string{"the descriptor is empty"}},
		{"unknown field", minimal + "retries: 3\n", []string{`line 6: unknown field "retries"`}},
		{"unknown nested field", minimal + "thread: {event: s, id: x, path: y}\n", []string{`line 6: unknown field "path"`}},
		{"duplicate key", minimal + "name: again\n", []string{`line 6: mapping key "name" already defined at line 1`}},
		{"syntax", "start: [run\n", []string{"line 1:"}},
		{"not a list", strings.Replace(minimal, `start: [run, "{prompt}"]`, "start: run", 1), []string{"line 3: an argv template must be a list"}},
		{"unknown placeholder", strings.Replace(minimal, `"{prompt}"`, `"{prompt}", "{promt}"`, 1), []string{"line 3: unknown placeholder {promt}"}},
		{"unknown filter", strings.Replace(minimal, `"{prompt}"`, `"{prompt|yaml}"`, 1), []string{`line 3: unknown filter "yaml"`}},
		{"unclosed brace", strings.Replace(minimal, `"{prompt}"`, `"{prompt}", "a{b"`, 1), []string{"line 3: unclosed {"}},
		{"args in a group", strings.Replace(minimal, `"{prompt}"`, `"{prompt}", [x, "{args}"]`, 1), []string{"line 3: {args} must be an item of its own"}},
		{"args inside a string", strings.Replace(minimal, `"{prompt}"`, `"{prompt}", "x{args}"`, 1), []string{"line 3: {args} must be an item of its own"}},
		{"no prompt", strings.Replace(minimal, `"{prompt}"`, `x`, 1), []string{"line 3: start must pass the prompt"}},
		{"missing start", strings.Replace(minimal, "start: [run, \"{prompt}\"]\n", "", 1), []string{"start is required"}},
		{"missing success and output", "name: m\nstart: [\"{prompt}\"]\n", []string{"line 1: success is required", "line 1: output is required"}},
		{"resume without thread id", minimal + "resume: [run, --continue]\nthread: {event: s, id: x}\n", []string{"line 6: resume must name the thread"}},
		{"resume without thread rule", minimal + "resume: [run, \"{thread_id}\"]\n", []string{"line 6: resume needs a thread rule"}},
		{"empty continue prompt", minimal + "resume: [\"{thread_id}\", \"{continue_prompt}\"]\nthread: {event: s, id: x}\n", []string{"continue_prompt is empty"}},
		{"dropped without record", minimal + "dropped: {restart: [\"{thread_id}\", \"{prompt}\"]}\n", []string{"line 6: dropped needs record"}},
		{"dropped restart without the id", minimal + "dropped: {record: r, restart: [\"{prompt}\"]}\n", []string{"line 6: dropped.restart must start the prompt"}},
		{"dropped restart without the prompt", minimal + "dropped: {record: r, restart: [\"{thread_id}\"]}\n", []string{"line 6: dropped.restart must start the prompt"}},
		{"dropped without resume", minimal + "dropped: {record: r, restart: [\"{thread_id}\", \"{prompt}\"]}\n", []string{"line 6: dropped needs resume and thread_not_found"}},
		{"dropped bad effects", minimal + "dropped: {record: r, effects: '(x', restart: [\"{thread_id}\", \"{prompt}\"]}\n", []string{"bad pattern"}},
		{"bad pattern", minimal + "classify:\n  - {pattern: '(x', class: transport}\n", []string{"line 7: bad pattern"}},
		{"bad class", minimal + "classify:\n  - {pattern: x, class: fatal}\n", []string{`line 7: unknown class "fatal"`}},
		{"connect class is not offered", minimal + "default_class: connect_failed\n", []string{`line 6: unknown class "connect_failed"`}},
		{"status without group", minimal + "classify:\n  - {pattern: 'HTTP \\d+', class: status}\n", []string{"line 6: classify[0]: class status needs a (?P<status>...) group"}},
		{"bad duration", minimal + "exit_grace: soon\n", []string{`line 6: want a duration like "10s", got "soon"`}},
		{"negative give up", minimal + "retrying:\n  - {pattern: x, give_up_after: -1}\n", []string{"give_up_after must be >= 0"}},
		{"message and format", minimal + "errors:\n  - {event: e, message: m, format: '{m}'}\n", []string{"line 6: errors[0] needs event and one of message or format"}},
		{"neither message nor format", minimal + "failure:\n  - {event: e}\n", []string{"line 6: failure[0] needs event and one of message or format"}},
		{"bad format", minimal + "errors:\n  - {event: e, format: 'a {b'}\n", []string{"line 6: errors[0]: unclosed or empty {} in format"}},
		{"empty format path", minimal + "errors:\n  - {event: e, format: 'a {}'}\n", []string{"unclosed or empty {}"}},
		{"bad env name", minimal + "env: {\"A-B\": x}\n", []string{`line 6: env: "A-B" is not a valid environment variable name`}},
		{"env placeholder", minimal + "env: {A: \"{stat_dir}\"}\n", []string{"line 6: unknown placeholder {stat_dir}"}},
		{"file without path", minimal + "files:\n  - {content: x}\n", []string{"line 6: files[0] needs a path"}},
		{"file content brace", minimal + "files:\n  - {path: \"{state_dir}/s.json\", content: '{\"a\": 1}'}\n", []string{"line 7: unknown placeholder"}},
		{"where value map", strings.Replace(minimal, "output: {event: msg, text: text}", "output: {event: msg, text: text, where: {a: {b: c}}}", 1), []string{"line 5: want a value or a list of values"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDescriptor([]byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var de *DescriptorError
			if !errors.As(err, &de) {
				t.Errorf("not a *DescriptorError: %T", err)
			}
		})
	}
}

func TestLoadDescriptorFileLine(t *testing.T) {
	for file, want := range map[string]string{
		"bad-unknown-field.yaml": `../../testdata/harness/bad-unknown-field.yaml:6: unknown field "retries"`,
		"bad-pattern.yaml":       "../../testdata/harness/bad-pattern.yaml:9: bad pattern \"(unclosed\"",
	} {
		_, err := LoadDescriptor("../../testdata/harness/" + file)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want it to start with %q", file, err, want)
		}
	}
	if _, err := LoadDescriptor("../../testdata/harness/nope.yaml"); err == nil {
		t.Error("missing file: no error")
	}
	d, err := LoadDescriptor(otherAgent)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "other" || time.Duration(d.ExitGrace) != time.Second || d.EventType != "kind" || !d.CanResume() {
		t.Errorf("other-agent: %+v", d)
	}
	// A file without a name is named after the file.
	if d, err := ParseDescriptor([]byte(strings.Replace(minimal, "name: m\n", "", 1))); err != nil || d.Name != "" {
		t.Errorf("parse: %v %q", err, d.Name)
	}
}

func TestBuiltinAndResolve(t *testing.T) {
	if got := Builtins(); !slices.Equal(got, []string{"claude", "codex", "gemini"}) {
		t.Errorf("builtins %v", got)
	}
	d, err := Resolve("codex")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "codex" || d.Command != "codex" || !d.CanResume() || d.ContinuePrompt == "" ||
		time.Duration(d.ExitGrace) != 10*time.Second || d.DefaultClass != ClassTransport {
		t.Errorf("codex descriptor: %+v", d)
	}
	if _, err := Resolve("aider"); err == nil || !strings.Contains(err.Error(), "built-in descriptor (claude, codex, gemini) or a descriptor file") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := Resolve(otherAgent); err != nil {
		t.Errorf("file: %v", err)
	}
	if _, err := Builtin("../descriptors/codex"); err == nil {
		t.Error("Builtin took a path")
	}
	if p, err := New(Config{Harness: "codex", Command: "bin/codex"}); err != nil || !filepath.IsAbs(p.command()) {
		t.Errorf("a relative command path must be made absolute: %v", err)
	}
	if p, err := New(Config{Harness: "codex"}); err != nil || p.command() != "codex" {
		t.Errorf("default command: %v", err)
	}
	if _, err := ParseDescriptor([]byte(strings.Replace(minimal, "command: m\n", "", 1))); err != nil {
		t.Errorf("command is optional in a descriptor: %v", err)
	} else if _, err := New(Config{Harness: writeFile(t, strings.Replace(minimal, "command: m\n", "", 1))}); err == nil ||
		!strings.Contains(err.Error(), "names no command") {
		t.Errorf("no command anywhere: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a harness: no error")
	}
	if _, err := New(Config{Harness: "../../testdata/harness/bad-pattern.yaml"}); err == nil {
		t.Error("New with a bad descriptor: no error")
	}
}

func TestArgv(t *testing.T) {
	d, err := ParseDescriptor([]byte(`name: t
start:
  - run
  - [--model, "{model}"]
  - [--max, "{max_output_tokens}", --effort, "{reasoning_effort}"]
  - "--system={system|json}"
  - "{args}"
  - "literal {{braces}} {workdir}"
  - "{prompt}"
success: {event: done}
output: {event: msg, text: text}
`))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{"model": "m", "max_output_tokens": "9", "system": "a \"b\"\n<c>", "prompt": "", "workdir": "/w"}
	got := d.Start.Argv(vals, []string{"-x", "1"})
	want := []string{"run", "--model", "m", `--system="a \"b\"\n<c>"`, "-x", "1", "literal {braces} /w", ""}
	if !slices.Equal(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	// Without {args} the extra args go at the end.
	d.Start = d.Start[:len(d.Start)-3]
	if got := d.Start.Argv(vals, []string{"-x"}); got[len(got)-1] != "-x" {
		t.Errorf("extra args not appended: %q", got)
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		"":               `""`,
		`plain`:          `"plain"`,
		"q\"b\\s":        `"q\"b\\s"`,
		"tab\tnl\ncr\r":  `"tab\tnl\ncr\r"`,
		"\x00\x1f\x7f":   `"\u0000\u001F\u007F"`,
		"日本 ✓":           `"日本 ✓"`,
		"\b\f":           `"\b\f"`,
		"'single' $HOME": `"'single' $HOME"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

// Messages are what Codex 0.169.0 printed against the simulator (see
// descriptors/codex.yaml), plus the wording of a few failures it can print.
func TestClassifyCodex(t *testing.T) {
	d, err := Builtin("codex")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		msg     string
		class   diagnostics.Class
		status  int
		explain string
	}{
		{"stream disconnected before completion: stream closed before response.completed", diagnostics.ClassDisconnect, 0, ""},
		{"stream disconnected before completion: idle timeout waiting for SSE", diagnostics.ClassDisconnect, 0, ""},
		{"Reconnecting... waiting for network (Connection failed: error sending request)", diagnostics.ClassDisconnect, 0, ""},
		{"stream disconnected before completion: error sending request for url (http://127.0.0.1:1/v1/responses)", diagnostics.ClassDisconnect, 0, ""},
		{"unexpected status 401 Unauthorized: sim: injected HTTP 401 (Unauthorized), url: http://127.0.0.1:1/v1/responses", diagnostics.ClassDeterministic, 401, "rejected the credentials"},
		{"unexpected status 403 Forbidden: nope", diagnostics.ClassDeterministic, 403, "refused access"},
		{`{"error":{"code":null,"message":"sim: injected HTTP 400 (Bad Request)","param":null,"type":"invalid_request_error"}}`, diagnostics.ClassDeterministic, 0, "rejected the request as invalid"},
		{"unexpected status 400 Bad Request: x", diagnostics.ClassDeterministic, 400, "invalid"},
		{"Quota exceeded. Check your plan and billing details.", diagnostics.ClassDeterministic, 0, "out of quota"},
		{"You've hit your usage limit.", diagnostics.ClassDeterministic, 0, "out of quota"},
		{"Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.", diagnostics.ClassDeterministic, 0, "context window"},
		{"stream disconnected before completion: Incomplete response returned, reason: content_filter", diagnostics.ClassDeterministic, 0, "content filter"},
		{"thread/resume: thread/resume failed: no rollout found for thread id 0199 (code -32600)", diagnostics.ClassDeterministic, 0, "no record of this thread"},
		{"exceeded retry limit, last status: 429 Too Many Requests", diagnostics.ClassRateLimited, 429, "ran out of retries"},
		{"exceeded retry limit, last status: 503 Service Unavailable", diagnostics.ClassDisconnect, 503, "ran out of retries"},
		{"unexpected status 502 Bad Gateway: x", diagnostics.ClassDisconnect, 502, ""},
		{"unexpected status 500 Internal Server Error: x", diagnostics.ClassServer, 500, ""},
		{"unexpected status 404 Not Found: x", diagnostics.ClassDeterministic, 404, ""},
		{"We’re currently experiencing high demand, which may cause temporary errors.", diagnostics.ClassServer, 0, ""},
		{"unexpected status 200 OK: odd", diagnostics.ClassDisconnect, 0, ""},
		{"something nobody has seen before", diagnostics.ClassDisconnect, 0, ""},
		{"", diagnostics.ClassDisconnect, 0, ""},
		{"error: unexpected argument '--sandbox' found", diagnostics.ClassDeterministic, 0, "command line"},
		{"Error: Model provider `nosuch` not found", diagnostics.ClassDeterministic, 0, "configuration"},
		{"Error loading config.toml: invalid type: integer `5`, expected struct ModelProviderInfo", diagnostics.ClassDeterministic, 0, "configuration"},
	} {
		v := d.ClassifyMessage(tc.msg)
		if v.Class != tc.class || v.Status != tc.status || !strings.Contains(v.Explain, tc.explain) {
			t.Errorf("%q → %+v, want %s %d %q", tc.msg, v, tc.class, tc.status, tc.explain)
		}
	}
	if !d.threadNotFound("Error: thread/resume: thread/resume failed: no rollout found for thread id x (code -32600)") {
		t.Error("no rollout found is a missing thread")
	}
}

func TestStderrMessage(t *testing.T) {
	d, _ := Builtin("codex")
	stderr := "WARNING: proceeding\nError: thread/resume: no rollout found for thread id x\n\nStack backtrace:\n   0: <unknown>\n"
	if got := stderrMessage(d.StderrMessage, stderr); got != "Error: thread/resume: no rollout found for thread id x" {
		t.Errorf("got %q", got)
	}
	if got := stderrMessage(d.StderrMessage, "Error loading config.toml: invalid type: integer `5`\nin `model_providers.sim`\n"); got != "Error loading config.toml: invalid type: integer `5`" {
		t.Errorf("got %q", got)
	}
	if got := stderrMessage(d.StderrMessage, "no error line\nlast\n"); got != "last" {
		t.Errorf("got %q", got)
	}
	if got := stderrMessage(nil, "a\nlast line\n\n"); got != "last line" {
		t.Errorf("got %q", got)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMessageFormat(t *testing.T) {
	r := MessageRule{Format: "retry {attempt}/{max} ({error.type}, {missing}) {{x}}"}
	ev, err := parseEvent([]byte(`{"attempt":1,"max":2,"error":{"type":"overloaded"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.message(ev); got != "retry 1/2 (overloaded, ) {x}" {
		t.Errorf("message %q", got)
	}
}
