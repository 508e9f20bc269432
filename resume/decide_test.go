package resume

import (
	"fmt"
	"testing"

	"github.com/noderun/noderun/diagnostics"
)

// tri is a table cell: any value, or exactly true/false.
type tri int

const (
	any_ tri = iota
	yes
	no
)

func (t tri) match(b bool) bool { return t == any_ || (t == yes) == b }

// row is one line of the decision table. Rows are in priority order: the
// first that matches an input decides it.
type row struct {
	classes    []diagnostics.Class // nil = any
	deadline   tri
	canCheck   tri
	checked    tri
	canResume  tri
	canCont    tri // CanContinue
	rejected   tri // ContinueRejected
	resumeLeft tri
	unsafe     tri
	dispatched tri
	retryLeft  tri
	paced      tri
	breaker    tri // BreakerOpen
	failover   tri // CanFailover
	notFound   tri // Status 404
	action     Action
	code       diagnostics.Code
}

var gone = []diagnostics.Class{diagnostics.ClassDisconnect, diagnostics.ClassConnect, diagnostics.ClassRateLimited, diagnostics.ClassServer}

// transient are the classes whose failure says the provider is unavailable.
var transient = append([]diagnostics.Class{diagnostics.ClassStuck, diagnostics.ClassNotFound, diagnostics.ClassProviderCanceled}, gone...)

// table is the specification of Decide. Every input is matched by some row,
// and every row decides at least one input that no other row would decide
// the same way (TestDecisionTableRowsAreNecessary), so removing a row fails.
var table = []row{
	{breaker: yes, failover: yes, unsafe: no, action: ActFailover, code: diagnostics.FailedOver},
	{classes: []diagnostics.Class{diagnostics.ClassCanceled}, action: ActFail, code: diagnostics.NodeCanceled},
	{classes: []diagnostics.Class{diagnostics.ClassDeterministic}, rejected: no, notFound: yes, failover: yes, unsafe: no, action: ActFailover, code: diagnostics.FailedOver},
	{classes: []diagnostics.Class{diagnostics.ClassDeterministic}, rejected: no, action: ActFail, code: diagnostics.DeterministicError},
	{classes: []diagnostics.Class{diagnostics.ClassJournal}, action: ActFail, code: diagnostics.JournalUnavailable},
	{classes: []diagnostics.Class{diagnostics.ClassProtocol}, action: ActFail, code: diagnostics.ProtocolViolation},
	{classes: []diagnostics.Class{diagnostics.ClassLimit}, action: ActFail, code: diagnostics.LimitExceeded},
	{classes: []diagnostics.Class{diagnostics.ClassNone}, action: ActFail, code: diagnostics.NodeFailed},
	{classes: transient, deadline: yes, failover: yes, unsafe: no, action: ActFailover, code: diagnostics.FailedOver},
	{deadline: yes, action: ActFail, code: diagnostics.DeadlineExceeded},
	{classes: []diagnostics.Class{diagnostics.ClassRateLimited}, paced: yes, action: ActPark, code: diagnostics.QuotaParked},
	{classes: gone, canCheck: yes, checked: no, action: ActCheck, code: diagnostics.StatusChecked},
	{classes: gone, canResume: yes, resumeLeft: yes, action: ActResume, code: diagnostics.ReconnectScheduled},
	{classes: gone, canCont: yes, resumeLeft: yes, unsafe: no, action: ActContinue, code: diagnostics.ContinueScheduled},
	{unsafe: yes, dispatched: yes, action: ActFail, code: diagnostics.UnsafeReplayRefused},
	{classes: []diagnostics.Class{diagnostics.ClassDeterministic}, retryLeft: yes, action: ActRetry, code: diagnostics.ContinueRejected},
	{classes: []diagnostics.Class{diagnostics.ClassStuck, diagnostics.ClassNotFound, diagnostics.ClassProviderCanceled}, retryLeft: yes, action: ActRetry, code: diagnostics.FellBackToRetry},
	{canResume: yes, retryLeft: yes, action: ActRetry, code: diagnostics.FellBackToRetry},
	{canCont: yes, retryLeft: yes, action: ActRetry, code: diagnostics.FellBackToRetry},
	{retryLeft: yes, action: ActRetry, code: diagnostics.RetryStarted},
	{classes: transient, failover: yes, unsafe: no, action: ActFailover, code: diagnostics.FailedOver},
	{action: ActFail, code: diagnostics.BudgetExhausted},
}

func (r row) matches(in Input) bool {
	if r.classes != nil {
		found := false
		for _, c := range r.classes {
			found = found || c == in.Class
		}
		if !found {
			return false
		}
	}
	return r.deadline.match(in.DeadlineExceeded) && r.canCheck.match(in.CanCheck) && r.checked.match(in.Checked) &&
		r.canResume.match(in.CanResume) && r.resumeLeft.match(in.ResumesLeft > 0) &&
		r.canCont.match(in.CanContinue) && r.rejected.match(in.ContinueRejected) &&
		r.unsafe.match(in.SideEffects == SideUnsafe) && r.dispatched.match(in.Dispatched) &&
		r.retryLeft.match(in.RetriesLeft > 0) && r.paced.match(in.Paced) && r.breaker.match(in.BreakerOpen) &&
		r.failover.match(in.CanFailover) && r.notFound.match(in.Status == 404)
}

// lookup returns the index of the first row of t that matches in, or -1.
func lookup(t []row, in Input) int {
	for i, r := range t {
		if r.matches(in) {
			return i
		}
	}
	return -1
}

// allInputs enumerates every combination of the decision's inputs.
func allInputs() []Input {
	classes := []diagnostics.Class{diagnostics.ClassNone, diagnostics.ClassDisconnect, diagnostics.ClassConnect,
		diagnostics.ClassRateLimited, diagnostics.ClassServer, diagnostics.ClassDeterministic,
		diagnostics.ClassCanceled, diagnostics.ClassStuck, diagnostics.ClassNotFound, diagnostics.ClassProviderCanceled,
		diagnostics.ClassJournal, diagnostics.ClassProtocol, diagnostics.ClassLimit}
	sides := []SideEffects{SideNone, SideIdempotent, SideUnsafe}
	bools := []bool{false, true}
	var out []Input
	for _, c := range classes {
		for _, canResume := range bools {
			for _, canCheck := range bools {
				for _, checked := range bools {
					for _, disp := range bools {
						for _, s := range sides {
							for _, resumes := range []int{0, 2} {
								for _, retries := range []int{0, 1} {
									for _, dl := range bools {
										for _, cont := range bools {
											for _, rej := range bools {
												base := Input{Class: c, CanResume: canResume, CanCheck: canCheck,
													CanContinue: cont, ContinueRejected: rej,
													Checked: checked, Dispatched: disp, SideEffects: s,
													ResumesLeft: resumes, RetriesLeft: retries, DeadlineExceeded: dl}
												for _, ext := range extensions(c) {
													in := base
													in.Paced, in.BreakerOpen, in.CanFailover, in.Status = ext.paced, ext.breaker, ext.failover, ext.status
													out = append(out, in)
												}
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// extension is the quota and failover inputs of one input.
type extension struct {
	paced, breaker, failover bool
	status                   int
}

// extensions are the quota and failover inputs that matter for class c
// (every combination would make the table test slow under -race): an open
// breaker refuses as a connect failure does, a 404 is deterministic.
func extensions(c diagnostics.Class) []extension {
	var out []extension
	for _, failover := range []bool{false, true} {
		out = append(out, extension{failover: failover}, extension{paced: true, failover: failover})
		switch c {
		case diagnostics.ClassConnect:
			out = append(out, extension{breaker: true, failover: failover})
		case diagnostics.ClassDeterministic:
			out = append(out, extension{status: 404, failover: failover})
		}
	}
	return out
}

func TestDecideMatchesTable(t *testing.T) {
	inputs := allInputs()
	if len(inputs) != 13*2*2*2*2*3*2*2*2*2*2*4+2*2*2*2*2*3*2*2*2*2*2*2 {
		t.Fatalf("enumerated %d inputs", len(inputs))
	}
	for _, in := range inputs {
		i := lookup(table, in)
		if i < 0 {
			t.Fatalf("no table row for %+v", in)
		}
		got := Decide(in)
		if got.Action != table[i].action || got.Code != table[i].code {
			t.Errorf("%+v: Decide = %s %s, table row %d says %s %s", in, got.Action, got.Code.ID, i, table[i].action, table[i].code.ID)
		}
		if got.Reason == "" {
			t.Errorf("%+v: empty reason", in)
		}
	}
}

func TestDecisionTableRowsAreNecessary(t *testing.T) {
	inputs := allInputs()
	for i := range table {
		without := append(append([]row{}, table[:i]...), table[i+1:]...)
		necessary := false
		for _, in := range inputs {
			j := lookup(without, in)
			if j < 0 || without[j].action != table[lookup(table, in)].action || without[j].code != table[lookup(table, in)].code {
				necessary = true
				break
			}
		}
		if !necessary {
			t.Errorf("row %d (%s %s) decides nothing the others would not", i, table[i].action, table[i].code.ID)
		}
	}
}

// Spot checks that read as the rules the brief states.
func TestDecideRules(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want Action
	}{
		{"chat disconnect retries", Input{Class: diagnostics.ClassDisconnect, Dispatched: true, SideEffects: SideNone, RetriesLeft: 3}, ActRetry},
		{"responses disconnect checks first", Input{Class: diagnostics.ClassDisconnect, CanResume: true, CanCheck: true, ResumesLeft: 8, RetriesLeft: 3, Dispatched: true}, ActCheck},
		{"responses resumes after check", Input{Class: diagnostics.ClassDisconnect, CanResume: true, CanCheck: true, Checked: true, ResumesLeft: 8, RetriesLeft: 3, Dispatched: true}, ActResume},
		{"harness resumes thread though unsafe", Input{Class: diagnostics.ClassDisconnect, CanResume: true, ResumesLeft: 3, SideEffects: SideUnsafe, Dispatched: true}, ActResume},
		{"harness not replayed when resumes spent", Input{Class: diagnostics.ClassDisconnect, CanResume: true, SideEffects: SideUnsafe, Dispatched: true, RetriesLeft: 3}, ActFail},
		{"unsafe retried when request never left", Input{Class: diagnostics.ClassConnect, SideEffects: SideUnsafe, RetriesLeft: 1}, ActRetry},
		{"401 fails at once", Input{Class: diagnostics.ClassDeterministic, RetriesLeft: 3, CanResume: true, ResumesLeft: 3}, ActFail},
		{"stuck is retried, not resumed", Input{Class: diagnostics.ClassStuck, CanResume: true, CanCheck: true, ResumesLeft: 3, RetriesLeft: 1, Dispatched: true}, ActRetry},
		{"deadline beats budget", Input{Class: diagnostics.ClassRateLimited, RetriesLeft: 3, DeadlineExceeded: true}, ActFail},
		{"chat disconnect continues when the server can", Input{Class: diagnostics.ClassDisconnect, CanContinue: true, ResumesLeft: 8, RetriesLeft: 3, Dispatched: true}, ActContinue},
		{"continue spends no retry budget", Input{Class: diagnostics.ClassDisconnect, CanContinue: true, ResumesLeft: 8, Dispatched: true}, ActContinue},
		{"idempotent node is continued", Input{Class: diagnostics.ClassDisconnect, CanContinue: true, ResumesLeft: 8, SideEffects: SideIdempotent, Dispatched: true}, ActContinue},
		{"unsafe node is not continued", Input{Class: diagnostics.ClassDisconnect, CanContinue: true, ResumesLeft: 8, RetriesLeft: 3, SideEffects: SideUnsafe, Dispatched: true}, ActFail},
		{"continues spent: retry from scratch", Input{Class: diagnostics.ClassDisconnect, CanContinue: true, RetriesLeft: 3, Dispatched: true}, ActRetry},
		{"rejected form falls back to retry", Input{Class: diagnostics.ClassDeterministic, ContinueRejected: true, RetriesLeft: 3, Dispatched: true}, ActRetry},
		{"rejected form, no budget: fail", Input{Class: diagnostics.ClassDeterministic, ContinueRejected: true, Dispatched: true}, ActFail},
		{"a 400 that is not about the form fails", Input{Class: diagnostics.ClassDeterministic, CanContinue: true, ResumesLeft: 8, RetriesLeft: 3, Dispatched: true}, ActFail},
		{"a stuck response is never continued", Input{Class: diagnostics.ClassStuck, CanContinue: true, ResumesLeft: 8, RetriesLeft: 1, Dispatched: true}, ActRetry},
		{"a paced 429 parks, spending nothing", Input{Class: diagnostics.ClassRateLimited, Paced: true, Dispatched: true}, ActPark},
		{"a paced 429 parks an unsafe node too", Input{Class: diagnostics.ClassRateLimited, Paced: true, SideEffects: SideUnsafe, Dispatched: true}, ActPark},
		{"an unpaced 429 retries", Input{Class: diagnostics.ClassRateLimited, RetriesLeft: 1, Dispatched: true}, ActRetry},
		{"parking ends at the deadline", Input{Class: diagnostics.ClassRateLimited, Paced: true, DeadlineExceeded: true}, ActFail},
		{"an open breaker fails over at once", Input{Class: diagnostics.ClassConnect, BreakerOpen: true, CanFailover: true, RetriesLeft: 3}, ActFailover},
		{"an outage past the deadline fails over", Input{Class: diagnostics.ClassConnect, DeadlineExceeded: true, CanFailover: true}, ActFailover},
		{"overloaded past the budget fails over", Input{Class: diagnostics.ClassServer, Status: 529, CanFailover: true, Dispatched: true}, ActFailover},
		{"a withdrawn model fails over", Input{Class: diagnostics.ClassDeterministic, Status: 404, CanFailover: true, RetriesLeft: 3}, ActFailover},
		{"a 401 does not fail over", Input{Class: diagnostics.ClassDeterministic, Status: 401, CanFailover: true, RetriesLeft: 3}, ActFail},
		{"an unsafe node never fails over", Input{Class: diagnostics.ClassConnect, BreakerOpen: true, CanFailover: true, SideEffects: SideUnsafe, RetriesLeft: 1}, ActRetry},
		{"an interruption does not fail over", Input{Class: diagnostics.ClassCanceled, CanFailover: true}, ActFail},
	}
	for _, c := range cases {
		if got := Decide(c.in); got.Action != c.want {
			t.Errorf("%s: got %s (%s), want %s", c.name, got.Action, got.Reason, c.want)
		}
	}
}

func ExampleDecide() {
	d := Decide(Input{Class: diagnostics.ClassDisconnect, SideEffects: SideUnsafe, Dispatched: true, RetriesLeft: 2})
	fmt.Println(d.Action, d.Code.ID)
	// Output: fail NR905
}
