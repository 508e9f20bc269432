package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/provider"
)

// Issue 31, point 6: an interrupted run returns its Result with an error a
// caller can match (ErrInterrupted, and context.Canceled when that was the
// cause); the stopped node's error says interrupted, not failed; Resume
// then finishes it.
func TestRunInterruptedIsMatchable(t *testing.T) {
	t.Parallel()
	cpus.Take(t)
	g := parseTestGraph(t, "name: t\nprofile: ci\nproviders:\n  s:\n    kind: sim\n    sim: {tokens: 400, tokens_per_second: 200}\nnodes:\n  - id: a\n    prompt: x\n")
	j := openJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, g, Options{Journal: j, OnProgress: func(p Progress) {
		if p.State == ProgressData && p.Bytes > 0 {
			cancel() // mid-stream
		}
	}})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want ErrInterrupted and context.Canceled", err)
	}
	if res == nil || res.Status != journal.RunInterrupted {
		t.Fatalf("result %+v", res)
	}
	nr := res.Nodes[0]
	if nr.State != journal.NodeCanceled || !errors.Is(nr.Err, ErrInterrupted) {
		t.Errorf("node: state %s, err %v", nr.State, nr.Err)
	}
	if msg := nr.Err.Error(); strings.Contains(msg, "failed") || !strings.Contains(msg, "interrupted ["+diagnostics.NodeCanceled.ID) {
		t.Errorf("node error %q: want it to say interrupted, not failed", msg)
	}

	res, err = Resume(context.Background(), res.RunID, nil, Options{Journal: j})
	if err != nil || res.Status != journal.RunCompleted || res.Nodes[0].Output == "" {
		t.Fatalf("resume: %v, %+v", err, res)
	}
}

// An attempt's error text does not repeat its class, which the attempt
// records apart.
func TestAttemptErrorSaysItsClassOnce(t *testing.T) {
	g := parseTestGraph(t, "name: t\nprofile: ci\nproviders:\n  s:\n    kind: sim\n    sim:\n      faults: [{endpoint: chat, requests: [1], kind: reset, after_events: 5}]\nnodes:\n  - id: a\n    prompt: x\n")
	j := openJournal(t)
	res := runGraph(t, g, j)
	if res.Status != journal.RunCompleted {
		t.Fatalf("status %s", res.Status)
	}
	atts, err := j.Attempts(context.Background(), res.RunID, "a")
	if err != nil || len(atts) < 2 {
		t.Fatalf("attempts %+v, %v", atts, err)
	}
	a := atts[0]
	if a.ErrClass != diagnostics.ClassDisconnect || a.Error == "" || strings.Contains(a.Error, string(a.ErrClass)) {
		t.Errorf("attempt 1: class %q, error %q: want the class once, in ErrClass", a.ErrClass, a.Error)
	}
}

// Setup errors are sentinels.
func TestSetupErrorsAreSentinels(t *testing.T) {
	g := parseTestGraph(t, "name: t\nproviders:\n  s:\n    kind: sim\nnodes:\n  - id: a\n    prompt: x\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Run(ctx, g, Options{}); !errors.Is(err, ErrNoJournal) {
		t.Errorf("no journal: %v", err)
	}
	if _, err := Resume(ctx, "r", nil, Options{}); !errors.Is(err, ErrNoJournal) {
		t.Errorf("resume, no journal: %v", err)
	}
	j := openJournal(t)
	mine := func(*ProviderSpec) (provider.Provider, error) { return nil, errors.New("unused") }
	if _, err := Run(ctx, g, Options{Journal: j, Kinds: map[string]ProviderFunc{ProviderKindSim: mine}}); !errors.Is(err, ErrBuiltinKind) {
		t.Errorf("a kind named sim: %v", err)
	}
	if _, err := Run(ctx, g, Options{Journal: j, Kinds: map[string]ProviderFunc{"mine": nil}}); !errors.Is(err, ErrNoProviderFunc) {
		t.Errorf("a nil ProviderFunc: %v", err)
	}
}
