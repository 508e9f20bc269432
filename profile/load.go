package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noderun/noderun/internal/yamlnode"
)

// Sentinels of a profiles file's problems, for errors.Is through a
// *FieldError.
var (
	// ErrUnknownField: a key a profile (or its backoff) does not have, or
	// one given twice.
	ErrUnknownField = errors.New("unknown field")
	// ErrInvalidValue: a value of the wrong type, out of its range, or one
	// that would turn a safety bound off.
	ErrInvalidValue = errors.New("invalid value")
)

// FieldError is one problem of a profiles file, at the line of the field it
// is about (of the profile, when a field it needs is missing).
type FieldError struct {
	File    string
	Line    int
	Profile string // "" for the file as a whole
	Field   string // "retries", "backoff.base"; "" for the profile as a whole
	Msg     string // in the file's words: "deadline: want a duration > 0, got 0s"
	Err     error  // ErrUnknownField or ErrInvalidValue
}

func (e *FieldError) Error() string {
	s := fmt.Sprintf("%s:%d: ", e.File, e.Line)
	if e.Profile != "" {
		s += fmt.Sprintf("profile %q: ", e.Profile)
	}
	return s + e.Msg
}

// Unwrap is the problem's sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// Load reads a YAML file of profiles keyed by name and merges it over the
// built-ins: a profile named like a built-in starts from it and overrides only
// the fields the file sets, so `ci: {retries: 1}` keeps ci's other values.
// Every problem of the file is reported (errors.Join of *FieldError, one a
// line, in line order), each at its field's line.
func Load(path string) (Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	return Parse(path, data)
}

// fieldIdleTimeout is a profile field that shares its name with the
// diagnostic code idle_timeout (NR107): a constant, so that nothing reads
// as matching the code by its string (diagnostics' TestNoReaderMatchesCodeStrings).
const fieldIdleTimeout = "idle_timeout"

// yamlLine is the line of a YAML syntax error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse is Load on bytes; name is used in errors.
func Parse(name string, data []byte) (Set, error) {
	set := Set(Builtins())
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return set, nil
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &FieldError{File: name, Line: line, Msg: "not YAML: " + m[2]}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root := yamlnode.Resolve(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = yamlnode.Resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		return nil, &FieldError{File: name, Line: root.Line, Err: ErrInvalidValue,
			Msg: "a profiles file is a mapping of name to profile, like `ci: {retries: 1}`"}
	}
	var errs []*FieldError // every problem of every profile, not only the first
	seen := map[string]bool{}
	for _, kv := range yamlnode.Pairs(root) {
		key, val := kv[0], yamlnode.Resolve(kv[1])
		d := &decoder{file: name, profile: key.Value, keyLine: key.Line, lines: map[string]int{}}
		if seen[key.Value] {
			d.fail(key, "", ErrUnknownField, "profile %q is given twice", key.Value)
			errs = append(errs, d.errs...)
			continue
		}
		seen[key.Value] = true
		p, ok := set[key.Value]
		if !ok {
			p = set["default"]
		}
		p.Name = key.Value
		d.decodeProfile(val, &p)
		failed := map[string]bool{} // fields already reported: not again
		for _, e := range d.errs {
			failed[e.Field] = true
		}
		for _, pr := range p.problems() {
			if !failed[pr.field] {
				line, ok := d.lines[pr.field]
				if !ok {
					line = key.Line
				}
				d.errs = append(d.errs, &FieldError{File: name, Line: line, Profile: p.Name, Field: pr.field, Msg: pr.field + ": " + pr.msg, Err: ErrInvalidValue})
			}
		}
		if len(d.errs) > 0 {
			errs = append(errs, d.errs...)
			continue
		}
		set[key.Value] = p
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *FieldError) int { return a.Line - b.Line })
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = e
		}
		return nil, errors.Join(out...)
	}
	return set, nil
}

// decoder reads one profile's mapping field by field, so that each problem
// is reported at its own line and in the file's words.
type decoder struct {
	file, profile string
	keyLine       int
	lines         map[string]int // each field's line, for Validate's problems
	errs          []*FieldError
}

func (d *decoder) fail(n *yaml.Node, field string, cause error, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Profile: d.profile, Field: field, Msg: fmt.Sprintf(format, args...), Err: cause})
}

// want records a value of the wrong form: the field, what it takes, what
// the file has.
func (d *decoder) want(n *yaml.Node, field, want string) {
	d.fail(n, field, ErrInvalidValue, "%s: want %s, got %s", field, want, yamlnode.Got(n))
}

var (
	profileFields = yamlFields(Profile{})
	backoffFields = yamlFields(Backoff{})
)

// Fields are the keys of a profile in a profiles file, and BackoffFields
// those of its backoff, as the decoder takes them.
func Fields() []string { return slices.Clone(profileFields) }

// BackoffFields: see Fields.
func BackoffFields() []string { return slices.Clone(backoffFields) }

func (d *decoder) decodeProfile(n *yaml.Node, p *Profile) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // `ci:` alone overrides nothing
	}
	d.fields(n, "", profileFields, func(key string, v *yaml.Node) {
		switch key {
		case "retries":
			d.whole(v, key, 0, &p.Retries)
		case "reconnects":
			d.whole(v, key, 0, &p.Reconnects)
		case "backoff":
			d.fields(v, "backoff.", backoffFields, func(bk string, bv *yaml.Node) {
				switch bk {
				case "base":
					d.duration(bv, "backoff.base", &p.Backoff.Base)
				case "factor":
					if bv.Kind != yaml.ScalarNode || (bv.ShortTag() != "!!int" && bv.ShortTag() != "!!float") || bv.Decode(&p.Backoff.Factor) != nil {
						d.want(bv, "backoff.factor", "a number >= 1")
					}
				case "cap":
					d.duration(bv, "backoff.cap", &p.Backoff.Cap)
				}
			})
		case "deadline":
			d.duration(v, key, &p.Deadline)
		case fieldIdleTimeout:
			d.duration(v, key, &p.IdleTimeout)
		case "poll_after":
			d.duration(v, key, &p.PollAfter)
		case "poll_interval":
			d.duration(v, key, &p.PollInterval)
		case "stuck_after":
			d.duration(v, key, &p.StuckAfter)
		case "max_retry_after":
			d.duration(v, key, &p.MaxRetryAfter)
		case "breaker":
			d.whole(v, key, 0, &p.Breaker)
		case "breaker_cooldown":
			d.duration(v, key, &p.BreakerCooldown)
		case "max_output_bytes":
			var s Size
			var err error
			if v.Kind == yaml.ScalarNode {
				s, err = ParseSize(v.Value)
			}
			switch {
			case v.Kind != yaml.ScalarNode || err != nil:
				d.want(v, key, "a size like 32MiB or a number of bytes")
			case s == 0:
				d.fail(v, key, ErrInvalidValue, "%s: want a size > 0 (omit it for %s), got %s", key, DefaultMaxOutputBytes, v.Value)
			default:
				p.MaxOutputBytes = s
			}
		case "max_events":
			d.whole(v, key, 1, &p.MaxEvents)
		}
	})
}

// fields calls fn for each known key of mapping n (merge keys applied) and
// records unknown and repeated ones; prefix names a nested block.
func (d *decoder) fields(n *yaml.Node, prefix string, known []string, fn func(key string, v *yaml.Node)) {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.MappingNode {
		if prefix == "" {
			d.fail(n, "", ErrInvalidValue, "want a mapping of fields, like {retries: 1}, got %s", yamlnode.Got(n))
		} else {
			d.want(n, strings.TrimSuffix(prefix, "."), "a mapping, like {base: 1s, factor: 2, cap: 30s}")
		}
		return
	}
	seen := map[string]bool{}
	for _, kv := range yamlnode.Pairs(n) {
		k, v := kv[0], yamlnode.Resolve(kv[1])
		field := prefix + k.Value
		switch {
		case seen[k.Value]:
			d.fail(k, field, ErrUnknownField, "%s is given twice", field)
		case !slices.Contains(known, k.Value):
			seen[k.Value] = true
			hint := "known: " + strings.Join(known, ", ")
			if c := closest(k.Value, known); c != "" {
				hint = fmt.Sprintf("did you mean %q?", c)
			}
			d.fail(k, field, ErrUnknownField, "unknown field %q (%s)", field, hint)
		default:
			seen[k.Value] = true
			d.lines[field] = v.Line
			fn(k.Value, v)
		}
	}
}

// whole reads a whole number >= min.
func (d *decoder) whole(n *yaml.Node, field string, min int, out *int) {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		d.want(n, field, fmt.Sprintf("a whole number >= %d", min))
		return
	}
	if v < min {
		d.fail(n, field, ErrInvalidValue, "%s: want a whole number >= %d, got %d", field, min, v)
		return
	}
	*out = v
}

// duration reads a Go duration string; its range is Validate's.
func (d *decoder) duration(n *yaml.Node, field string, out *Duration) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" && n.ShortTag() != "!!int" {
		d.want(n, field, `a duration like "90s"`)
		return
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		d.want(n, field, `a duration like "90s"`)
		return
	}
	*out = D(v)
}

// closest is the known name within two edits of s, if one is.
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if dd := editDistance(s, k); dd < bestD {
			best, bestD = k, dd
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
