// Package sse reads server-sent events as the WHATWG HTML standard (section
// 9.2, "Server-sent events") parses them, for adapters that must not trust a
// stream's end: a blank line dispatches an event, a block without data fires
// nothing, lines starting with ':' are comments, CRLF, LF and CR all end a
// line, and an event left unfinished when the stream ends is discarded and
// reported as io.ErrUnexpectedEOF instead of passing for a normal end.
//
// The input is untrusted: the reader never panics and bounds the memory one
// event may take (MaxEventBytes).
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// DefaultMaxEventBytes bounds the pending bytes of one event (its data, type
// and id and the line being read). A Responses API response.completed event
// carries the whole response, so the bound is generous.
const DefaultMaxEventBytes = 32 << 20

// ErrEventTooLarge is returned when one event grows past the reader's bound.
var ErrEventTooLarge = errors.New("sse: event too large")

// Event is one dispatched event.
type Event struct {
	// Type is the value of the last "event:" field of the block; empty when
	// there was none (the standard then calls the event "message").
	Type string
	// Data is the concatenated "data:" values joined by "\n", without the
	// final newline.
	Data string
	// ID is the last event ID in force when the event was dispatched.
	ID string
}

// Reader reads events from a stream.
type Reader struct {
	br  *bufio.Reader
	src stamped
	// MaxEventBytes bounds one pending event; 0 means DefaultMaxEventBytes.
	MaxEventBytes int

	line    []byte
	data    bytes.Buffer
	typ     string
	idBuf   string // the last event ID buffer (set by "id:", committed on dispatch)
	lastID  string // the committed last event ID
	retry   time.Duration
	pending bool // a field was seen since the last blank line
	skipLF  bool // the previous line ended with CR: an LF right after it belongs to it
	first   bool // no line read yet (a leading BOM is stripped)
	err     error
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, 32<<10) }

// NewReaderSize returns a Reader whose read buffer holds size bytes. A
// stream of small events (chat chunks of a few hundred bytes) needs no more
// than a few KiB; at thousands of streams at once the buffer is a large part
// of each stream's memory. An event may still be longer than the buffer.
func NewReaderSize(r io.Reader, size int) *Reader {
	rd := &Reader{src: stamped{r: r}, first: true}
	rd.br = bufio.NewReaderSize(&rd.src, size)
	return rd
}

// Received is when the stream's last read that returned bytes returned: an
// event just returned arrived no later, and it may have waited in the buffer
// since, while its reader was busy (an adapter waiting for the journal on a
// loaded machine). The silence a gateway cuts at is measured from arrivals,
// so adapters stamp events with this, not with the moment they handle them.
// One clock read per read of the stream, not one per event.
func (r *Reader) Received() time.Time { return r.src.at }

// stamped notes when a read returned bytes.
type stamped struct {
	r  io.Reader
	at time.Time
}

func (s *stamped) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.at = time.Now()
	}
	return n, err
}

// LastEventID is the last event ID committed by a dispatch (what a client
// sends back as Last-Event-ID when it reconnects).
func (r *Reader) LastEventID() string { return r.lastID }

// Retry is the reconnection delay last set by a valid "retry:" field, 0 if none.
func (r *Reader) Retry() time.Duration { return r.retry }

// Next returns the next event. At the end of the stream it returns io.EOF if
// the stream ended between events, io.ErrUnexpectedEOF if it ended inside
// one (that event is discarded), or the underlying read error. After an error
// every call returns the same error.
func (r *Reader) Next() (Event, error) {
	typ, data, err := r.NextRaw()
	if err != nil {
		return Event{}, err
	}
	return Event{Type: typ, Data: string(data), ID: r.lastID}, nil
}

// NextRaw is Next without the copy of the event's data: data is the
// reader's own buffer, valid only until the next call, and the event's ID
// is LastEventID. A decoder that takes what it needs from each event saves
// an allocation per event.
func (r *Reader) NextRaw() (typ string, data []byte, err error) {
	if r.err != nil {
		return "", nil, r.err
	}
	for {
		line, partial, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if r.pending || partial && !isComment(line) {
					err = io.ErrUnexpectedEOF
				}
			}
			r.err = err
			r.reset()
			return "", nil, err
		}
		if r.first {
			r.first = false
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if typ, data, ok := r.dispatch(); ok {
				return typ, data, nil
			}
			continue
		}
		if err := r.field(line); err != nil {
			r.err = err
			r.reset()
			return "", nil, err
		}
	}
}

func isComment(line []byte) bool { return len(line) > 0 && line[0] == ':' }

func (r *Reader) max() int {
	if r.MaxEventBytes > 0 {
		return r.MaxEventBytes
	}
	return DefaultMaxEventBytes
}

// readLine reads one line without its terminator. At the end of the stream
// it returns the unterminated rest (partial) with the read error.
func (r *Reader) readLine() (line []byte, partial bool, err error) {
	r.line = r.line[:0]
	for {
		n := r.br.Buffered()
		if n == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return r.line, len(r.line) > 0, err
			}
			n = r.br.Buffered()
		}
		buf, _ := r.br.Peek(n)
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if len(r.line)+len(buf)+r.data.Len() > r.max() {
				return nil, false, ErrEventTooLarge
			}
			r.line = append(r.line, buf...)
			_, _ = r.br.Discard(len(buf))
			continue
		}
		if len(r.line)+i+r.data.Len() > r.max() {
			return nil, false, ErrEventTooLarge
		}
		r.line = append(r.line, buf[:i]...)
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.line, false, nil
	}
}

// field processes one non-blank line.
func (r *Reader) field(line []byte) error {
	if isComment(line) {
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		r.typ = string(value)
	case "data":
		if r.data.Len()+len(value)+1+len(r.typ)+len(r.idBuf) > r.max() {
			return ErrEventTooLarge
		}
		r.data.Write(value)
		r.data.WriteByte('\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.idBuf = string(value)
		}
	case "retry":
		if ms, ok := digits(value); ok {
			r.retry = time.Duration(ms) * time.Millisecond
		}
	default:
		return nil // unknown fields are ignored and do not start an event
	}
	r.pending = true
	return nil
}

// digits parses a non-empty string of ASCII digits, saturating instead of overflowing.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	const limit = int64(1<<63-1) / int64(time.Millisecond)
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= limit {
			n = n*10 + int64(c-'0')
		}
	}
	if n > limit {
		n = limit
	}
	return n, true
}

// dispatch ends the current block at a blank line. The data it returns
// stays valid until the next read: reset keeps the buffer's bytes.
func (r *Reader) dispatch() (typ string, data []byte, ok bool) {
	r.lastID = r.idBuf
	defer r.reset()
	if r.data.Len() == 0 {
		return "", nil, false
	}
	d := r.data.Bytes()
	return r.typ, d[:len(d)-1], true // without the one trailing newline
}

// reset clears the pending event (not the last event ID buffer, which
// persists across events as the standard says).
func (r *Reader) reset() {
	r.data.Reset()
	r.typ = ""
	r.pending = false
}

// Encode writes ev as a well-formed event block ending in a blank line.
// prevID is the last event ID in force before ev: an "id:" field is written
// only when ev.ID differs from it. Type and ID must not contain CR or LF
// (and ID no NUL); Data may contain LF but not CR.
func Encode(w io.Writer, ev Event, prevID string) error {
	if strings.ContainsAny(ev.Type, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") || strings.ContainsRune(ev.Data, '\r') {
		return fmt.Errorf("sse: event cannot be encoded: %q", ev.Type)
	}
	var b strings.Builder
	if ev.Type != "" {
		b.WriteString("event: " + ev.Type + "\n")
	}
	if ev.ID != prevID {
		b.WriteString("id: " + ev.ID + "\n")
	}
	for _, l := range strings.Split(ev.Data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
