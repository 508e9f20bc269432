package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readAll reads events until an error and returns them with that error.
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func parse(s string) ([]Event, error) { return readAll(NewReader(strings.NewReader(s))) }

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
		err  error
	}{
		{"empty", "", nil, io.EOF},
		{"one", "data: hello\n\n", []Event{{Data: "hello"}}, io.EOF},
		{"typed", "event: response.created\ndata: {}\n\n", []Event{{Type: "response.created", Data: "{}"}}, io.EOF},
		{"multi data lines", "data: a\ndata: b\n\n", []Event{{Data: "a\nb"}}, io.EOF},
		{"no space after colon", "data:x\n\n", []Event{{Data: "x"}}, io.EOF},
		{"only one space stripped", "data:  x\n\n", []Event{{Data: " x"}}, io.EOF},
		{"field without colon", "data\n\n", []Event{{Data: ""}}, io.EOF},
		{"empty data dispatches", "data:\n\n", []Event{{Data: ""}}, io.EOF},
		{"no data fires nothing", "event: ping\n\ndata: x\n\n", []Event{{Data: "x"}}, io.EOF},
		{"type resets after dispatch", "event: a\ndata: 1\n\ndata: 2\n\n", []Event{{Type: "a", Data: "1"}, {Data: "2"}}, io.EOF},
		{"comments ignored", ": keepalive\n\n: keepalive\ndata: x\n: mid\n\n:\n\n", []Event{{Data: "x"}}, io.EOF},
		{"CRLF", "event: e\r\ndata: x\r\n\r\n", []Event{{Type: "e", Data: "x"}}, io.EOF},
		{"CR", "event: e\rdata: x\r\rdata: y\r\r", []Event{{Type: "e", Data: "x"}, {Data: "y"}}, io.EOF},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []Event{{Data: "a\nb\nc"}}, io.EOF},
		{"BOM stripped once", "\xEF\xBB\xBFdata: x\n\n", []Event{{Data: "x"}}, io.EOF},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []Event{{Data: "a", ID: "7"}, {Data: "b", ID: "7"}, {Data: "c"}}, io.EOF},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", []Event{{Data: "a", ID: "1"}, {Data: "b", ID: "1"}}, io.EOF},
		{"unknown field ignored", "foo: bar\ndata: x\n\n", []Event{{Data: "x"}}, io.EOF},
		{"cut after data line", "data: a\n\ndata: b\n", []Event{{Data: "a"}}, io.ErrUnexpectedEOF},
		{"cut mid line", "data: a\n\ndata: {\"x", []Event{{Data: "a"}}, io.ErrUnexpectedEOF},
		{"cut after event field", "data: a\n\nevent: x\n", []Event{{Data: "a"}}, io.ErrUnexpectedEOF},
		{"cut after CR of last line", "data: a\r", nil, io.ErrUnexpectedEOF},
		{"end after comment is clean", "data: a\n\n: keepalive\n", []Event{{Data: "a"}}, io.EOF},
		{"end in partial comment is clean", "data: a\n\n: keepa", []Event{{Data: "a"}}, io.EOF},
		{"end after CR of blank line is clean", "data: a\r\n\r", []Event{{Data: "a"}}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("events = %#v, want %#v", got, tt.want)
			}
			// The same stream delivered one byte at a time parses the same.
			got2, err2 := readAll(NewReader(iotest.OneByteReader(strings.NewReader(tt.in))))
			if !errors.Is(err2, tt.err) || !reflect.DeepEqual(got2, tt.want) {
				t.Fatalf("one byte at a time: %#v, %v", got2, err2)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	r := NewReader(strings.NewReader("retry: 1500\ndata: a\n\nretry: 1x\ndata: b\n\n"))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if r.Retry() != 1500*time.Millisecond {
		t.Fatalf("retry = %v", r.Retry())
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if r.Retry() != 1500*time.Millisecond {
		t.Fatalf("invalid retry changed the delay: %v", r.Retry())
	}
}

func TestErrorsAreSticky(t *testing.T) {
	r := NewReader(strings.NewReader("data: a"))
	for range 3 {
		if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestReadErrorPassesThrough(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	evs, err := readAll(r)
	if !errors.Is(err, boom) || len(evs) != 1 {
		t.Fatalf("events %v err %v", evs, err)
	}
}

func TestEventTooLarge(t *testing.T) {
	r := NewReader(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	r.MaxEventBytes = 50
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v", err)
	}
	r = NewReader(strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 10) + "\n"))
	r.MaxEventBytes = 50
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("many lines: err = %v", err)
	}
}

// TestStreaming checks that an event is dispatched as soon as its blank line
// arrives, without waiting for more input (a CR-terminated blank line must
// not make the reader wait for a possible LF).
func TestStreaming(t *testing.T) {
	for _, blank := range []string{"\n\n", "\r\n\r\n", "\r\r"} {
		pr, pw := io.Pipe()
		r := NewReader(pr)
		got := make(chan Event, 1)
		go func() {
			ev, _ := r.Next()
			got <- ev
		}()
		if _, err := pw.Write([]byte("data: x" + blank)); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-got:
			if ev.Data != "x" {
				t.Fatalf("%q: got %#v", blank, ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: event not dispatched while the stream stays open", blank)
		}
		_ = pw.Close()
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	evs := []Event{
		{Type: "response.created", Data: `{"type":"response.created","sequence_number":0}`, ID: "0"},
		{Data: "two\nlines", ID: "0"},
		{Data: "", ID: ""},
		{Type: "message", Data: " leading space\n", ID: "x"},
	}
	var buf bytes.Buffer
	prev := ""
	for _, ev := range evs {
		if err := Encode(&buf, ev, prev); err != nil {
			t.Fatal(err)
		}
		prev = ev.ID
	}
	got, err := parse(buf.String())
	if err != io.EOF || !reflect.DeepEqual(got, evs) {
		t.Fatalf("got %#v, %v", got, err)
	}
	if err := Encode(io.Discard, Event{Data: "a\rb"}, ""); err == nil {
		t.Fatal("CR in data encoded")
	}
}

// An event is stamped with the read that brought it, not with the moment its
// reader got round to it: two events that arrived together share a stamp
// however long the first one's handling took, and a later read stamps later.
func TestReceivedIsTheArrival(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	r := NewReader(pr)
	if !r.Received().IsZero() {
		t.Fatalf("stamped before any read: %v", r.Received())
	}
	write := func(s string) {
		go func() { _, _ = pw.Write([]byte(s)) }()
	}
	before := time.Now()
	write("data: a\n\ndata: b\n\n")
	if ev, err := r.Next(); err != nil || ev.Data != "a" {
		t.Fatalf("got %#v, %v", ev, err)
	}
	a := r.Received()
	if a.Before(before) || a.After(time.Now()) {
		t.Fatalf("a stamped %v, outside its read (%v on)", a, before)
	}
	time.Sleep(20 * time.Millisecond) // the reader busy with a
	if ev, err := r.Next(); err != nil || ev.Data != "b" {
		t.Fatalf("got %#v, %v", ev, err)
	}
	if b := r.Received(); !b.Equal(a) {
		t.Fatalf("b, read with a, stamped %v after it: its wait in the buffer counted as arrival", b.Sub(a))
	}
	write("data: c\n\n")
	if ev, err := r.Next(); err != nil || ev.Data != "c" {
		t.Fatalf("got %#v, %v", ev, err)
	}
	if c := r.Received(); c.Sub(a) < 20*time.Millisecond {
		t.Fatalf("c, read 20 ms after a, stamped %v after it", c.Sub(a))
	}
	_ = pw.Close()
}
