package harness

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/noderun/noderun/diagnostics"
)

// Verdict is the classification of a harness's failure message.
type Verdict struct {
	Class   diagnostics.Class
	Status  int    // HTTP status, when the message gives one
	Explain string // the matching rule's explanation, if any
}

// ClassifyMessage classifies a failure message by the descriptor's rules:
// the first rule whose pattern matches decides; a status rule decides only
// when its captured status is an error status. Nothing matching is
// DefaultClass.
func (d *Descriptor) ClassifyMessage(msg string) Verdict {
	for _, r := range d.Classify {
		m := r.Pattern.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		if r.Class == ClassStatus {
			st, _ := strconv.Atoi(m[r.Pattern.SubexpIndex("status")])
			c := diagnostics.FromStatus(st)
			if c == diagnostics.ClassNone {
				continue
			}
			return Verdict{Class: c, Status: st, Explain: r.Explain}
		}
		v := Verdict{Class: classNames[r.Class], Explain: r.Explain}
		if i := r.Pattern.SubexpIndex("status"); i >= 0 {
			v.Status, _ = strconv.Atoi(m[i])
		}
		return v
	}
	return Verdict{Class: classNames[d.DefaultClass]}
}

// threadNotFound reports whether msg says a resume found no thread.
func (d *Descriptor) threadNotFound(msg string) bool {
	for _, p := range d.ThreadNotFound {
		if p.MatchString(msg) {
			return true
		}
	}
	return false
}

// TurnError is a harness run that ended without terminal success. It is
// returned inside a *diagnostics.Error that carries its class; a transport
// class one also wraps diagnostics.ErrDisconnected.
type TurnError struct {
	Harness  string
	Message  string // what the harness said
	Explain  string // what it means, from the descriptor
	ExitCode int    // -1 when the process was killed by a signal
	Signal   string // the signal, when killed
	cause    error
}

func (e *TurnError) Error() string {
	var b strings.Builder
	b.WriteString(e.Harness)
	b.WriteString(": ")
	if e.Explain != "" {
		b.WriteString(e.Explain)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	switch {
	case e.Signal != "":
		fmt.Fprintf(&b, " (killed by %s)", e.Signal)
	case e.ExitCode > 0:
		fmt.Fprintf(&b, " (exit code %d)", e.ExitCode)
	}
	return b.String()
}

// Unwrap returns diagnostics.ErrDisconnected for a transport failure.
func (e *TurnError) Unwrap() error { return e.cause }

// MismatchError is a resume that did not continue the recorded thread:
// the harness came back with another thread (Got), or found none (Got "").
type MismatchError struct {
	Harness string
	Want    string
	Got     string
	Message string // the harness's own words, when it found none
}

func (e *MismatchError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("%s: resume found no thread %s: %s", e.Harness, e.Want, e.Message)
	}
	return fmt.Sprintf("%s: resume came back with thread %s, not %s (the harness started a new thread instead of continuing the recorded one)",
		e.Harness, e.Got, e.Want)
}

// classified wraps a failure in the *diagnostics.Error of its verdict.
func classified(v Verdict, te *TurnError) error {
	if v.Class == diagnostics.ClassDisconnect {
		te.cause = diagnostics.ErrDisconnected
	}
	return &diagnostics.Error{Class: v.Class, Status: v.Status, Err: te}
}
