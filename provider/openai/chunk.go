package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	goopenai "github.com/sashabaranov/go-openai"
)

// The lean chunk path. A chat chunk is ~250 bytes of JSON of which noderun
// needs a few fields; decoding all of it into go-openai's
// ChatCompletionStreamResponse (reflection, a string for each of id, object,
// model and system_fingerprint, a slice of ~300-byte choices) was ~90% of a
// stream's CPU. decodeChunk walks the bytes once, validates them as
// encoding/json would, and keeps only the fields below.
//
// What it promises (FuzzLeanChunk holds it to encoding/json into
// goopenai.ChatCompletionStreamResponse on any input):
//   - where encoding/json succeeds, decodeChunk succeeds with the same values;
//   - where it fails, decodeChunk fails with the same error, except for a
//     type error in a field noderun does not read (say "created": "x"),
//     which it does not look at, as a decoder of only what it needs should not.
//
// Anything the fast walk is not sure of (a key with escapes or in another
// case, a field given twice, a number that is not a plain integer, nesting
// deeper than fastDepth, or any error at all) is decoded again by
// encoding/json (decodeSlow), so the rare shapes cost a reflective decode
// and the usual ones none.

// chunk is what noderun reads from one chat chunk.
type chunk struct {
	choices  []choice
	hasUsage bool // a "usage" object (not null)
	usage    chunkUsage
	// errRaw is the raw value of a top-level "error" member that is not
	// null: the stream carries an error object instead of a chunk.
	errRaw []byte
}

type choice struct {
	index     int
	content   string
	reasoning string // delta.reasoning_content
	finish    string
	toolCalls []toolCall
}

type toolCall struct {
	hasIndex  bool
	index     int
	id, typ   string
	name, arg string // function.name, function.arguments
}

type chunkUsage struct {
	prompt, completion int
	hasDetails         bool // completion_tokens_details is an object
	reasoning          int  // completion_tokens_details.reasoning_tokens
}

// errBail: the fast walk leaves this chunk to encoding/json.
var errBail = errors.New("lean chunk: decode with encoding/json")

// fastDepth bounds the fast walk's nesting; deeper values (never in a real
// chunk) go to encoding/json, which bounds them itself (10,000).
const fastDepth = 64

// decodeChunk decodes data into c, reusing c's slices.
func decodeChunk(data []byte, c *chunk) error {
	d := leanDecoder{b: data}
	c.reset()
	if err := d.top(c); err == nil {
		return nil
	}
	c.reset()
	return decodeSlow(data, c)
}

func (c *chunk) reset() {
	c.choices = c.choices[:0]
	c.hasUsage, c.usage, c.errRaw = false, chunkUsage{}, nil
}

// decodeSlow is encoding/json's answer, in chunk's form.
func decodeSlow(data []byte, c *chunk) error {
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &probe) == nil && len(probe.Error) > 0 && string(probe.Error) != "null" {
		c.errRaw = probe.Error
	}
	var resp goopenai.ChatCompletionStreamResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		if c.errRaw != nil {
			return nil // the error object is what the stream said
		}
		return err
	}
	for _, ch := range resp.Choices {
		out := choice{index: ch.Index, content: ch.Delta.Content, reasoning: ch.Delta.ReasoningContent, finish: string(ch.FinishReason)}
		for _, tc := range ch.Delta.ToolCalls {
			t := toolCall{id: tc.ID, typ: string(tc.Type), name: tc.Function.Name, arg: tc.Function.Arguments}
			if tc.Index != nil {
				t.hasIndex, t.index = true, *tc.Index
			}
			out.toolCalls = append(out.toolCalls, t)
		}
		c.choices = append(c.choices, out)
	}
	if u := resp.Usage; u != nil {
		c.hasUsage = true
		c.usage = chunkUsage{prompt: u.PromptTokens, completion: u.CompletionTokens}
		if dt := u.CompletionTokensDetails; dt != nil {
			c.usage.hasDetails, c.usage.reasoning = true, dt.ReasoningTokens
		}
	}
	return nil
}

// leanDecoder is the fast walk over one chunk's bytes.
type leanDecoder struct {
	b     []byte
	i     int
	depth int
}

func (d *leanDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *leanDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null consumes a null literal if one is next.
func (d *leanDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

func (d *leanDecoder) top(c *chunk) error {
	d.ws()
	if d.null() { // encoding/json leaves the value as it is
		return d.end()
	}
	seen := 0
	err := d.object(func(key []byte) error {
		switch k := matchKey(key, topKeys, &seen); k {
		case 0: // choices
			return d.choices(c)
		case 1: // usage
			return d.usage(c)
		case 2: // error
			start := d.i
			if d.null() {
				return nil
			}
			if err := d.skip(); err != nil {
				return err
			}
			c.errRaw = d.b[start:d.i]
			return nil
		case -1:
			return d.skip()
		default:
			return errBail
		}
	})
	if err != nil {
		return err
	}
	return d.end()
}

func (d *leanDecoder) end() error {
	d.ws()
	if d.i != len(d.b) {
		return errBail
	}
	return nil
}

var (
	topKeys    = []string{"choices", "usage", "error"}
	choiceKeys = []string{"index", "delta", "finish_reason"}
	deltaKeys  = []string{"content", "reasoning_content", "tool_calls"}
	toolKeys   = []string{"index", "id", "type", "function"}
	funcKeys   = []string{"name", "arguments"}
	usageKeys  = []string{"prompt_tokens", "completion_tokens", "completion_tokens_details"}
	detailKeys = []string{"reasoning_tokens"}
)

// matchKey returns the index of key among names (exact match), -1 when it
// is none of them, or -2 when encoding/json might match it to one of them
// another way (escapes, another case, a Unicode fold) or it was seen
// before in this object (encoding/json merges repeats): the fast walk
// leaves such a chunk to encoding/json.
func matchKey(key []byte, names []string, seen *int) int {
	if bytes.IndexByte(key, '\\') >= 0 {
		return -2
	}
	for i, n := range names {
		if string(key) == n {
			if *seen&(1<<i) != 0 {
				return -2
			}
			*seen |= 1 << i
			return i
		}
	}
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return -2
		}
	}
	return -1
}

// object walks an object, calling member for each key with the decoder at
// the member's value; member must consume the value.
func (d *leanDecoder) object(member func(key []byte) error) error {
	if d.peek() != '{' {
		return errBail
	}
	if d.depth++; d.depth > fastDepth {
		return errBail
	}
	d.i++
	d.ws()
	if d.peek() == '}' {
		d.i++
		d.depth--
		return nil
	}
	for {
		d.ws()
		start, err := d.str()
		if err != nil {
			return err
		}
		key := d.b[start+1 : d.i-1]
		d.ws()
		if d.peek() != ':' {
			return errBail
		}
		d.i++
		d.ws()
		if err := member(key); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return nil
		default:
			return errBail
		}
	}
}

// array walks an array, calling elem at each element; elem must consume it.
func (d *leanDecoder) array(elem func() error) error {
	if d.peek() != '[' {
		return errBail
	}
	if d.depth++; d.depth > fastDepth {
		return errBail
	}
	d.i++
	d.ws()
	if d.peek() == ']' {
		d.i++
		d.depth--
		return nil
	}
	for {
		d.ws()
		if err := elem(); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return nil
		default:
			return errBail
		}
	}
}

func (d *leanDecoder) choices(c *chunk) error {
	if d.null() {
		c.choices = c.choices[:0]
		return nil
	}
	return d.array(func() error {
		if len(c.choices) < cap(c.choices) {
			c.choices = c.choices[:len(c.choices)+1]
			tc := c.choices[len(c.choices)-1].toolCalls[:0]
			c.choices[len(c.choices)-1] = choice{toolCalls: tc}
		} else {
			c.choices = append(c.choices, choice{})
		}
		ch := &c.choices[len(c.choices)-1]
		if d.null() {
			return nil
		}
		seen := 0
		return d.object(func(key []byte) error {
			switch matchKey(key, choiceKeys, &seen) {
			case 0:
				return d.int(&ch.index)
			case 1:
				return d.delta(ch)
			case 2:
				return d.string(&ch.finish)
			case -1:
				return d.skip()
			}
			return errBail
		})
	})
}

func (d *leanDecoder) delta(ch *choice) error {
	if d.null() {
		return nil
	}
	seen := 0
	return d.object(func(key []byte) error {
		switch matchKey(key, deltaKeys, &seen) {
		case 0:
			return d.string(&ch.content)
		case 1:
			return d.string(&ch.reasoning)
		case 2:
			return d.toolCalls(ch)
		case -1:
			return d.skip()
		}
		return errBail
	})
}

func (d *leanDecoder) toolCalls(ch *choice) error {
	if d.null() {
		ch.toolCalls = ch.toolCalls[:0]
		return nil
	}
	return d.array(func() error {
		ch.toolCalls = append(ch.toolCalls, toolCall{})
		t := &ch.toolCalls[len(ch.toolCalls)-1]
		if d.null() {
			return nil
		}
		seen := 0
		return d.object(func(key []byte) error {
			switch matchKey(key, toolKeys, &seen) {
			case 0:
				if d.null() { // Index is a pointer: null makes it nil
					t.hasIndex, t.index = false, 0
					return nil
				}
				t.hasIndex = true
				return d.int(&t.index)
			case 1:
				return d.string(&t.id)
			case 2:
				return d.string(&t.typ)
			case 3:
				if d.null() {
					return nil
				}
				fseen := 0
				return d.object(func(key []byte) error {
					switch matchKey(key, funcKeys, &fseen) {
					case 0:
						return d.string(&t.name)
					case 1:
						return d.string(&t.arg)
					case -1:
						return d.skip()
					}
					return errBail
				})
			case -1:
				return d.skip()
			}
			return errBail
		})
	})
}

func (d *leanDecoder) usage(c *chunk) error {
	if d.null() { // a pointer: null makes it nil
		c.hasUsage, c.usage = false, chunkUsage{}
		return nil
	}
	c.hasUsage = true
	u := &c.usage
	seen := 0
	return d.object(func(key []byte) error {
		switch matchKey(key, usageKeys, &seen) {
		case 0:
			return d.int(&u.prompt)
		case 1:
			return d.int(&u.completion)
		case 2:
			if d.null() {
				u.hasDetails, u.reasoning = false, 0
				return nil
			}
			u.hasDetails = true
			dseen := 0
			return d.object(func(key []byte) error {
				switch matchKey(key, detailKeys, &dseen) {
				case 0:
					return d.int(&u.reasoning)
				case -1:
					return d.skip()
				}
				return errBail
			})
		case -1:
			return d.skip()
		}
		return errBail
	})
}

// int decodes a plain integer (or null, which leaves *v as it is). Anything
// else (a fraction or exponent, which encoding/json refuses for an int, or
// more than 18 digits) goes to encoding/json.
func (d *leanDecoder) int(v *int) error {
	if d.null() {
		return nil
	}
	start := d.i
	if err := d.number(); err != nil {
		return err
	}
	num := d.b[start:d.i]
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) > 18 {
		return errBail
	}
	n := 0
	for _, c := range num {
		if c < '0' || c > '9' {
			return errBail
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	*v = n
	return nil
}

// string decodes a string (or null, which leaves *v as it is).
func (d *leanDecoder) string(v *string) error {
	if d.null() {
		return nil
	}
	start, err := d.str()
	if err != nil {
		return err
	}
	s, ok := unquoteBytes(d.b[start:d.i])
	if !ok {
		return errBail
	}
	*v = string(s)
	return nil
}

// str scans a string, validating it as encoding/json's scanner does, and
// returns where it starts (its opening quote); d.i is past its closing quote.
func (d *leanDecoder) str() (int, error) {
	start := d.i
	if d.peek() != '"' {
		return 0, errBail
	}
	d.i++
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return start, nil
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return 0, errBail
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+4 >= len(d.b) {
					return 0, errBail
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !isHex(h) {
						return 0, errBail
					}
				}
				d.i += 5
			default:
				return 0, errBail
			}
		case c < 0x20:
			return 0, errBail
		default:
			d.i++
		}
	}
	return 0, errBail
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *leanDecoder) number() error {
	if d.peek() == '-' {
		d.i++
	}
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		d.digits()
	default:
		return errBail
	}
	if d.peek() == '.' {
		d.i++
		if !d.digits() {
			return errBail
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if !d.digits() {
			return errBail
		}
	}
	return nil
}

func (d *leanDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// skip validates and steps over any value.
func (d *leanDecoder) skip() error {
	switch c := d.peek(); {
	case c == '{':
		return d.object(func([]byte) error { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, err := d.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case d.null():
		return nil
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return nil
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return nil
	}
	return errBail
}

// unquoteBytes is encoding/json's (Go 1.26, BSD licence): the same bytes
// for the same string, invalid UTF-8 and lone surrogates included. The
// string was validated by str, so only the decoding is left.
func unquoteBytes(s []byte) (t []byte, ok bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return
	}
	s = s[1 : len(s)-1]
	r := 0
	for r < len(s) {
		c := s[r]
		if c == '\\' || c == '"' || c < ' ' {
			break
		}
		if c < utf8.RuneSelf {
			r++
			continue
		}
		rr, size := utf8.DecodeRune(s[r:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		r += size
	}
	if r == len(s) {
		return s, true
	}
	b := make([]byte, len(s)+2*utf8.UTFMax)
	w := copy(b, s[0:r])
	for r < len(s) {
		if w >= len(b)-2*utf8.UTFMax {
			nb := make([]byte, (len(b)+utf8.UTFMax)*2)
			copy(nb, b[0:w])
			b = nb
		}
		switch c := s[r]; {
		case c == '\\':
			r++
			if r >= len(s) {
				return
			}
			switch s[r] {
			default:
				return
			case '"', '\\', '/', '\'':
				b[w] = s[r]
				r++
				w++
			case 'b':
				b[w] = '\b'
				r++
				w++
			case 'f':
				b[w] = '\f'
				r++
				w++
			case 'n':
				b[w] = '\n'
				r++
				w++
			case 'r':
				b[w] = '\r'
				r++
				w++
			case 't':
				b[w] = '\t'
				r++
				w++
			case 'u':
				r--
				rr := getu4(s[r:])
				if rr < 0 {
					return
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := getu4(s[r:])
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						w += utf8.EncodeRune(b[w:], dec)
						break
					}
					rr = unicode.ReplacementChar
				}
				w += utf8.EncodeRune(b[w:], rr)
			}
		case c == '"', c < ' ':
			return
		case c < utf8.RuneSelf:
			b[w] = c
			r++
			w++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			w += utf8.EncodeRune(b[w:], rr)
		}
	}
	return b[0:w], true
}

// getu4 decodes \uXXXX from the beginning of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
