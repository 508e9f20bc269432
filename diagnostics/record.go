package diagnostics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Record is one diagnostic: a code, a sentence for a person, and the typed
// attributes its code declares (Code.Attrs). It is how the executor
// journals and logs every fault, recovery step and outcome, and how every
// reader decodes them again (Decode): no reader re-classifies codes by a
// list of its own, it asks the code (Code.Role, Code.Means) and reads the
// attributes through their keys (Key.Of).
type Record struct {
	Code    Code
	Message string
	// Attrs are built with the keys (KeyRef.Attr(id)); CheckAttrs says
	// whether they are the ones the code declares.
	Attrs []slog.Attr
}

// New builds a record.
func New(c Code, msg string, attrs ...slog.Attr) Record {
	return Record{Code: c, Message: msg, Attrs: attrs}
}

// Attr returns the attribute named key, if the record has it.
func (r Record) Attr(key string) (slog.Value, bool) {
	for i := len(r.Attrs) - 1; i >= 0; i-- { // a later attribute wins, as in a JSON object
		if r.Attrs[i].Key == key {
			return r.Attrs[i].Value.Resolve(), true
		}
	}
	return slog.Value{}, false
}

// Redact returns the record with f applied to its message and to every
// string attribute: what is journaled or logged must not carry a secret a
// server echoed.
func (r Record) Redact(f func(string) string) Record {
	out := Record{Code: r.Code, Message: f(r.Message), Attrs: make([]slog.Attr, len(r.Attrs))}
	for i, a := range r.Attrs {
		if v := a.Value.Resolve(); v.Kind() == slog.KindString {
			a = slog.String(a.Key, f(v.String()))
		}
		out.Attrs[i] = a
	}
	return out
}

// payload is a record as journaled: an event's payload (docs/json.md,
// `noderun events --json`).
type payload struct {
	Code    string                     `json:"code"`
	Name    string                     `json:"name"`
	Message string                     `json:"message"`
	Attrs   map[string]json.RawMessage `json:"attrs,omitempty"`
}

// MarshalJSON writes the journal's form: {"code", "name", "message",
// "attrs"}, durations as Go duration strings rounded to the millisecond
// ("1.3s"), as a person reads them in `noderun events`.
func (r Record) MarshalJSON() ([]byte, error) {
	p := payload{Code: r.Code.ID, Name: r.Code.Name, Message: r.Message}
	if len(r.Attrs) > 0 {
		p.Attrs = make(map[string]json.RawMessage, len(r.Attrs))
		for _, a := range r.Attrs {
			b, err := json.Marshal(jsonValue(a.Value.Resolve()))
			if err != nil {
				b, _ = json.Marshal(fmt.Sprint(a.Value.Any()))
			}
			p.Attrs[a.Key] = b
		}
	}
	return json.Marshal(p)
}

func jsonValue(v slog.Value) any {
	switch v.Kind() {
	case slog.KindDuration:
		return v.Duration().Round(time.Millisecond).String()
	case slog.KindTime:
		return v.Time().UTC().Format(time.RFC3339Nano)
	}
	return v.Any()
}

// Decode reads a journaled record. A code this version does not know (a
// journal written by a newer noderun) decodes with its ID and name and no
// role; attributes are typed by their keys, unknown ones kept as JSON values.
func Decode(b []byte) (Record, error) {
	var p payload
	if err := json.Unmarshal(b, &p); err != nil {
		return Record{}, fmt.Errorf("diagnostic payload: %w", err)
	}
	if p.Code == "" {
		return Record{}, fmt.Errorf("diagnostic payload: no code")
	}
	c, ok := Lookup(p.Code)
	if !ok {
		c = Code{ID: p.Code, Name: p.Name}
	}
	r := Record{Code: c, Message: p.Message}
	keys := make([]string, 0, len(p.Attrs))
	for k := range p.Attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.Attrs = append(r.Attrs, slog.Attr{Key: k, Value: decodeValue(k, p.Attrs[k])})
	}
	return r, nil
}

// decodeValue types a journaled attribute by its key, so that Key.Of finds
// the kind it expects whatever JSON made of it.
func decodeValue(key string, raw json.RawMessage) slog.Value {
	v, ok := scalar(raw)
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return slog.StringValue(string(raw))
		}
	}
	kind, known := keyKinds[key]
	switch x := v.(type) {
	case string:
		if known && kind == kindDuration {
			if d, err := time.ParseDuration(x); err == nil {
				return slog.DurationValue(d)
			}
		}
		return slog.StringValue(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			if known && kind == kindDuration { // nanoseconds, as slog's JSON handler writes them
				return slog.DurationValue(time.Duration(n))
			}
			return slog.Int64Value(n)
		}
		f, _ := x.Float64()
		return slog.Float64Value(f)
	case bool:
		return slog.BoolValue(x)
	}
	return slog.AnyValue(v)
}

// scalar is what a json.Decoder with UseNumber makes of raw, for the values
// attributes almost always are: a string without escapes, a number, a
// boolean. Every journaled diagnostic's attributes are decoded by each
// account of its run, and a decoder for each was a third of accounting
// 1,000 nodes (issue 45). Anything else (ok false) goes to the decoder.
func scalar(raw json.RawMessage) (v any, ok bool) {
	switch {
	case len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"':
		s := raw[1 : len(raw)-1]
		// Escapes, quotes, control bytes and invalid UTF-8 (which the
		// decoder replaces) are the decoder's to read.
		if bytes.IndexFunc(s, func(r rune) bool { return r == '\\' || r == '"' || r < 0x20 || r == utf8.RuneError }) >= 0 {
			return nil, false
		}
		return string(s), true
	case string(raw) == "true":
		return true, true
	case string(raw) == "false":
		return false, true
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && jsonNumber.Match(raw):
		return json.Number(raw), true
	}
	return nil, false
}

// jsonNumber is JSON's grammar of a number (RFC 8259 section 6).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// CheckAttrs reports an attribute that the record's code does not declare,
// or whose value is not of its key's type: the contract between whoever
// journals a record and whoever reads it.
func (r Record) CheckAttrs() error {
	var errs []string
	for _, a := range r.Attrs {
		kind, ok := keyKinds[a.Key]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%q is no attribute key", a.Key))
		case !r.Code.Attrs.has(a.Key):
			errs = append(errs, fmt.Sprintf("%s does not declare %q", r.Code, a.Key))
		case !kind.accepts(a.Value.Resolve()):
			errs = append(errs, fmt.Sprintf("%s: %q is %s, want %s", r.Code, a.Key, a.Value.Kind(), kind))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// attrKind is the type of an attribute key's values.
type attrKind uint8

const (
	kindString attrKind = iota + 1
	kindInt
	kindBool
	kindDuration
)

func (k attrKind) String() string {
	return [...]string{"", "string", "int", "bool", "duration"}[k]
}

func (k attrKind) accepts(v slog.Value) bool {
	switch k {
	case kindString:
		return v.Kind() == slog.KindString
	case kindInt:
		return v.Kind() == slog.KindInt64 || v.Kind() == slog.KindUint64
	case kindBool:
		return v.Kind() == slog.KindBool
	case kindDuration:
		return v.Kind() == slog.KindDuration
	}
	return false
}

// Value is what an attribute may hold.
type Value interface {
	~string | ~int | ~int64 | ~bool
}

// Key names a typed attribute. Attr builds one, Of reads it back from a
// record (journaled or not).
type Key[T Value] struct {
	name string
	kind attrKind
}

// Name is the attribute's key in the journal and the log.
func (k Key[T]) Name() string { return k.name }

// Attr is the attribute k = v.
func (k Key[T]) Attr(v T) slog.Attr {
	switch k.kind {
	case kindDuration:
		return slog.Duration(k.name, time.Duration(int64Of(v)))
	case kindInt:
		return slog.Int64(k.name, int64Of(v))
	case kindBool:
		return slog.Bool(k.name, boolOf(v))
	}
	return slog.String(k.name, stringOf(v))
}

// Of reads k from r: its value and whether r has it (of k's type).
func (k Key[T]) Of(r Record) (T, bool) {
	var zero T
	v, ok := r.Attr(k.name)
	if !ok {
		return zero, false
	}
	p := any(&zero)
	switch k.kind {
	case kindDuration:
		var d time.Duration
		switch v.Kind() {
		case slog.KindDuration:
			d = v.Duration()
		case slog.KindString:
			pd, err := time.ParseDuration(v.String())
			if err != nil {
				return zero, false
			}
			d = pd
		case slog.KindInt64:
			d = time.Duration(v.Int64())
		default:
			return zero, false
		}
		setInt(p, int64(d))
	case kindInt:
		switch v.Kind() {
		case slog.KindInt64:
			setInt(p, v.Int64())
		case slog.KindUint64:
			setInt(p, int64(min(v.Uint64(), math.MaxInt64)))
		case slog.KindFloat64:
			setInt(p, int64(v.Float64()))
		default:
			return zero, false
		}
	case kindBool:
		if v.Kind() != slog.KindBool {
			return zero, false
		}
		setBool(p, v.Bool())
	default:
		if v.Kind() != slog.KindString {
			return zero, false
		}
		setString(p, v.String())
	}
	return zero, true
}

// The conversions below go through reflection-free type switches over the
// few types the keys are declared with.

func int64Of[T Value](v T) int64 {
	switch x := any(v).(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case time.Duration:
		return int64(x)
	}
	return 0
}

func boolOf[T Value](v T) bool { b, _ := any(v).(bool); return b }

func stringOf[T Value](v T) string {
	switch x := any(v).(type) {
	case string:
		return x
	case Class:
		return string(x)
	}
	return fmt.Sprint(v)
}

func setInt(p any, n int64) {
	switch x := p.(type) {
	case *int:
		*x = int(n)
	case *int64:
		*x = n
	case *time.Duration:
		*x = time.Duration(n)
	}
}

func setBool(p any, b bool) {
	if x, ok := p.(*bool); ok {
		*x = b
	}
}

func setString(p any, s string) {
	switch x := p.(type) {
	case *string:
		*x = s
	case *Class:
		*x = Class(s)
	}
}
