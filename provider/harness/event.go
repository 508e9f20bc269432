package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/noderun/noderun/provider"
)

// event is one parsed JSONL line: a JSON object.
type event map[string]any

var errNotObject = errors.New("not a JSON object")

// parseEvent parses one JSONL line. Blank lines and anything that is not a
// single JSON object are errors; the caller journals the line anyway.
func parseEvent(line []byte) (event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	return ev, nil
}

// lookup follows a dot-separated path of object keys (and array indexes).
func (ev event) lookup(path string) (any, bool) {
	if path == "" {
		return nil, false
	}
	var cur any = map[string]any(ev)
	for seg := range strings.SplitSeq(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[seg]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// str is the value at path as a string: strings as they are, numbers and
// booleans in JSON form; "" for absent, null, objects and arrays.
func (ev event) str(path string) string {
	v, ok := ev.lookup(path)
	if !ok {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// int is the value at path as a non-negative int (0 when absent or not a number).
func (ev event) int(path string) int {
	v, ok := ev.lookup(path)
	if !ok {
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	f, err := n.Float64()
	if err != nil || f < 0 || math.IsNaN(f) || f > math.MaxInt32 {
		return 0
	}
	return int(f)
}

// matches reports whether ev of type typ is selected by m.
func (m *Match) matches(ev event, typ string) bool {
	if m.Event == "" || m.Event != typ {
		return false
	}
	for path, vals := range m.Where {
		if !vals.has(ev.str(path)) {
			return false
		}
	}
	for path, vals := range m.Unless {
		if vals.has(ev.str(path)) {
			return false
		}
	}
	return true
}

func (v Values) has(s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

// observation is what one JSONL line means under a descriptor.
type observation struct {
	Type     string
	ThreadID string          // the thread event's id
	Success  bool            // terminal success
	Usage    *provider.Usage // with Success, when reported
	Failure  bool            // terminal failure; Message says why
	Error    bool            // a non-terminal error report in Message
	Message  string
	Retry    *RetryRule // the error report is the harness retrying by itself
	Output   *string    // output text
	Progress bool       // the agent advanced
}

// observe interprets one JSONL line. It never fails: a line that is not an
// event is an observation of nothing (it is still journaled raw).
func (d *Descriptor) observe(line []byte) (observation, error) {
	var o observation
	ev, err := parseEvent(line)
	if err != nil {
		return o, err
	}
	o.Type = ev.str(d.EventType)
	if o.Type == "" {
		return o, fmt.Errorf("no event type at %q", d.EventType)
	}
	if d.Thread != nil && d.Thread.matches(ev, o.Type) {
		o.ThreadID = ev.str(d.Thread.ID)
	}
	if d.Success.matches(ev, o.Type) {
		o.Success = true
		u := d.Success.Usage
		_, in := ev.lookup(u.InputTokens)
		_, out := ev.lookup(u.OutputTokens)
		if in || out {
			o.Usage = &provider.Usage{InputTokens: ev.int(u.InputTokens), OutputTokens: ev.int(u.OutputTokens),
				ReasoningTokens: ev.int(u.ReasoningTokens)}
		}
	}
	for i := range d.Failure {
		if r := &d.Failure[i]; r.matches(ev, o.Type) {
			o.Failure = true
			o.Message = r.message(ev)
			break
		}
	}
	if !o.Failure {
		for i := range d.Errors {
			if r := &d.Errors[i]; r.matches(ev, o.Type) {
				o.Error = true
				o.Message = r.message(ev)
				for j := range d.Retrying {
					if d.Retrying[j].Pattern.MatchString(o.Message) {
						o.Retry = &d.Retrying[j]
						break
					}
				}
				break
			}
		}
	}
	if d.Output.matches(ev, o.Type) {
		if v, ok := ev.lookup(d.Output.Text); ok {
			if s, ok := v.(string); ok {
				o.Output = &s
			}
		}
	}
	for i := range d.Progress {
		if d.Progress[i].matches(ev, o.Type) {
			o.Progress = true
			break
		}
	}
	return o, nil
}

// message is the rule's message of ev: its Format filled in, else the
// value at its Message path.
func (r *MessageRule) message(ev event) string {
	if r.Format == "" {
		return messageAt(ev, r.Message)
	}
	var b strings.Builder
	f := r.Format
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case (c == '{' || c == '}') && i+1 < len(f) && f[i+1] == c:
			b.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			b.WriteString(messageAt(ev, f[i+1:i+end]))
			i += end
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// checkFormat checks a MessageRule's Format: every { closed, no empty path.
func checkFormat(f string) error {
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case (c == '{' || c == '}') && i+1 < len(f) && f[i+1] == c:
			i++
		case c == '}':
			return fmt.Errorf("unmatched } in format %q (write }} for a literal brace)", f)
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			if end <= 1 {
				return fmt.Errorf("unclosed or empty {} in format %q", f)
			}
			i += end
		}
	}
	return nil
}

// messageAt is the message at path; an object or array there (some CLIs
// nest the provider's error body) is given as compact JSON.
func messageAt(ev event, path string) string {
	v, ok := ev.lookup(path)
	if !ok {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
