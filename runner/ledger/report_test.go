package ledger

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// reportRun is a failed run with one node of each kind the page picks out.
func reportRun() *Run {
	run := &Run{Run: journal.Run{ID: "run-1", Graph: "g", Status: journal.RunFailed, Started: sec(0), Finished: sec(10)},
		Sessions: []Span{span(0, 10)}}
	node := func(id string, st journal.NodeState, class diagnostics.Class, errText, reason string, atts []journal.Attempt, recs ...Record) *Node {
		nd := &Node{Node: journal.Node{ID: id, State: st, ErrClass: class, Error: errText, Reason: reason}, Records: recs}
		for _, a := range atts {
			a.NodeID = id
			nd.Attempts = append(nd.Attempts, Attempt{Attempt: a})
		}
		return nd
	}
	failed := []journal.Attempt{{N: 1, Mode: journal.ModeStart, Outcome: journal.OutcomeError, ErrClass: "deterministic", Started: sec(1), Ended: sec(2)}}
	run.Nodes = []*Node{
		node("ok", journal.NodeCompleted, "", "", "", []journal.Attempt{{N: 1, Outcome: journal.OutcomeOK, Started: sec(0), Ended: sec(3)}}),
		node("auth", journal.NodeFailed, "deterministic", `node "auth" failed: HTTP 401 <unauthorized>`, "", failed,
			rrec(diagnostics.DeterministicError, 1, 2), rrec(diagnostics.NodeFailed, 1, 2)),
		node("deploy", journal.NodeFailed, "transport_disconnect", "reset", "", failed, rrec(diagnostics.UnsafeReplayRefused, 1, 2)),
		node("unsure", journal.NodeAttention, "", "", "its request may have had side effects", failed),
		node("bg", journal.NodeCanceled, "", "", "interrupted",
			[]journal.Attempt{{N: 1, Outcome: journal.OutcomeError, ErrClass: "canceled", Error: "context canceled", Started: sec(1), Ended: sec(9)}},
			rrec(diagnostics.NodeCanceled, 1, 9), rrec(diagnostics.WorkDetached, 1, 9, diagnostics.KeyRef.Attr("resp_7"))),
		node("after", journal.NodeSkipped, "", "", `needs "auth"`, nil, rrec(diagnostics.NodeSkipped, 0, 2, diagnostics.KeyCause.Attr("auth"))),
	}
	run.Nodes[0].Output = strings.Repeat("é", 40) // 80 bytes
	return run
}

// The page picks out every node that did not complete for a reason of its
// own, with the command that goes on from it, and names the journal so the
// command works when pasted.
func TestReportAttention(t *testing.T) {
	run := reportRun()
	run.Nodes[4].Partial = "half an answer"
	opts := ReportOptions{DB: "/tmp/my runs/it's.db", MaxOutput: 51}
	p := buildPage(run, AccountOf(run, nil), opts, sec(100))
	const db = `--db '/tmp/my runs/it'\''s.db'`
	want := map[string]string{ // node: its commands
		"auth":   "retry: noderun resume run-1 --retry auth " + db,
		"deploy": "retry: noderun resume run-1 --retry deploy " + db,
		"unsure": "retry: noderun resume run-1 --retry unsure " + db,
		"bg":     "cancel: noderun cancel run-1 bg " + db,
	}
	got := map[string]string{}
	for _, pr := range p.Problems {
		var cmds []string
		for _, c := range pr.Commands {
			cmds = append(cmds, c.What+": "+c.Line)
		}
		got[pr.Node] = strings.Join(cmds, "; ")
		if pr.Verdict == "" {
			t.Errorf("%s: no verdict", pr.Node)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("problems and commands\n got %v\nwant %v", got, want)
	}
	if len(p.RunCommands) != 0 {
		t.Errorf("a failed run has no run-wide command: %+v", p.RunCommands)
	}
	for _, pr := range p.Problems {
		switch pr.Node {
		case "auth":
			if pr.Class != "deterministic" || !strings.Contains(pr.Error, "HTTP 401") || fmt.Sprint(pr.Skipped) != "[after]" {
				t.Errorf("auth: %+v", pr)
			}
		case "bg": // its error is its last attempt's
			if pr.Class != "canceled" || pr.Error != "context canceled" {
				t.Errorf("bg: %+v", pr)
			}
		}
	}
	// Outputs are cut at a character boundary, with the command that prints all.
	for _, d := range p.Nodes {
		switch d.ID {
		case "ok":
			if !d.Cut || d.Output != strings.Repeat("é", 25) || d.OutputBytes != 80 || d.ShowCmd != "noderun show run-1 ok "+db {
				t.Errorf("ok: cut %v, %d of %d bytes shown, %q", d.Cut, len(d.Output), d.OutputBytes, d.ShowCmd)
			}
		case "bg":
			if d.Cut || d.Output != "half an answer" || !strings.Contains(d.OutputWhat, "Partial output of attempt 1") || !d.Open {
				t.Errorf("bg: %+v", d)
			}
		}
	}

	// Interrupted: the run's command is resume, and nothing is a failure.
	run.Status = journal.RunInterrupted
	p = buildPage(run, AccountOf(run, nil), ReportOptions{}, sec(100))
	if len(p.RunCommands) != 1 || p.RunCommands[0].Line != "noderun resume run-1" {
		t.Errorf("interrupted run: %+v", p.RunCommands)
	}
	// A run whose runner died says so and offers the same.
	run.Status = journal.RunRunning
	run.Abandoned = true
	p = buildPage(run, AccountOf(run, nil), ReportOptions{}, sec(100))
	if len(p.RunCommands) != 1 || p.RunCommands[0].What != "resume" || !strings.Contains(p.Figures.Status, "runner is gone") {
		t.Errorf("abandoned run: %+v, %q", p.RunCommands, p.Figures.Status)
	}
	// A live one offers nothing, and its running nodes are not problems.
	run.Abandoned = false
	p = buildPage(run, AccountOf(run, nil), ReportOptions{}, sec(100))
	if len(p.RunCommands) != 0 {
		t.Errorf("live run: %+v", p.RunCommands)
	}
}

// What the journal holds is text on the page, never markup: an output or
// an error that looks like HTML is escaped.
func TestReportEscapes(t *testing.T) {
	run := reportRun()
	run.Nodes[0].Output = `</pre><script>document.body.dataset.pwned = 1</script><img src=x onerror=alert(1)>`
	var b bytes.Buffer
	if err := WriteReport(&b, run, nil, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "<script>document") || strings.Contains(page, "<img src=x") || strings.Contains(page, "<unauthorized>") {
		t.Error("the page holds the journal's text as markup")
	}
	if !strings.Contains(page, "&lt;/pre&gt;&lt;script&gt;document.body.dataset.pwned = 1&lt;/script&gt;") ||
		!strings.Contains(page, "HTTP 401 &lt;unauthorized&gt;") {
		t.Error("the page lacks the escaped output and error")
	}
	if strings.Count(page, "<script>") != 1 {
		t.Errorf("%d scripts, want the page's own one", strings.Count(page, "<script>"))
	}
}

// An interruption is drawn as one, and the resume that picks a node up as
// that, not as a failure or a fault; the timeline's other marks say what
// their codes declare.
func TestMarkKind(t *testing.T) {
	for c, want := range map[diagnostics.Code]string{
		diagnostics.NodeCanceled: "interrupted", diagnostics.JournalUnavailable: "interrupted", diagnostics.NodeResumed: "resumed",
		diagnostics.DisconnectDetected: "fault", diagnostics.CrossWorkerResume: "fault", diagnostics.NodeFailed: "failure",
		diagnostics.DeterministicError: "failure", diagnostics.Recovered: "", diagnostics.NodeSkipped: "", diagnostics.ResponseCreated: "",
		diagnostics.RetryStarted: "retry", diagnostics.ContinueScheduled: "continue", diagnostics.Reattached: "reattach",
		diagnostics.StatusChecked: "poll", diagnostics.WorkCancelled: "cancel", diagnostics.ReconnectScheduled: "reconnect",
	} {
		if got := markKind(c); got != want {
			t.Errorf("markKind(%s) = %q, want %q", c, got, want)
		}
	}
}
