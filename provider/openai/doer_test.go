package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider/sim"
)

// chatBody is a chat stream as the simulator sends it: tokens chunks, a
// finish_reason, usage and [DONE].
func chatBody(tokens int) []byte {
	var b bytes.Buffer
	for i, tok := range sim.Text("sim", "bench", 1, tokens) {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"sim\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", tok)
		if i == tokens-1 {
			b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"sim\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		}
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkDoneWatcher is what watching a 10,000-chunk body for [DONE]
// costs, read 4 KiB at a time as go-openai's line reader reads it.
func BenchmarkDoneWatcher(b *testing.B) {
	body := chatBody(10000)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		obs := &observation{}
		w := &doneWatcher{r: io.NopCloser(bytes.NewReader(body)), obs: obs}
		for {
			if _, err := w.Read(buf); err != nil {
				break
			}
		}
		if !obs.sawDone() {
			b.Fatal("no [DONE]")
		}
	}
}

func BenchmarkPlainRead(b *testing.B) {
	body := chatBody(10000)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := bytes.NewReader(body)
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}
}

// watchAll reads body through a doneWatcher in reads of at most size bytes
// with lines bounded to limit, as go-openai's line reader would: until an
// error. It returns whether [DONE] was seen and whether a line was too long.
func watchAll(t testing.TB, body []byte, size, limit int) (done, tooLong bool) {
	obs := &observation{}
	w := &doneWatcher{r: io.NopCloser(bytes.NewReader(body)), obs: obs, max: limit}
	buf := make([]byte, size)
	for {
		_, err := w.Read(buf)
		if errors.Is(err, io.EOF) {
			return obs.sawDone(), false
		}
		if err != nil {
			if !errors.Is(err, diagnostics.ErrLimit) {
				t.Fatalf("unexpected error %v", err)
			}
			return obs.sawDone(), true
		}
	}
}

// refWatch is what doneWatcher must find, line by line: a whole line (one
// that ends with a newline) that is a [DONE] line, and a line, whole or
// not, longer than limit (its newline not counted).
func refWatch(body []byte, limit int) (done, tooLong bool) {
	lines := bytes.Split(body, []byte("\n"))
	for i, l := range lines {
		if len(l) > limit {
			return done, true
		}
		if i < len(lines)-1 && isDone(l) {
			done = true
		}
	}
	return done, false
}

// FuzzDoneWatcher holds the watcher to refWatch on any body, read in
// pieces of any size, with a small line bound.
func FuzzDoneWatcher(f *testing.F) {
	f.Add([]byte("data: {}\n\ndata: [DONE]\n\n"), uint8(3), uint8(40))
	f.Add([]byte("data: {\"x\":\"[DONE]\"}\ndata:[DONE]\r\n"), uint8(7), uint8(40))
	f.Add([]byte("x\ndata: [DONE]data: [DONE]\ny\n"), uint8(64), uint8(40))
	f.Add([]byte("0123456789\n0123456789012345\n"), uint8(9), uint8(12))
	f.Add(chatBody(20), uint8(200), uint8(255))
	f.Fuzz(func(t *testing.T, body []byte, size, limit uint8) {
		s, l := int(size)%97+1, int(limit)%64+1
		wantDone, wantLong := refWatch(body, l)
		done, long := watchAll(t, body, s, l)
		if long != wantLong || (!long && done != wantDone) {
			t.Fatalf("%q in reads of %d, lines <= %d: done %v, too long %v; want %v, %v", body, s, l, done, long, wantDone, wantLong)
		}
		if long && done && !wantDone {
			t.Fatalf("%q: [DONE] seen that is not there", body)
		}
	})
}

// Lines are bounded however they fall into reads: within one read, across
// reads, the line a read ends and the one it leaves open.
func TestDoneWatcherBoundsLines(t *testing.T) {
	for _, c := range []struct {
		body string
		size int
		long bool
	}{
		{"0123456789\n0123456789\n", 64, false},
		{"0123456789\n0123456789a\nx\n", 64, true}, // whole, inside one read
		{"0123456789a\n", 4, true},                 // across reads
		{"0123\n0123456789a", 64, true},            // left open
		{"012345\n6789a\n", 8, false},
		{"01234567\n89abcdefgh\n", 12, false}, // ends in the next read
		{"01234567\n89abcdefghi\n", 12, true},
	} {
		if _, long := watchAll(t, []byte(c.body), c.size, 10); long != c.long {
			t.Errorf("%q in reads of %d: too long %v, want %v", c.body, c.size, long, c.long)
		}
	}
}
