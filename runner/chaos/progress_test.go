package chaos

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/noderun/noderun/profile"
	"github.com/noderun/noderun/provider/sim"
)

// The tally of case runs: finished of all, failed, the run going longest,
// and an estimate that never undercuts what a running case is known to
// wait for (its idle window), however quickly the other cases went.
func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var tr Tracker
	if _, ok := tr.Longest(); ok || !tr.First.IsZero() {
		t.Errorf("a new tracker has a run: %+v", tr)
	}
	if _, ok := tr.ETA(t0); ok {
		t.Error("an estimate before anything ran")
	}
	tr.Started(Start{Case: "idle-silence", Node: "research", Total: 4, At: t0, Expected: 90 * time.Second})
	if eta, ok := tr.ETA(t0.Add(10 * time.Second)); !ok || eta != 80*time.Second {
		t.Errorf("before any run ended: eta %s, %v; want the idle window's 80s left", eta, ok)
	}
	tr.Started(Start{Case: "close-early", Node: "plan", Total: 4, At: t0.Add(time.Second)})
	tr.Done(Result{Case: "close-early", Node: "plan", Pass: true, Time: time.Second})
	tr.Started(Start{Case: "close-early", Node: "report", Total: 4, At: t0.Add(2 * time.Second)})
	tr.Done(Result{Case: "close-early", Node: "report", Pass: false, Time: time.Second})
	if tr.Total != 4 || tr.Finished != 2 || tr.Failed != 1 || !tr.First.Equal(t0) {
		t.Errorf("tally: %+v", tr)
	}
	if s, ok := tr.Longest(); !ok || s.Case != "idle-silence" || s.Node != "research" {
		t.Errorf("longest: %+v, %v", s, ok)
	}
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{41 * time.Second, 49 * time.Second},                 // the idle window's floor
		{89*time.Second + 500*time.Millisecond, time.Second}, // the mean: 1s a run, 2 left, 2 slots
	} {
		if eta, ok := tr.ETA(t0.Add(c.at)); !ok || eta != c.want {
			t.Errorf("at %s: eta %s, %v; want %s", c.at, eta, ok, c.want)
		}
	}
}

// The ci profile is suggested when silence cases alone kept the run going
// for most of its wall time and ci would at least halve it; not under ci,
// not when the other cases took as long, not when ci would save little.
func TestIdleHint(t *testing.T) {
	builtins := profile.Set(profile.Builtins())
	def, _ := builtins.Get("default")
	ci, _ := builtins.Get("ci")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	result := func(kind sim.FaultKind, start, took time.Duration) Result {
		name := "close-middle"
		if kind == sim.FaultSilence {
			name = "idle-silence"
		}
		return Result{Case: name, Fault: sim.Fault{Kind: kind}, Started: t0.Add(start), Time: took}
	}
	report := func(wall time.Duration, rs ...Result) *Report {
		return &Report{Started: t0, Seconds: wall.Seconds(), Results: rs}
	}
	idle := report(91*time.Second, result(sim.FaultSilence, 0, 91*time.Second), result(sim.FaultClose, time.Second, 15*time.Second))
	got, ok := idle.IdleHint(def, nil)
	want := IdleHint{Cases: []string{"idle-silence"}, Idle: def.IdleTimeout.D(), Shorter: ci.IdleTimeout.D(),
		Tail: 75 * time.Second, Wall: 91 * time.Second, Estimate: 16 * time.Second}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("hint: %+v, %v\nwant %+v", got, ok, want)
	}
	for _, c := range []struct {
		name string
		rep  *Report
		prof profile.Profile
		set  profile.Set
	}{
		{"under ci", idle, ci, builtins},
		{"no ci profile", idle, def, profile.Set{"default": def}},
		{"others as long", report(91*time.Second, result(sim.FaultSilence, 0, 91*time.Second), result(sim.FaultClose, 0, 80*time.Second)), def, builtins},
		{"no silence cases", report(10*time.Second, result(sim.FaultClose, 0, 10*time.Second)), def, builtins},
		{"ci would not halve", report(4*time.Second, result(sim.FaultSilence, 0, 4*time.Second)), def, builtins},
	} {
		if h, ok := c.rep.IdleHint(c.prof, c.set); ok {
			t.Errorf("%s: hint %+v", c.name, h)
		}
	}
}

// chaos --list's table: a failure's outcomes, a fault's place, a case
// limited to some provider kinds.
func TestWriteCases(t *testing.T) {
	cases := []Case{
		{Name: "close-early", Description: "the stream closes early", Fault: sim.Fault{Kind: sim.FaultClose}, At: PointEarly, Expect: ExpectRecover},
		{Name: "outage-long", Description: "a long outage", Fault: sim.Fault{Kind: sim.FaultOutage}, Expect: ExpectFail,
			Outcomes: []Outcome{OutcomeBudgetSpent, OutcomeDeadline}, Kinds: []string{"anthropic", "gemini"}},
	}
	var b bytes.Buffer
	if err := WriteCases(&b, cases, "ci"); err != nil {
		t.Fatal(err)
	}
	want := "fault cases (profile ci), each aimed at every node in turn:\n" +
		"CASE         EXPECT                              FAULT        DESCRIPTION\n" +
		"close-early  recover                             close@early  the stream closes early\n" +
		"outage-long  fail: budget_spent|deadline_passed  outage       a long outage [anthropic, gemini nodes only]\n"
	if b.String() != want {
		t.Errorf("cases:\n%s\nwant:\n%s", b.String(), want)
	}
}
