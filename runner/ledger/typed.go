package ledger

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/noderun/noderun/diagnostics"
)

// VerdictKind is what happened to a node, as a verdict says it: what a
// program branches on, where the sentence is for people.
type VerdictKind string

// The kinds of verdict. Their values are stable; the JSON of an account
// carries the sentence only (docs/json.md).
const (
	// VerdictNotRun: the node is pending (its run stopped before it).
	VerdictNotRun VerdictKind = "not_run"
	// VerdictRunning: a runner is working on it now.
	VerdictRunning VerdictKind = "running"
	// VerdictCached: completed from the cache of an earlier run (NR407).
	VerdictCached VerdictKind = "cached"
	// VerdictClean: completed at its first attempt, with no fault and no
	// recovery step.
	VerdictClean VerdictKind = "clean"
	// VerdictNoFault: completed with no fault, but through recovery steps
	// (polled or re-attached through a silence).
	VerdictNoFault VerdictKind = "no_fault"
	// VerdictRecovered: completed after faults, by the recovery the
	// sentence names.
	VerdictRecovered VerdictKind = "recovered"
	// VerdictSkipped: not run because a node it needs did not complete.
	VerdictSkipped VerdictKind = "skipped"
	// VerdictAttention: stopped for a person to decide (its request may
	// have had side effects).
	VerdictAttention VerdictKind = "attention"
	// VerdictInterrupted: stopped with its run, resumable.
	VerdictInterrupted VerdictKind = "interrupted"
	// VerdictStopped: refused to replay an unsafe request (NR505); not
	// a fault of the provider's.
	VerdictStopped VerdictKind = "stopped"
	// VerdictFailed: failed; the sentence says why.
	VerdictFailed VerdictKind = "failed"
)

// Verdict says in one line what happened to a node and what it cost: its
// kind, and the sentence `noderun run`, `diagnose` and the report print.
// It marshals to the sentence alone, as it always has.
type Verdict struct {
	Kind VerdictKind
	Text string
}

// String is the sentence.
func (v Verdict) String() string { return v.Text }

// MarshalJSON writes the sentence: the JSON of an account is unchanged by
// the kind (docs/json.md).
func (v Verdict) MarshalJSON() ([]byte, error) { return json.Marshal(v.Text) }

// UnmarshalJSON reads the sentence back; the kind is not in the JSON, so
// it is left empty.
func (v *Verdict) UnmarshalJSON(b []byte) error {
	*v = Verdict{}
	return json.Unmarshal(b, &v.Text)
}

// CodeName is a diagnostic code's name (diagnostics.Code.Name): the key of
// Figures' counts, as in their JSON.
type CodeName string

// Code is the diagnostic code of that name; false for a name this noderun
// does not know (a journal of a newer one).
func (n CodeName) Code() (diagnostics.Code, bool) { return diagnostics.Lookup(string(n)) }

// nameOf is c's name as a key of Figures' counts.
func nameOf(c diagnostics.Code) CodeName { return CodeName(c.Name) }

// CacheSource is where a cache hit's output came from (NR407): the run
// and the node that first produced it. Its JSON is "run/node", as it
// always has been; the zero value, a node that called its provider, is
// left out.
type CacheSource struct {
	Run, Node string
}

// IsZero reports whether the node was not served from the cache.
func (s CacheSource) IsZero() bool { return s == CacheSource{} }

// String is "run/node", or "" for the zero value.
func (s CacheSource) String() string {
	if s.IsZero() {
		return ""
	}
	return s.Run + "/" + s.Node
}

// MarshalJSON writes "run/node".
func (s CacheSource) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads "run/node" ("" is the zero value).
func (s *CacheSource) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	*s = CacheSource{}
	if str == "" {
		return nil
	}
	run, node, ok := strings.Cut(str, "/")
	if !ok {
		return fmt.Errorf("ledger: cached_from %q is not run/node", str)
	}
	*s = CacheSource{Run: run, Node: node}
	return nil
}
