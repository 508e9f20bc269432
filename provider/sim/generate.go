package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/noderun/noderun/provider"
)

// errEnded stops a generator whose response was cancelled.
var errEnded = errors.New("sim: response ended")

// respGen produces one response's events in order, numbering them. A
// background response's generator runs in its own goroutine and writes only
// to the record (its log); a non-background stream's generator runs in the
// handler and also writes each event to the client (out), stopping when the
// client goes.
type respGen struct {
	s      *Server
	rec    *record
	ctx    context.Context
	out    *sseWriter // nil unless a non-background stream
	queued bool       // the queued fault: stop after response.queued
}

// emit adds one event. build runs under the record's lock: it updates the
// record's state and returns the event's fields besides type and
// sequence_number. A terminal status set by build ends the record.
func (g *respGen) emit(typ string, build func() map[string]any) error {
	rec := g.rec
	rec.mu.Lock()
	if rec.done {
		rec.mu.Unlock()
		return errEnded
	}
	rest, err := json.Marshal(build())
	if err != nil {
		rec.mu.Unlock()
		return err
	}
	// type and sequence_number first, as OpenAI writes them
	frame := make([]byte, 0, 2*len(typ)+len(rest)+64)
	frame = append(append(append(frame, "event: "...), typ...), "\ndata: {\"type\":"...)
	frame = strconv.AppendQuote(frame, typ)
	frame = append(frame, `,"sequence_number":`...)
	frame = strconv.AppendInt(frame, int64(rec.seq), 10)
	rec.seq++
	if len(rest) > 2 {
		frame = append(append(frame, ','), rest[1:]...)
	} else {
		frame = append(frame, '}')
	}
	frame = append(frame, "\n\n"...)
	if rec.background && rec.stream {
		rec.log = append(rec.log, frame)
		rec.notifyLocked()
	}
	if terminal(rec.status) {
		rec.endLocked(rec.status)
	}
	rec.mu.Unlock()
	if g.out != nil {
		return g.out.send(frame)
	}
	return nil
}

// pause waits d: with keepalives on a direct stream, else plainly.
func (g *respGen) pause(d time.Duration) error {
	if d <= 0 {
		return g.ctx.Err()
	}
	if g.out != nil {
		return g.out.idle(nil, d)
	}
	return sleep(g.ctx, d)
}

// run emits the whole sequence: response.created, (response.queued),
// response.in_progress, the reasoning item when reasoning effort was asked
// for, the message item with one output_text.delta per token, and
// response.completed, or response.incomplete when max_output_tokens cut the
// text.
func (g *respGen) run() error {
	rec := g.rec
	obj := func() map[string]any { return map[string]any{"response": rec.objectLocked()} }
	if err := g.emit("response.created", obj); err != nil {
		return err
	}
	if rec.background || g.queued { // created queued
		if err := g.emit("response.queued", obj); err != nil {
			return err
		}
	}
	if g.queued {
		<-g.ctx.Done()
		return g.ctx.Err()
	}
	if err := g.emit("response.in_progress", func() map[string]any {
		rec.status = statusInProgress
		return obj()
	}); err != nil {
		return err
	}
	p := rec.p
	idx := 0
	silenced := false
	if effort := rec.req.effort(); effort != "" {
		if err := g.pause(p.silence); err != nil {
			return err
		}
		silenced = true
		if err := g.reasoning(ReasoningText(rec.model, rec.prompt, g.s.cfg.Seed, effort)); err != nil {
			return err
		}
		idx = 1
	}
	tokens := Text(rec.model, rec.prompt, g.s.cfg.Seed, p.tokens)
	msg := &item{id: newID("msg_"), status: statusInProgress}
	at := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"], m["content_index"] = msg.id, idx, 0
		return m
	}
	if err := g.emit("response.output_item.added", func() map[string]any {
		rec.message = msg
		return map[string]any{"output_index": idx, "item": messageItem(msg, false)}
	}); err != nil {
		return err
	}
	if err := g.emit("response.content_part.added", func() map[string]any {
		return at(map[string]any{"part": textPart("")})
	}); err != nil {
		return err
	}
	for i, tok := range tokens {
		if err := g.pause(p.wait(i, silenced)); err != nil {
			return err
		}
		rec.count.add()
		if err := g.emit("response.output_text.delta", func() map[string]any {
			msg.text = append(msg.text, tok...)
			return at(map[string]any{"delta": tok, "logprobs": []any{}})
		}); err != nil {
			return err
		}
	}
	full := strings.Join(tokens, "")
	if err := g.emit("response.output_text.done", func() map[string]any {
		return at(map[string]any{"text": full, "logprobs": []any{}})
	}); err != nil {
		return err
	}
	if err := g.emit("response.content_part.done", func() map[string]any {
		return at(map[string]any{"part": textPart(full)})
	}); err != nil {
		return err
	}
	final, event := statusCompleted, "response.completed"
	if p.cut {
		final, event = statusIncomplete, "response.incomplete"
	}
	if err := g.emit("response.output_item.done", func() map[string]any {
		msg.status = final
		return map[string]any{"output_index": idx, "item": messageItem(msg, true)}
	}); err != nil {
		return err
	}
	return g.emit(event, func() map[string]any {
		rec.usage = usageOf(rec.prompt, len(tokens), rec.reasoningTokens())
		if p.cut {
			rec.incomplete = "max_output_tokens"
		} else {
			rec.completed = unixNow()
		}
		rec.status = final
		return obj()
	})
}

// reasoning emits the reasoning item with its summary, paced like output.
func (g *respGen) reasoning(tokens []string) error {
	rs := &item{id: newID("rs_")}
	at := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"], m["summary_index"] = rs.id, 0, 0
		return m
	}
	if err := g.emit("response.output_item.added", func() map[string]any {
		g.rec.reasoning = rs
		return map[string]any{"output_index": 0, "item": map[string]any{"id": rs.id, "type": "reasoning", "summary": []any{}}}
	}); err != nil {
		return err
	}
	if err := g.emit("response.reasoning_summary_part.added", func() map[string]any {
		rs.text = []byte{}
		return at(map[string]any{"part": map[string]any{"type": "summary_text", "text": ""}})
	}); err != nil {
		return err
	}
	for i, tok := range tokens {
		if err := g.pause(g.rec.p.wait(i, true)); err != nil {
			return err
		}
		g.s.stats.reasoning.Add(1)
		if err := g.emit("response.reasoning_summary_text.delta", func() map[string]any {
			rs.text = append(rs.text, tok...)
			return at(map[string]any{"delta": tok})
		}); err != nil {
			return err
		}
	}
	full := strings.Join(tokens, "")
	if err := g.emit("response.reasoning_summary_text.done", func() map[string]any {
		return at(map[string]any{"text": full})
	}); err != nil {
		return err
	}
	if err := g.emit("response.reasoning_summary_part.done", func() map[string]any {
		return at(map[string]any{"part": map[string]any{"type": "summary_text", "text": full}})
	}); err != nil {
		return err
	}
	return g.emit("response.output_item.done", func() map[string]any {
		return map[string]any{"output_index": 0, "item": map[string]any{
			"id": rs.id, "type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": full}},
		}}
	})
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// reasoningTokens is how many reasoning tokens the response has produced.
func (r *record) reasoningTokens() int {
	if r.reasoning == nil {
		return 0
	}
	return reasoningTokens(r.req.effort())
}

func usageOf(prompt string, output, reasoning int) map[string]any {
	in := provider.EstimateTokens(prompt)
	return map[string]any{
		"input_tokens":          in,
		"input_tokens_details":  map[string]any{"cached_tokens": 0},
		"output_tokens":         output + reasoning,
		"output_tokens_details": map[string]any{"reasoning_tokens": reasoning},
		"total_tokens":          in + output + reasoning,
	}
}
