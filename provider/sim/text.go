package sim

import (
	"encoding/binary"
	"hash/fnv"
	"unicode"
	"unicode/utf8"
)

// words is the simulator's vocabulary. It mixes ASCII with multi-byte UTF-8
// (accents, the em dash, emoji, CJK) so that a test comparing outputs byte by
// byte notices a token split in the middle of a rune or a lost chunk.
var words = []string{
	"the", "stream", "node", "graph", "token", "resume", "socket", "retry",
	"journal", "cursor", "event", "budget", "provider", "signal", "window", "packet",
	"café", "naïve", "déjà", "vu", "über", "façade", "señor", "crème",
	"—", "🚀", "✓", "日本", "ünïcödé", "€5", "π", "🙂",
	"is", "and", "of", "to", "a", "keeps", "survives", "drops",
	"after", "before", "while", "every", "quiet", "long", "small", "steady",
}

// enders close a sentence.
var enders = []string{".", ".", ".", "!", "?", "…"}

// rng is splitmix64: tiny, fast and defined here, so the text cannot change
// when the Go standard library changes its generators.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

func newRNG(model, input string, seed int64) *rng {
	h := fnv.New64a()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(input))
	h.Write([]byte{0})
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	return &rng{s: h.Sum64()}
}

// Text returns the simulator's output for (model, input, seed) as tokens;
// strings.Join(Text(...), "") is the output text. It is a pure function and
// prefix-stable: Text(m, i, s, k) is a prefix of Text(m, i, s, n) for k <= n,
// so a cut output is a prefix of the full one. Every token is non-empty.
// input is the request's prompt as [ChatInput] and [ResponsesInput] derive it.
func Text(model, input string, seed int64, tokens int) []string {
	if tokens <= 0 {
		return nil
	}
	r := newRNG(model, input, seed)
	out := make([]string, 0, tokens)
	left := 0         // words left in the current sentence
	lineStart := true // no leading space at the start of a line
	for len(out) < tokens {
		w := words[r.intn(len(words))]
		if left == 0 {
			left = 3 + r.intn(10)
			w = capitalize(w)
		}
		left--
		if left == 0 {
			w += enders[r.intn(len(enders))]
		}
		if !lineStart {
			w = " " + w
		}
		lineStart = false
		out = append(out, w)
		if left == 0 && len(out) < tokens && r.intn(4) == 0 {
			nl := "\n"
			if r.intn(3) == 0 {
				nl = "\n\n"
			}
			out = append(out, nl)
			lineStart = true
		}
	}
	return out
}

func capitalize(w string) string {
	r, n := utf8.DecodeRuneInString(w)
	return string(unicode.ToUpper(r)) + w[n:]
}

// reasoningTokens is how long the reasoning summary is for an effort.
func reasoningTokens(effort string) int {
	switch effort {
	case "minimal", "none":
		return 4
	case "low":
		return 8
	case "high", "xhigh":
		return 32
	}
	return 16
}

// ReasoningText is the reasoning summary emitted when a Responses request
// asks for reasoning effort: Text of the input prefixed by "reasoning:".
func ReasoningText(model, input string, seed int64, effort string) []string {
	return Text(model, "reasoning:"+input, seed, reasoningTokens(effort))
}
