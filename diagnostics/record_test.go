package diagnostics

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every code says what it reports, so that no reader needs a list of its own.
func TestEveryCodeHasARole(t *testing.T) {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, c := range Codes() {
		if ids[c.ID] || names[c.Name] {
			t.Errorf("%s: duplicate id or name", c)
		}
		ids[c.ID], names[c.Name] = true, true
		switch c.Role {
		case RoleFault:
			if c.Noun == "" {
				t.Errorf("%s is a fault without a noun for the verdicts", c)
			}
			if c.Means != 0 {
				t.Errorf("%s is a fault with a means", c)
			}
		case RoleStep:
			if c.Means == 0 {
				t.Errorf("%s is a step without a means", c)
			}
			if c.Noun != "" {
				t.Errorf("%s is a step with a fault noun", c)
			}
		case RoleRecord:
			if c.Means != 0 || c.Noun != "" {
				t.Errorf("%s is a record with a means or a noun", c)
			}
		case RoleOutcome:
			if c.Means != 0 {
				t.Errorf("%s is an outcome with a means", c)
			}
			if c.Ends == "" && c != NodeFailed {
				t.Errorf("%s is an outcome without the words for how a node ended", c)
			}
		default:
			t.Errorf("%s has no role", c)
		}
		if c.Ends != "" && c.Role != RoleOutcome {
			t.Errorf("%s says how a node ended but is no outcome", c)
		}
		for _, k := range c.Attrs.Names() {
			if _, ok := keyKinds[k]; !ok {
				t.Errorf("%s declares %q, which is no key", c, k)
			}
		}
		if got, ok := Lookup(c.ID); !ok || got != c {
			t.Errorf("Lookup(%s) = %v, %v", c.ID, got, ok)
		}
	}
	// Every class that fails a node at once has an outcome code, and every
	// transient one a fault code: DetectedCode never falls through by accident.
	for _, cl := range []Class{ClassDisconnect, ClassConnect, ClassRateLimited, ClassServer} {
		if c := DetectedCode(cl); c.Role != RoleFault {
			t.Errorf("DetectedCode(%s) = %s, not a fault", cl, c)
		}
	}
}

func TestKeysAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range allKeys {
		name, kind := k.keyOf()
		if seen[name] || kind == 0 || name == "" {
			t.Errorf("key %q: duplicate or untyped", name)
		}
		seen[name] = true
	}
}

// A record survives the journal: what the executor builds is what every
// reader decodes, typed by its keys.
func TestRecordRoundTrip(t *testing.T) {
	r := New(RetryStarted, "retrying 1/3 in 1.2s (transport_disconnect)",
		KeyClass.Attr(ClassDisconnect), KeyDelay.Attr(1234567*time.Microsecond), KeyBackoffStep.Attr(2),
		KeyRetriesLeft.Attr(1), KeyReconnectsLeft.Attr(8), KeyReplays.Attr(false), KeyRegeneratedBytes.Attr(235))
	if err := r.CheckAttrs(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"delay":"1.235s"`) || !strings.Contains(string(b), `"code":"NR103"`) {
		t.Errorf("journal form %s", b)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != RetryStarted || got.Message != r.Message {
		t.Errorf("decoded %v %q", got.Code, got.Message)
	}
	if c, ok := KeyClass.Of(got); !ok || c != ClassDisconnect {
		t.Errorf("class %q %v", c, ok)
	}
	if d, ok := KeyDelay.Of(got); !ok || d != 1235*time.Millisecond {
		t.Errorf("delay %v %v", d, ok)
	}
	if n, ok := KeyBackoffStep.Of(got); !ok || n != 2 {
		t.Errorf("backoff_step %v %v", n, ok)
	}
	if rp, ok := KeyReplays.Of(got); !ok || rp {
		t.Errorf("replays %v %v", rp, ok)
	}
	if _, ok := KeyRef.Of(got); ok {
		t.Error("ref found in a record without it")
	}
	if err := got.CheckAttrs(); err != nil {
		t.Errorf("the decoded record: %v", err)
	}
	// A key read as another type is absent, not a zero.
	if _, ok := KeyState.Of(New(StatusChecked, "", KeyPolls.Attr(3))); ok {
		t.Error("state found")
	}
}

func TestCheckAttrs(t *testing.T) {
	for _, c := range []struct {
		r    Record
		want string
	}{
		{New(Reattached, "", KeyRef.Attr("r"), KeySeq.Attr(4)), ""},
		{New(Reattached, "", KeyDelay.Attr(time.Second)), "does not declare"},
		{New(Reattached, "", slog.String("whatever", "x")), "no attribute key"},
		{New(Reattached, "", slog.String("seq", "4")), "want int"},
	} {
		err := c.r.CheckAttrs()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.r.Attrs, err, c.want)
		}
	}
}

// Journals written before the typed record, and by a newer noderun, still decode.
func TestDecodeOlderAndNewerPayloads(t *testing.T) {
	old := `{"code":"NR102","name":"reconnect_scheduled","message":"reconnecting 1/8 in 574ms (transport_disconnect)",` +
		`"attrs":{"class":"transport_disconnect","delay":"574ms","backoff_step":0,"retries_left":1,"reconnects_left":8}}`
	r, err := Decode([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := KeyDelay.Of(r); d != 574*time.Millisecond || r.Code != ReconnectScheduled || !r.Code.SpendsReconnect() {
		t.Errorf("%+v", r)
	}
	r, err = Decode([]byte(`{"code":"NR999","name":"from_the_future","message":"m","attrs":{"x":1}}`))
	if err != nil || r.Code.ID != "NR999" || r.Code.Role != 0 {
		t.Errorf("%+v %v", r, err)
	}
	for _, bad := range []string{``, `{`, `{"name":"x"}`, `[]`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) succeeded", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"code":"NR101","name":"disconnect_detected","message":"m","attrs":{"silent":"1.5s","status":502}}`))
	f.Add([]byte(`{"code":"NR103","attrs":{"delay":12,"replays":"yes"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes can be journaled again and reads back the same.
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Decode(again)
		if err != nil || r2.Code.ID != r.Code.ID || r2.Message != r.Message || len(r2.Attrs) != len(r.Attrs) {
			t.Fatalf("%s -> %s: %v", b, again, err)
		}
	})
}

// No reader of diagnostics outside this package matches a code by its
// string: it asks the code's role, means or noun, or compares Code values.
// Tests may name codes; so may comments.
func TestNoReaderMatchesCodeStrings(t *testing.T) {
	names := make([]string, 0, len(Codes()))
	for _, c := range Codes() {
		names = append(names, regexp.QuoteMeta(c.Name))
	}
	// A code's ID anywhere, or its name where it is compared or looked up
	// (a profile field shares the name idle_timeout).
	lit := regexp.MustCompile(`"NR[0-9]{3}[^"]*"|(\[|[=!]=\s*|case\s+|,\s*)"(` + strings.Join(names, "|") + `)"[]:,]`)
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".tools", "testdata", "node_modules", "diagnostics":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			code := line
			if k := strings.Index(code, "//"); k >= 0 {
				code = code[:k]
			}
			if m := lit.FindString(code); m != "" {
				t.Errorf("%s:%d matches diagnostic code %s by string: ask diagnostics (Code.Role, Means, Noun, or ==)", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// decoded is what the general path makes of raw: a json.Decoder with
// UseNumber, as decodeValue did for every value before scalar.
func decoded(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return v
}

// scalar's fast path reads each value as the decoder does, and leaves to it
// what it cannot read exactly.
func TestScalarIsTheDecoders(t *testing.T) {
	for _, c := range []struct {
		raw  string
		fast bool
	}{
		{`"transport_disconnect"`, true}, {`""`, true}, {`"574ms"`, true}, {`"héllo ☃"`, true},
		{`0`, true}, {`-12`, true}, {`1.5`, true}, {`1e9`, true}, {`-0.25E-3`, true}, {`9223372036854775808`, true},
		{`true`, true}, {`false`, true},
		{`"a\"b"`, false}, {`"a\\nb"`, false}, {`"\u00e9"`, false}, {"\"\xff\"", false},
		{`null`, false}, {`[1]`, false}, {`{"a":1}`, false}, {`01`, false}, {`1.`, false}, {`+1`, false}, {` 1`, false},
	} {
		v, ok := scalar([]byte(c.raw))
		if ok != c.fast {
			t.Errorf("scalar(%s): fast %v, want %v", c.raw, ok, c.fast)
			continue
		}
		if ok && json.Valid([]byte(c.raw)) {
			if want := decoded(t, []byte(c.raw)); !reflect.DeepEqual(v, want) {
				t.Errorf("scalar(%s) = %#v, the decoder says %#v", c.raw, v, want)
			}
		}
	}
}

func FuzzScalar(f *testing.F) {
	for _, s := range []string{`"x"`, `12`, `-1.5e3`, `true`, `"a\u0041"`, "\"\xc3\xa9\"", `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := scalar(raw)
		if !ok {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("scalar(%q) read what is not JSON: %#v", raw, v)
		}
		if want := decoded(t, raw); !reflect.DeepEqual(v, want) {
			t.Fatalf("scalar(%q) = %#v, the decoder says %#v", raw, v, want)
		}
	})
}
