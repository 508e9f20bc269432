// Package guard holds the bounds every adapter puts on what a server sends,
// so that a hostile or broken server costs a clear error and bounded memory,
// never an OOM or a prompt sent somewhere else:
//
//   - a stream line or event is at most MaxEventBytes (sse.DefaultMaxEventBytes),
//   - an error answer's body is kept to MaxErrorBody bytes, its size noted,
//   - redirects are never followed (they would re-send the prompt, and may
//     carry credentials, to wherever the server points).
package guard

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider/sse"
)

// MaxEventBytes bounds one line or event of a stream: the same bound for
// every adapter.
const MaxEventBytes = sse.DefaultMaxEventBytes

// MaxErrorBody is how much of an error answer's body is kept: enough for any
// API's error object, little enough to journal and print.
const MaxErrorBody = 8 << 10

// countLimit bounds how far past MaxErrorBody a body is read to report its size.
const countLimit = 1 << 20

// CheckRedirect is an http.Client's CheckRedirect that follows no redirect.
// Model APIs do not redirect; a server that does (a captive portal, a
// misconfigured proxy) would have the request, prompt and all, sent to
// another host. The error names the target.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("%w: %s redirected to %s; noderun follows no redirects (they would re-send the prompt elsewhere): set base_url to the final URL",
		diagnostics.ErrProtocol, via[0].URL.Redacted(), req.URL.Redacted())
}

// Client returns hc with CheckRedirect set (a copy; hc is not modified).
func Client(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = CheckRedirect
	return &c
}

// BoundErrorBody replaces the body of an error answer by at most
// MaxErrorBody bytes of it, followed by a note of its size when it was
// longer, and closes the original. Decoders of error objects then see a
// bounded body; a truncated JSON object simply fails to decode and the status
// still classifies the error.
func BoundErrorBody(resp *http.Response) {
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody+1))
	if len(kept) > MaxErrorBody {
		rest, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, countLimit))
		size := strconv.FormatInt(int64(len(kept))+rest, 10) + " bytes"
		if rest == countLimit {
			size = "more than " + size
		}
		kept = append(trimRune(kept[:MaxErrorBody]), fmt.Sprintf(" … [truncated: the body was %s]", size)...)
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(kept))
	resp.ContentLength = int64(len(kept))
}

// Excerpt describes the first bytes of an answer for a message: at most n
// bytes, quoted, valid UTF-8.
func Excerpt(b []byte, n int) string {
	if len(b) > n {
		return strconv.Quote(string(trimRune(b[:n]))) + "…"
	}
	return strconv.Quote(string(b))
}

// trimRune drops a multi-byte character cut at the end of b.
func trimRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// NotEventStream is the error of a 200 answer to a streaming request that is
// not an event stream: it names the content type and the first bytes.
func NotEventStream(op string, resp *http.Response) error {
	head := make([]byte, 256)
	n, _ := io.ReadFull(resp.Body, head)
	return &diagnostics.Error{Class: diagnostics.ClassProtocol, Status: resp.StatusCode,
		Err: fmt.Errorf("%s: %w: content type %q, want text/event-stream; the answer begins %s",
			op, diagnostics.ErrProtocol, resp.Header.Get("Content-Type"), Excerpt(head[:n], 120))}
}

// LineLimit is the error of a stream line or event past MaxEventBytes.
func LineLimit(op string) error {
	return &diagnostics.Error{Class: diagnostics.ClassLimit,
		Err: fmt.Errorf("%s: %w: a stream line or event is longer than %d MiB", op, diagnostics.ErrLimit, MaxEventBytes>>20)}
}
