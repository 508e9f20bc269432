package ledger

import (
	"fmt"
	"math"
	"strings"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/resume"
)

// verdictOf says in one line what happened to a node and what it cost. It
// names every fault its records hold (interruptions and rejections
// included), how the node got its output back, and why it did not.
func verdictOf(nd *Node, na NodeAccount) Verdict {
	regen := Thousands(na.Tokens.Regenerated) + " tokens regenerated"
	if na.Tokens.Hidden {
		regen = "at least " + regen + " (the agent CLI does not report its failed turns)"
	}
	figures := fmt.Sprintf("%s, %s preserved, %s lost", regen, Thousands(na.Tokens.Preserved), Seconds(na.TimeLostMS))
	waited := ""
	if shows(na.QuotaWaitMS) {
		waited = fmt.Sprintf("; %s waiting for quota", Seconds(na.QuotaWaitMS))
		figures += waited
	}
	switch nd.State {
	case journal.NodeCompleted:
		if from := na.CachedFrom; !from.IsZero() {
			return Verdict{VerdictCached, fmt.Sprintf("from the cache: node %s of run %s, reused; %s output tokens not paid again",
				from.Node, ShortRunID(from.Run), Thousands(na.Saved.Output))}
		}
		faults := faultPhrase(na.Faults)
		if faults == "" && na.Attempts <= 1 {
			if steps := stepPhrase(na.RecoverySteps); steps != "" {
				// Polled or re-attached through a silence: no fault, but not clean either.
				return Verdict{VerdictNoFault, fmt.Sprintf("no fault, %s: %s tokens, %s", steps, Thousands(na.Tokens.Needed), figures)}
			}
			return Verdict{VerdictClean, fmt.Sprintf("clean: %s tokens, no recovery needed%s", Thousands(na.Tokens.Needed), waited)}
		}
		if faults == "" { // a retry whose cause left no record (a journal from an older noderun)
			faults = "an earlier attempt's failure"
		}
		how := means(nd)
		if how == "" {
			how = "retry"
		}
		if p := nd.Fallback(); p != "" {
			how += " (" + fallbackPhrase(nd, na, p) + ")"
		}
		return Verdict{VerdictRecovered, fmt.Sprintf("recovered from %s by %s: %s", faults, how, figures)}
	case journal.NodePending, "":
		return Verdict{VerdictNotRun, "did not run"}
	case journal.NodeRunning:
		return Verdict{VerdictRunning, fmt.Sprintf("running: %s tokens so far", Thousands(na.Tokens.Generated))}
	case journal.NodeSkipped:
		return Verdict{VerdictSkipped, "skipped: " + orDefault(nd.Reason, "a node it needs did not complete")}
	case journal.NodeAttention:
		return Verdict{VerdictAttention, "needs attention: " + orDefault(nd.Reason, "its request may have had side effects")}
	case journal.NodeCanceled:
		return Verdict{VerdictInterrupted, interruptedVerdict(nd, na, figures)}
	}
	why, own := failure(nd)
	faults := na.Faults
	if own.IsFault() { // named by why already
		faults = without(faults, nameOf(own))
	}
	kind, v := VerdictFailed, "failed: "+why
	if own == diagnostics.UnsafeReplayRefused {
		kind, v = VerdictStopped, "stopped: "+why
	}
	if f := faultPhrase(faults); f != "" {
		v += " after " + f
	}
	return Verdict{kind, fmt.Sprintf("%s: %s tokens generated, %s", v, Thousands(na.Tokens.Generated), figures)}
}

// interruptedVerdict: the node stopped with its run (a signal, a full
// disk), resumable; work left running at the provider is named.
func interruptedVerdict(nd *Node, na NodeAccount, figures string) string {
	v := "interrupted"
	if out, ok := nd.Outcome(); ok {
		n, _ := diagnostics.KeyOutputBytes.Of(out.Record)
		v = fmt.Sprintf("interrupted after %s bytes", Thousands(n))
		if out.Code == diagnostics.JournalUnavailable {
			v += " (the journal could not record)"
		}
	}
	if ref := nd.Detached(); ref != "" {
		v += "; response " + ref + " keeps running at the provider (detached)"
	}
	if f := faultPhrase(na.Faults); f != "" {
		v += ", after " + f
	}
	return v + ": " + figures
}

// Detached is the response an interruption left running at the provider
// for nd ("" if none): one that nothing since picked up or cancelled.
func (nd *Node) Detached() string {
	if nd.State == journal.NodeCompleted || nd.State == journal.NodeFailed {
		return ""
	}
	ref := ""
	for _, r := range nd.Records {
		switch {
		case r.Code == diagnostics.WorkDetached:
			ref, _ = diagnostics.KeyRef.Of(r.Record)
		case r.Code == diagnostics.NodeResumed, r.Code.Role == diagnostics.RoleStep && r.Code.Means == diagnostics.ByCancel:
			ref = ""
		}
	}
	return ref
}

// Outcome is the record that says how a node that did not complete ended:
// the most specific outcome record (a rejection, a spent budget, an
// interruption) over the generic node_failed that follows it; false when
// there is none (it completed, or its journal holds no reason).
func (nd *Node) Outcome() (Record, bool) {
	var out *Record
	for i := range nd.Records {
		r := &nd.Records[i]
		if r.Code.Role == diagnostics.RoleOutcome && r.Code != diagnostics.Recovered && r.Code != diagnostics.NodeSkipped &&
			(out == nil || out.Code == diagnostics.NodeFailed || r.Code != diagnostics.NodeFailed) {
			out = r
		}
	}
	if out == nil || nd.State == journal.NodeCompleted {
		return Record{}, false
	}
	return *out, true
}

// failure says why a failed node failed, from its outcome record.
func failure(nd *Node) (string, diagnostics.Code) {
	out, ok := nd.Outcome()
	if !ok {
		return "error class " + orDefault(string(nd.ErrClass), "unknown"), diagnostics.NodeFailed
	}
	why := out.Code.Ends
	if why == "" { // node_failed: its class says more than its code
		class, _ := diagnostics.KeyClass.Of(out.Record)
		if class == "" {
			return out.Message, out.Code
		}
		why = "error class " + string(class)
	}
	if status, ok := diagnostics.KeyStatus.Of(out.Record); ok && status != 0 && out.Code.IsFault() {
		why += fmt.Sprintf(" (%d)", status) // the answer that was the fault: a rejection's 401
	}
	return why, out.Code
}

// means names how a node got its output back: the steps it took, and the
// action a picked-up node started with.
func means(nd *Node) string {
	have := map[diagnostics.Means]bool{}
	for _, r := range nd.Records {
		switch r.Code.Role {
		case diagnostics.RoleStep:
			m := r.Code.Means
			if m == diagnostics.ByReconnect {
				m = diagnostics.ByReattach
			}
			have[m] = true
		case diagnostics.RoleFault:
			switch a, _ := diagnostics.KeyAction.Of(r.Record); resume.Action(a) {
			case resume.ActResume:
				have[diagnostics.ByReattach] = true
			case resume.ActContinue:
				have[diagnostics.ByContinue] = true
			case resume.ActRetry:
				have[diagnostics.ByRetry] = true
			}
		}
	}
	var out []string
	for _, m := range []diagnostics.Means{diagnostics.ByReattach, diagnostics.ByContinue, diagnostics.ByStatus, diagnostics.ByRetry,
		diagnostics.ByWait, diagnostics.ByFailover} {
		if have[m] {
			out = append(out, meansWords[m])
		}
	}
	return strings.Join(out, " and ")
}

// meansWords name the steps in a verdict: "recovered from 1 rate limit by
// waiting for quota".
var meansWords = map[diagnostics.Means]string{diagnostics.ByReattach: "re-attach", diagnostics.ByContinue: "continue",
	diagnostics.ByStatus: "status", diagnostics.ByRetry: "retry", diagnostics.ByWait: "waiting for quota", diagnostics.ByFailover: "failover"}

// Fallback is the provider other than its own that nd's last attempt ran
// on (it failed over, NR603), "" when it stayed on its own.
func (nd *Node) Fallback() string {
	for i := len(nd.Records) - 1; i >= 0; i-- {
		if r := nd.Records[i]; r.Code == diagnostics.FailedOver {
			to, _ := diagnostics.KeyTo.Of(r.Record)
			return to
		}
	}
	return ""
}

// faultPhrase counts faults in words: "2 disconnects and 1 rate limit".
func faultPhrase(faults map[CodeName]int) string {
	var parts []string
	for _, k := range sortedKeys(faults) {
		n := faults[k]
		if n == 0 {
			continue
		}
		noun := string(k)
		if c, ok := k.Code(); ok && c.Noun != "" {
			noun = c.Noun
		}
		parts = append(parts, pluralWord(n, noun))
	}
	return strings.Join(parts, " and ")
}

// fallbackPhrase says where a node that failed over did its work: the
// provider that completed it, what moved it, and what each provider
// generated: "completed on fallback backup, moved by connect_failed;
// primary generated 59 tokens, backup 91".
func fallbackPhrase(nd *Node, na NodeAccount, to string) string {
	s := "completed on fallback " + to
	for _, r := range nd.Records {
		if r.Code == diagnostics.FailedOver {
			if c, ok := diagnostics.KeyClass.Of(r.Record); ok && c != "" {
				s += ", moved by " + string(c)
				break
			}
		}
	}
	var parts []string
	for _, p := range sortedKeys(na.GeneratedBy) {
		parts = append(parts, fmt.Sprintf("%s generated %s", p, Thousands(na.GeneratedBy[p])))
	}
	if len(parts) > 0 {
		s += "; " + strings.Join(parts, ", ")
	}
	return s
}

// stepPhrase names the recovery steps a node took: "3 recovery steps
// (polling_started, reattached, status_checked ×2)"; "" for none.
func stepPhrase(steps map[CodeName]int) string {
	var names []string
	total := 0
	for _, k := range sortedKeys(steps) {
		n := steps[k]
		if n == 0 {
			continue
		}
		total += n
		name := string(k)
		if n > 1 {
			name = fmt.Sprintf("%s ×%d", k, n)
		}
		names = append(names, name)
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%s)", pluralWord(total, "recovery step"), strings.Join(names, ", "))
}

// without is m without key k.
func without(m map[CodeName]int, k CodeName) map[CodeName]int {
	out := make(map[CodeName]int, len(m))
	for kk, v := range m {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pluralWord is "1 attempt", "2 attempts", "2 thread mismatches".
func pluralWord(n int, word string) string { return textfit.Count(n, word) }

// Thousands writes n with thousands separators: 4,210.
func Thousands(n int) string {
	if n < 0 {
		return "-" + Thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Size writes a byte count as people read it: "512 B", "1.5 KiB", "32.0 MiB".
func Size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Seconds writes milliseconds as seconds to a tenth: "4.2 s".
func Seconds(ms int64) string {
	return fmt.Sprintf("%.1f s", math.Round(float64(ms)/100)/10)
}

// shows reports whether ms shows as more than "0.0 s": a wait that rounds
// to nothing (a pacer's few milliseconds, on a graph without limits) is
// not worth a word.
func shows(ms int64) bool { return ms >= 50 }

// ShortRunID is the prefix of a run id that people read and type (the CLI
// takes a unique prefix wherever it takes a run id).
func ShortRunID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
