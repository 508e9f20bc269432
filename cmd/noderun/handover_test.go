package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/noderun/noderun/runner/ledger"
	ntemporal "github.com/noderun/noderun/runner/temporal"
)

// diagnose --temporal's text: the local diagnosis, then a row per
// hand-over (the account itself is runner/temporal's, tested there).
func TestPrintTemporalDiagnosis(t *testing.T) {
	ms := int64(11500)
	beat, resumed := "2026-12-01T10:00:01.1Z", "2026-12-01T10:00:12.6Z"
	d := &ntemporal.Diagnosis{
		Account: &ledger.Account{RunID: "run-1", Graph: "g", Status: "completed", Nodes: []ledger.NodeAccount{{ID: "reason", State: "completed", Verdict: "re-attached"}}},
		Handovers: []ntemporal.Handover{{Node: "reason", LostWorker: "a", Worker: "b", LastHeartbeat: &beat, Resumed: &resumed, HandoverMS: &ms,
			Recovery: "re-attached", Tokens: ntemporal.HandoverTokens{Generated: 2000}}},
	}
	var text bytes.Buffer
	printTemporalDiagnosis(&text, 0, d, false)
	for _, want := range []string{"HAND-OVER", "reason     a            10:00:01.100    b              10:00:12.600  11.5 s  re-attached  2,000"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("diagnose --temporal lacks %q:\n%s", want, text.String())
		}
	}
}
