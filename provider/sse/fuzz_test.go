package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzSSE feeds untrusted bytes to the reader. Properties:
//   - it never panics and ends with io.EOF, io.ErrUnexpectedEOF or ErrEventTooLarge;
//   - reading one byte at a time gives the same events and error;
//   - the events it delivers, encoded again (with LF, CRLF or CR line
//     endings), parse back to the same events with a clean end;
//   - that well-formed stream cut at any point delivers exactly the events
//     whose dispatching blank line lies before the cut, and reports
//     io.ErrUnexpectedEOF unless the cut falls between events: a cut event is
//     never delivered.
func FuzzSSE(f *testing.F) {
	seeds := []string{
		"",
		"data: hello\n\n",
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n",
		"event: response.output_text.delta\r\ndata: {\"delta\":\"a\"}\r\n\r\n: keepalive\r\n\r\n",
		"data: a\rdata: b\r\r",
		"id: 1\nretry: 100\ndata: x\n\nid\ndata\n\n",
		"\xEF\xBB\xBFdata: bom\n\n",
		"data: cut",
		"event: x\n",
		": only a comment\n",
		"data: a\n\ndata: b\r\n\r",
		"id: a\x00b\ndata: nul\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		r.MaxEventBytes = 1 << 16
		evs, err := readAll(r)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		r1 := NewReader(iotest.OneByteReader(bytes.NewReader(in)))
		r1.MaxEventBytes = 1 << 16
		evs1, err1 := readAll(r1)
		if !reflect.DeepEqual(evs, evs1) || !errors.Is(err1, err) {
			t.Fatalf("one byte at a time differs:\n%#v %v\n%#v %v", evs, err, evs1, err1)
		}
		for _, nl := range []string{"\n", "\r\n", "\r"} {
			checkWellFormed(t, evs, nl)
		}
	})
}

// checkWellFormed encodes evs with line ending nl and checks the round trip
// and every cut of the encoded stream.
func checkWellFormed(t *testing.T, evs []Event, nl string) {
	t.Helper()
	var stream bytes.Buffer
	dispatchAt := make([]int, len(evs)) // offset just after the byte that dispatches event i
	endAt := make([]int, len(evs))      // offset just after event i's block
	prev := ""
	for i, ev := range evs {
		var b bytes.Buffer
		if err := Encode(&b, ev, prev); err != nil {
			t.Fatalf("cannot encode a parsed event %#v: %v", ev, err)
		}
		prev = ev.ID
		stream.WriteString(strings.ReplaceAll(b.String(), "\n", nl))
		endAt[i] = stream.Len()
		dispatchAt[i] = endAt[i] - len(nl) + 1
	}
	full := stream.Bytes()
	got, err := readAll(NewReader(bytes.NewReader(full)))
	if err != io.EOF || !eventsEqual(got, evs) {
		t.Fatalf("round trip (%q): got %#v %v, want %#v", nl, got, err, evs)
	}
	step := 1
	if len(full) > 2048 {
		step = len(full)/512 + 1
	}
	for cut := 0; cut <= len(full); cut += step {
		got, err := readAll(NewReader(bytes.NewReader(full[:cut])))
		k := 0
		for k < len(evs) && dispatchAt[k] <= cut {
			k++
		}
		if !eventsEqual(got, evs[:k]) {
			t.Fatalf("cut at %d of %d (%q): got %d events, want %d", cut, len(full), nl, len(got), k)
		}
		clean := cut == 0 || k > 0 && (cut == dispatchAt[k-1] || cut == endAt[k-1])
		want := io.ErrUnexpectedEOF
		if clean {
			want = io.EOF
		}
		if err != want {
			t.Fatalf("cut at %d of %d (%q): err %v, want %v", cut, len(full), nl, err, want)
		}
	}
}

func eventsEqual(a, b []Event) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
