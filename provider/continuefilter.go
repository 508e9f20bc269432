package provider

import (
	"fmt"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
)

// NewContinueFilter returns the filter a Continuer puts between a continued
// stream and the executor: prefix is what was sent back as the partial
// answer, tail the delivered bytes that were not (a character cut short, see
// SplitWhole, or what a server will not take at the end of a prefix), which
// the continuation must begin with.
func NewContinueFilter(prefix, tail string, out Emit) *ContinueFilter {
	return &ContinueFilter{prefix: prefix, tail: tail, out: out}
}

// ContinueFilter filters a continued stream's deltas so that only new text
// reaches the executor: a prefix the server repeats is stripped, then the
// bytes of a character that the drop cut short (tail, already delivered)
// are matched against the continuation and skipped. Text is held back only
// while it is still ambiguous; what is held when the stream drops was never
// delivered, and the next continuation asks for it again.
type ContinueFilter struct {
	prefix, tail string
	out          Emit
	stage        int // 0 looking for a repeated prefix, 1 matching tail, 2 passing through
	held         string
}

func (c *ContinueFilter) Emit(ev Event) error {
	switch ev.Kind {
	case KindDelta:
		return c.delta(ev, false)
	case KindDone:
		if err := c.delta(Event{Kind: KindDelta, Seq: -1, Time: ev.Time}, true); err != nil {
			return err
		}
	}
	return c.out(ev)
}

// delta takes the next piece of content; end is true at terminal evidence,
// when nothing more can resolve an ambiguity.
func (c *ContinueFilter) delta(ev Event, end bool) error {
	if c.stage == 2 {
		if ev.Text == "" {
			return nil
		}
		return c.out(ev)
	}
	c.held += ev.Text
	if c.stage == 0 {
		if !end && c.prefix != "" && len(c.held) < len(c.prefix) && strings.HasPrefix(c.prefix, c.held) {
			return nil // could still be the prefix repeated
		}
		repeated := c.prefix != "" && strings.HasPrefix(c.held, c.prefix)
		if repeated {
			c.held = c.held[len(c.prefix):]
		}
		if c.prefix != "" {
			msg := "the server returned only the continuation"
			if repeated {
				msg = fmt.Sprintf("the server repeated the %d-byte prefix before the continuation; the repeat was stripped", len(c.prefix))
			}
			d := diagnostics.New(diagnostics.ContinueAccepted, msg, diagnostics.KeyPrefixRepeated.Attr(repeated), diagnostics.KeyContinuedFrom.Attr(len(c.prefix)+len(c.tail)))
			if err := c.out(Event{Kind: KindDiagnostic, Diag: &d, Seq: -1, Time: time.Now()}); err != nil {
				return err
			}
		}
		c.stage = 1
	}
	if c.tail != "" {
		if !end && len(c.held) < len(c.tail) && strings.HasPrefix(c.tail, c.held) {
			return nil
		}
		if !strings.HasPrefix(c.held, c.tail) {
			return c.realign(ev)
		}
		c.held = c.held[len(c.tail):]
	}
	c.stage = 2
	text := c.held
	c.held = ""
	if text == "" {
		return nil
	}
	ev.Text = text
	return c.out(ev)
}

// realign rewrites the output when the continuation does not begin with the
// delivered bytes of the cut character: those bytes are void, so the output
// is the whole-character prefix followed by the continuation.
func (c *ContinueFilter) realign(ev Event) error {
	d := diagnostics.New(diagnostics.ContinueRealigned,
		fmt.Sprintf("the continuation does not begin with the %s of the character the drop cut short; the output is rewritten from the %d-byte whole-character prefix", textfit.Count(len(c.tail), "byte"), len(c.prefix)))
	for _, e := range []Event{
		{Kind: KindDiagnostic, Diag: &d, Seq: -1, Time: ev.Time},
		{Kind: KindReset, Seq: -1, Time: ev.Time},
		{Kind: KindDelta, Text: c.prefix + c.held, Seq: -1, Time: ev.Time},
	} {
		if e.Kind == KindDelta && e.Text == "" {
			continue
		}
		if err := c.out(e); err != nil {
			return err
		}
	}
	c.stage, c.held = 2, ""
	return nil
}
