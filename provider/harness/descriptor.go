package harness

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/diagnostics"
)

// Descriptor describes an agent harness CLI as data: how to start and resume
// it, and how to read its JSONL event stream. See README.md for the format;
// descriptors/codex.yaml is the built-in example.
type Descriptor struct {
	// Name is used in messages ("codex: ..."). Default: the file name.
	Name string `yaml:"name"`
	// Command is the default binary, a name looked up on PATH or a path.
	Command string `yaml:"command"`
	// Start is the argv (after the binary) of a new run.
	Start Template `yaml:"start"`
	// Resume is the argv that continues a recorded thread; it must use
	// {thread_id}. Without it the harness cannot be resumed.
	Resume Template `yaml:"resume"`
	// ContinuePrompt is the prompt a resume sends ({continue_prompt}).
	ContinuePrompt string `yaml:"continue_prompt"`
	// EventType is the JSON path of an event's type. Default "type".
	EventType string `yaml:"event_type"`
	// Thread is the event that names the thread, and the path of its id.
	Thread *ThreadRule `yaml:"thread"`
	// Success is the terminal success event (terminal evidence), with the
	// paths of its token usage.
	Success SuccessRule `yaml:"success"`
	// Failure are terminal failure events, with the path of their message.
	Failure []MessageRule `yaml:"failure"`
	// Errors are non-terminal error reports: a retry notice when the message
	// matches Retrying, else the likely reason of a failure to come.
	Errors []MessageRule `yaml:"errors"`
	// Output is the event that carries the output; the last one before
	// Success is the node's output.
	Output OutputRule `yaml:"output"`
	// Progress are events that show the agent advancing (completed items).
	Progress []Match `yaml:"progress"`
	// Retrying classifies error messages as the harness's own informational
	// retries.
	Retrying []RetryRule `yaml:"retrying"`
	// Classify maps a failure message to an error class; first match wins.
	Classify []ClassRule `yaml:"classify"`
	// DefaultClass is the class of a failure no Classify rule matches.
	// Default transport.
	DefaultClass ClassName `yaml:"default_class"`
	// ThreadNotFound are failure messages of a resume that found no thread
	// with the recorded id.
	ThreadNotFound []Pattern `yaml:"thread_not_found"`
	// StderrMessage finds the failure message on stderr when no event gave
	// one: its first capture group (or the whole match) of the last match.
	// When it matches nothing (or is not set): the last non-empty stderr line.
	StderrMessage *Pattern `yaml:"stderr_message"`
	// ExitGrace is how long the process may take to exit after terminal
	// evidence before it is killed. Default 10s.
	ExitGrace Duration `yaml:"exit_grace"`
	// Env are environment variables the harness gets by default (values are
	// templates, e.g. "{state_dir}/claude"); the provider's env overrides
	// them. This is how a descriptor bounds the CLI's own retries and gives
	// each node its own session store.
	Env map[string]TemplateString `yaml:"env"`
	// Files are written (directories created) before every run: settings
	// files a CLI reads only from disk. Path and content are templates.
	Files []FileRule `yaml:"files"`
	// Dropped tells a thread the harness dropped from one it never had,
	// and starts a dropped one again under its id.
	Dropped *DroppedRule `yaml:"dropped"`
}

// DroppedRule is for a harness that drops a failed turn from its own
// record (Gemini CLI rolls a turn whose model request failed out of its
// session), so that a thread whose only turn failed cannot be resumed.
// When a resume says there is no such thread but a Record file holds the
// thread id, the harness dropped it: the record is set aside and the next
// attempt runs Restart, the node's prompt under the same thread id. That
// attempt is a retry (the turn is generated again), from the retry budget;
// for a node whose side_effects are unsafe, only when the record does not
// match Effects (it shows no tool call, so nothing of the turn took effect).
type DroppedRule struct {
	// Record is a glob (a template) of the files the harness records its
	// threads in; a file records a thread when it contains its id.
	Record TemplateString `yaml:"record"`
	// Effects matches a record that shows the thread may have had effects.
	Effects *Pattern `yaml:"effects"`
	// Restart is the argv that starts the prompt again under {thread_id}.
	Restart Template `yaml:"restart"`
}

// FileRule is a file written before every run.
type FileRule struct {
	Path    TemplateString `yaml:"path"`
	Content TemplateString `yaml:"content"`
}

// TemplateString is one string with placeholders (see Template), checked
// when the descriptor is read.
type TemplateString string

// UnmarshalYAML checks the placeholders.
func (t *TemplateString) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return errAt(n, "want a string")
	}
	if _, err := expand(s, nil); err != nil {
		return errAt(n, "%v", err)
	}
	*t = TemplateString(s)
	return nil
}

// Expand substitutes the placeholders.
func (t TemplateString) Expand(vals map[string]string) string {
	r, _ := expand(string(t), vals)
	return r.text
}

// Match selects events: by type, and optionally by the values of other
// fields (a field path and one value or a list of accepted values).
type Match struct {
	Event  string     `yaml:"event"`
	Where  Conditions `yaml:"where"`
	Unless Conditions `yaml:"unless"`
}

// Conditions maps JSON paths to accepted values.
type Conditions map[string]Values

// Values is one string or a list of strings.
type Values []string

// ThreadRule is the event that carries the thread id, at path ID.
type ThreadRule struct {
	Match `yaml:",inline"`
	ID    string `yaml:"id"`
}

// SuccessRule is the terminal success event.
type SuccessRule struct {
	Match `yaml:",inline"`
	Usage UsagePaths `yaml:"usage"`
}

// UsagePaths are the JSON paths of token counts in the success event.
type UsagePaths struct {
	InputTokens     string `yaml:"input_tokens"`
	OutputTokens    string `yaml:"output_tokens"`
	ReasoningTokens string `yaml:"reasoning_tokens"`
}

// MessageRule is an event with a message at path Message, or, with
// Format, a message made of several fields: "{path}" is the value at path
// ("{{"/"}}" are literal braces).
type MessageRule struct {
	Match   `yaml:",inline"`
	Message string `yaml:"message"`
	Format  string `yaml:"format"`
}

// OutputRule is an event with output text at path Text. With Delta, each
// such event is a piece of the output (they are joined) instead of the
// whole of it (the last one counts).
type OutputRule struct {
	Match `yaml:",inline"`
	Text  string `yaml:"text"`
	Delta bool   `yaml:"delta"`
}

// RetryRule recognises the harness's own retry notices. GiveUpAfter > 0
// stops the harness after that many consecutive matches without progress,
// for harnesses that would otherwise wait forever (the failure is then the
// notice's message, classified as usual).
type RetryRule struct {
	Pattern     Pattern `yaml:"pattern"`
	GiveUpAfter int     `yaml:"give_up_after"`
}

// ClassRule maps failure messages matching Pattern to Class. Explain is put
// in front of the message in the error, for the operator.
type ClassRule struct {
	Pattern Pattern   `yaml:"pattern"`
	Class   ClassName `yaml:"class"`
	Explain string    `yaml:"explain"`
}

// ClassName is an error class in a descriptor: transport, rate_limited,
// server, deterministic, or status (the class of the HTTP status captured by
// the pattern's group named "status").
type ClassName string

// Class names.
const (
	ClassTransport     ClassName = "transport"
	ClassRateLimited   ClassName = "rate_limited"
	ClassServer        ClassName = "server"
	ClassDeterministic ClassName = "deterministic"
	ClassStatus        ClassName = "status"
)

// classNames maps descriptor class names (and the diagnostics names
// transport_disconnect and server_error) to classes. connect_failed is not
// offered: a harness that could not connect may have run tools before, so
// its request is never provably unsent.
var classNames = map[ClassName]diagnostics.Class{
	ClassTransport:                         diagnostics.ClassDisconnect,
	ClassName(diagnostics.ClassDisconnect): diagnostics.ClassDisconnect,
	ClassRateLimited:                       diagnostics.ClassRateLimited,
	ClassServer:                            diagnostics.ClassServer,
	ClassName(diagnostics.ClassServer):     diagnostics.ClassServer,
	ClassDeterministic:                     diagnostics.ClassDeterministic,
	ClassStatus:                            diagnostics.ClassNone,
}

// UnmarshalYAML checks the name.
func (c *ClassName) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return errAt(n, "class must be a name")
	}
	if _, ok := classNames[ClassName(s)]; !ok {
		return errAt(n, "unknown class %q (want transport, rate_limited, server, deterministic or status)", s)
	}
	*c = ClassName(s)
	return nil
}

// Pattern is a regular expression (Go RE2 syntax).
type Pattern struct{ *regexp.Regexp }

// UnmarshalYAML compiles the expression.
func (p *Pattern) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return errAt(n, "a pattern must be a string")
	}
	if s == "" {
		return errAt(n, "a pattern must not be empty")
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return errAt(n, "bad pattern %q: %v", s, err)
	}
	p.Regexp = re
	return nil
}

// Duration is a Go duration string ("10s").
type Duration time.Duration

// UnmarshalYAML parses the duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return errAt(n, "a duration must be a string like \"10s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return errAt(n, "want a duration like \"10s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML accepts one value or a list.
func (v *Values) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*v = Values{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(Values, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return errAt(c, "a value list must hold plain values")
			}
			out = append(out, c.Value)
		}
		*v = out
		return nil
	}
	return errAt(n, "want a value or a list of values")
}

// DescriptorError is a problem in a descriptor, at a line of its YAML.
type DescriptorError struct {
	File string // "" for a descriptor parsed from bytes
	Line int
	Msg  string
}

func (e *DescriptorError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errAt(n *yaml.Node, format string, args ...any) error {
	return &DescriptorError{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

//go:embed descriptors/*.yaml
var builtins embed.FS

// Builtins lists the names of the built-in descriptors.
func Builtins() []string {
	ents, _ := builtins.ReadDir("descriptors")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return names
}

// Builtin returns a built-in descriptor by name ("codex").
func Builtin(name string) (*Descriptor, error) {
	data, err := builtins.ReadFile("descriptors/" + name + ".yaml")
	if err != nil || name == "" || strings.ContainsAny(name, `/\.`) {
		return nil, fmt.Errorf("harness: no built-in descriptor %q (built in: %s)", name, strings.Join(Builtins(), ", "))
	}
	d, err := ParseDescriptor(data)
	if err != nil {
		return nil, fmt.Errorf("harness: built-in descriptor %s: %w", name, err)
	}
	if d.Name == "" {
		d.Name = name
	}
	return d, nil
}

// Resolve returns the descriptor a Config.Harness value names: a built-in
// name, or else the path of a descriptor file.
func Resolve(harness string) (*Descriptor, error) {
	if slices.Contains(Builtins(), harness) {
		return Builtin(harness)
	}
	if !strings.ContainsAny(harness, `/\`) && !strings.HasSuffix(harness, ".yaml") && !strings.HasSuffix(harness, ".yml") {
		return nil, fmt.Errorf("harness: unknown harness %q: name a built-in descriptor (%s) or a descriptor file",
			harness, strings.Join(Builtins(), ", "))
	}
	return LoadDescriptor(harness)
}

// LoadDescriptor reads a descriptor file. It is strict: an unknown field, a
// duplicate key or a bad value is a *DescriptorError naming file:line.
func LoadDescriptor(path string) (*Descriptor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("harness descriptor: %w", err)
	}
	d, err := ParseDescriptor(data)
	if err != nil {
		setFile(err, path)
		return nil, err
	}
	if d.Name == "" {
		d.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return d, nil
}

// setFile puts the file name on every DescriptorError in err.
func setFile(err error, file string) {
	if de, ok := err.(*DescriptorError); ok {
		de.File = file
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			setFile(e, file)
		}
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var (
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlNotFound = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// ParseDescriptor is LoadDescriptor on bytes.
func ParseDescriptor(data []byte) (*Descriptor, error) {
	var d Descriptor
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &DescriptorError{Msg: "the descriptor is empty"}
		}
		return nil, yamlError(err)
	}
	if err := d.validate(data); err != nil {
		return nil, err
	}
	d.defaults()
	return &d, nil
}

// yamlError turns the YAML library's errors into DescriptorErrors with lines.
func yamlError(err error) error {
	if _, ok := errors.AsType[*DescriptorError](err); ok {
		return err
	}
	var lines []string
	if te, ok := errors.AsType[*yaml.TypeError](err); ok {
		lines = te.Errors
	} else {
		lines = []string{err.Error()}
	}
	var errs []error
	for _, l := range lines {
		m := yamlLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			errs = append(errs, &DescriptorError{Msg: strings.TrimPrefix(l, "yaml: ")})
			continue
		}
		n, _ := strconv.Atoi(m[1])
		msg := m[2]
		if f := yamlNotFound.FindStringSubmatch(msg); f != nil {
			msg = fmt.Sprintf("unknown field %q", f[1])
		}
		errs = append(errs, &DescriptorError{Line: n, Msg: msg})
	}
	return errors.Join(errs...)
}

// validate checks what the field types cannot. Lines come from a second,
// untyped parse of the same bytes.
func (d *Descriptor) validate(data []byte) error {
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc)
	line := func(key string) int {
		if len(doc.Content) == 0 {
			return 0
		}
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i].Line
			}
		}
		return m.Line
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &DescriptorError{Line: line(key), Msg: fmt.Sprintf(format, args...)})
	}
	if len(d.Start) == 0 {
		bad("start", "start is required: the argv of a new run")
	} else if !d.Start.uses("prompt") {
		bad("start", "start must pass the prompt ({prompt})")
	}
	if len(d.Resume) > 0 {
		if !d.Resume.uses("thread_id") {
			bad("resume", "resume must name the thread to continue ({thread_id})")
		}
		if d.Thread == nil {
			bad("resume", "resume needs a thread rule: which event carries the thread id")
		}
		if d.Resume.uses("continue_prompt") && strings.TrimSpace(d.ContinuePrompt) == "" {
			bad("resume", "resume uses {continue_prompt} but continue_prompt is empty")
		}
	}
	if r := d.Dropped; r != nil {
		switch {
		case strings.TrimSpace(string(r.Record)) == "":
			bad("dropped", "dropped needs record: a glob of the files the harness records its threads in")
		case !r.Restart.uses("thread_id") || !r.Restart.uses("prompt"):
			bad("dropped", "dropped.restart must start the prompt ({prompt}) under the same thread id ({thread_id})")
		case len(d.Resume) == 0 || len(d.ThreadNotFound) == 0:
			bad("dropped", "dropped needs resume and thread_not_found: a thread is dropped when a resume finds none")
		}
	}
	if d.Thread != nil {
		if d.Thread.Event == "" || d.Thread.ID == "" {
			bad("thread", "thread needs event and id (the JSON path of the thread id)")
		}
	}
	if d.Success.Event == "" {
		bad("success", "success is required: the event that is terminal evidence of a completed turn")
	}
	if d.Output.Event == "" || d.Output.Text == "" {
		bad("output", "output is required: the event that carries the output and the path of its text")
	}
	for i, r := range d.Failure {
		if r.Event == "" || (r.Message == "") == (r.Format == "") {
			bad("failure", "failure[%d] needs event and one of message or format", i)
		} else if err := checkFormat(r.Format); err != nil {
			bad("failure", "failure[%d]: %v", i, err)
		}
	}
	for i, r := range d.Errors {
		if r.Event == "" || (r.Message == "") == (r.Format == "") {
			bad("errors", "errors[%d] needs event and one of message or format", i)
		} else if err := checkFormat(r.Format); err != nil {
			bad("errors", "errors[%d]: %v", i, err)
		}
	}
	for k := range d.Env {
		if !envName.MatchString(k) {
			bad("env", "env: %q is not a valid environment variable name", k)
		}
	}
	for i, f := range d.Files {
		if strings.TrimSpace(string(f.Path)) == "" {
			bad("files", "files[%d] needs a path", i)
		}
	}
	for i, r := range d.Progress {
		if r.Event == "" {
			bad("progress", "progress[%d] needs event", i)
		}
	}
	for i, r := range d.Retrying {
		if r.Pattern.Regexp == nil {
			bad("retrying", "retrying[%d] needs a pattern", i)
		}
		if r.GiveUpAfter < 0 {
			bad("retrying", "retrying[%d]: give_up_after must be >= 0", i)
		}
	}
	for i, r := range d.Classify {
		switch {
		case r.Pattern.Regexp == nil || r.Class == "":
			bad("classify", "classify[%d] needs pattern and class", i)
		case r.Class == ClassStatus && r.Pattern.SubexpIndex("status") < 0:
			bad("classify", "classify[%d]: class status needs a (?P<status>...) group in the pattern", i)
		}
	}
	if d.DefaultClass == ClassStatus {
		bad("default_class", "default_class cannot be status")
	}
	return errors.Join(errs...)
}

func (d *Descriptor) defaults() {
	if d.EventType == "" {
		d.EventType = "type"
	}
	if d.DefaultClass == "" {
		d.DefaultClass = ClassTransport
	}
	if d.ExitGrace == 0 {
		d.ExitGrace = Duration(10 * time.Second)
	}
}

// CanResume reports whether the descriptor has a resume argv.
func (d *Descriptor) CanResume() bool { return len(d.Resume) > 0 }
