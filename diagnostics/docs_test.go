package diagnostics

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/diagnostics.md from the code table")

// docs/diagnostics.md is the operator's reference; it must list exactly the
// codes this package emits. Regenerate with: go test ./diagnostics -update
func TestDocsListEveryCode(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Diagnostic codes\n\n")
	b.WriteString("Every recovery step noderun takes is journaled (`noderun events RUN`) and logged on stderr with one of\n")
	b.WriteString("these codes. Codes are stable: never renumbered, never reused. Generated from `diagnostics/codes.go`.\n\n")
	b.WriteString("The role says how `noderun diagnose`, the verdicts, the report and `noderun chaos` read a code: a\n")
	b.WriteString("**fault** counts against the node (by its noun), a **step** is recovery taken (and how: re-attach,\n")
	b.WriteString("continue, retry, ...), a **record** is kept for the operator, an **outcome** is how a node ended\n")
	b.WriteString("(an outcome with a noun is a fault too). `attrs` are the typed attributes a record of the code\n")
	b.WriteString("carries in its journaled payload.\n\n")
	b.WriteString("| code | name | level | role | meaning | attrs |\n|---|---|---|---|---|---|\n")
	for _, c := range Codes() {
		role := c.Role.String()
		switch {
		case c.Role == RoleStep:
			role += " (" + c.Means.String() + ")"
		case c.Noun != "":
			role += " (" + c.Noun + ")"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s |\n", c.ID, c.Name, c.Level, role, c.Summary, strings.Join(c.Attrs.Names(), ", "))
	}
	b.WriteString("\n## Error classes\n\n")
	b.WriteString("| class | transient | examples |\n|---|---|---|\n")
	for _, c := range []struct {
		c  Class
		ex string
	}{
		{ClassDisconnect, "EOF without terminal evidence, unexpected EOF, connection reset, idle timeout, HTTP/2 stream error, 502/503/504"},
		{ClassConnect, "connection refused: the request provably never left"},
		{ClassRateLimited, "429, with Retry-After in seconds or as an HTTP date"},
		{ClassServer, "500 and other 5xx"},
		{ClassStuck, "a background response left queued past the profile's stuck_after, a thread the agent CLI dropped: it cannot be resumed, only retried"},
		{ClassNotFound, "the provider no longer knows the work when its status is checked (404: expired, another server): nothing to resume, only a retry"},
		{ClassProviderCanceled, "the provider reports the work cancelled (`noderun cancel`, or someone else): it cannot go on, only be retried"},
		{ClassDeterministic, "400, 401, 403, 404, 422, context length, a failed or incomplete response, a harness thread mismatch"},
		{ClassCanceled, "Ctrl-C, node cancel"},
		{ClassProtocol, "a 200 that is not an event stream (text/html from a portal), an event that is not JSON, a redirect"},
		{ClassLimit, "a stream event or line past 32 MiB, a node's answer past max_output_bytes, an attempt past max_events, a graph file or rendered prompt past its bound"},
		{ClassJournal, "disk full, a read-only or vanished journal file: the node stops at once, resumable work stays resumable"},
	} {
		fmt.Fprintf(&b, "| `%s` | %v | %s |\n", c.c, c.c.Transient(), c.ex)
	}
	// What follows the generated part (from its "## Limits" heading on) is
	// written by hand; the packages that own each limit check it states them.
	const path = "../docs/diagnostics.md"
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with: go test ./diagnostics -update)", err)
	}
	rest := ""
	if i := strings.Index(string(got), "\n## Limits"); i >= 0 {
		rest = string(got[i:])
	}
	if *update {
		if err := os.WriteFile(path, []byte(b.String()+rest), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(got) != b.String()+rest {
		t.Errorf("%s is out of date; regenerate with: go test ./diagnostics -update", path)
	}
}
