package jsonindent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// encoderOutput is what json.Encoder with SetIndent writes: the reference.
func encoderOutput(t testing.TB, v any, indent string) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestMarshalIsTheEncoders(t *testing.T) {
	type node struct {
		ID     string `json:"id"`
		Output string `json:"output,omitempty"`
		N      int    `json:"n"`
	}
	for _, v := range []any{
		nil, 1, "x", []int{}, map[string]int{}, []string{"a"},
		map[string]any{"a": []any{1, "b", nil, true, map[string]any{}, []any{}}, "c": map[string]any{"d": 2.5}},
		struct {
			RunID   string   `json:"run_id"`
			Nodes   []node   `json:"nodes"`
			Summary []string `json:"summary"`
		}{"r", []node{{"a", "quotes \" and \\ backslashes, {braces}: [brackets], commas, <html> & \u2028 \x01 é", 1}, {ID: "b"}}, []string{}},
		[]string{`\`, `\\`, `"`, `\"`, `a\"b`, "\\\"\\"},
	} {
		want := encoderOutput(t, v, "  ")
		got, err := Marshal(v, "  ")
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%#v:\n got %q, %v\nwant %q", v, got, err, want)
		}
	}
}

func TestAppendRejectsWhatIsNotJSON(t *testing.T) {
	for _, src := range []string{`"abc`, `"ab\"`, `[1,2`, `{"a":1}}`, `]`, `"\`} {
		if _, err := Append(nil, []byte(src), "  "); err == nil {
			t.Errorf("%q: no error", src)
		}
	}
}

// Whatever compact JSON json.Compact makes of the input, Append indents it
// as json.Indent does.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,{"b":"c\"d\\"},[]],"e":{}}`, `"x"`, `[null,true,false,-1.5e3]`, `{"a":"\u2028<>&"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(s)) != nil {
			return
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), "", "\t"); err != nil {
			t.Fatal(err)
		}
		got, err := Append(nil, compact.Bytes(), "\t")
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q:\n got %q, %v\nwant %q", compact.Bytes(), got, err, want.Bytes())
		}
	})
}

// BenchmarkMarshal is the --json result of 1,000 nodes of 1 KiB: Marshal
// against json.Encoder with SetIndent.
func BenchmarkMarshal(b *testing.B) {
	type node struct {
		ID, State, Output string
	}
	var v []node
	for range 1000 {
		v = append(v, node{"n", "completed", strings.Repeat("lorem ipsum dolor sit amet, consectetur ", 25)})
	}
	b.Run("jsonindent", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(v, "  "); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoder", func(b *testing.B) {
		for b.Loop() {
			encoderOutput(b, v, "  ")
		}
	})
}
