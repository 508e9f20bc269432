package harness

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/codexbin"
	"github.com/noderun/noderun/provider"
	"github.com/noderun/noderun/provider/sim"
	"github.com/noderun/noderun/provider/sim/simtest"
)

// The real Gemini CLI (npm @google/gemini-cli 0.61.0) against the
// simulator's Gemini endpoint: a session whose turn completed is resumed by
// id (a cut first turn cannot be resumed: it is started again, see the
// dropped rule and runner's TestHarnessGeminiNode*).
func TestGeminiResumeCompletedSession(t *testing.T) {
	t.Parallel()
	srv := simtest.Start(t, sim.Config{})
	state := t.TempDir()
	p, err := New(Config{
		Harness: "gemini", Command: codexbin.Gemini(t), WorkDir: t.TempDir(), StateDir: state,
		Env: map[string]string{"GOOGLE_GEMINI_BASE_URL": "http://" + srv.Addr(), "GEMINI_API_KEY": "sim-test-key", "TMPDIR": t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noProcessesIn(t, "GEMINI_CLI_HOME="+filepath.Join(state, "gemini", "n")) })
	req := provider.Request{Node: "n", Model: "sim", Prompt: "Write the release notes."}
	ctx := testCtx(t, 90*time.Second)

	r := &recorder{t: t}
	if err := p.Stream(ctx, req, r.emit); err != nil {
		t.Fatalf("Stream: %v\n%s", err, r.dump())
	}
	if got, want := r.out.String(), simText(req.Prompt); got != want {
		t.Errorf("output\n got %q\nwant %q", got, want)
	}
	refs := r.refs()
	if len(refs) != 1 || uuid.Validate(refs[0]) != nil {
		t.Fatalf("refs %v", refs)
	}

	r = &recorder{t: t}
	if err := p.Resume(ctx, req, provider.Cursor{Ref: refs[0], Seq: -1}, r.emit); err != nil {
		t.Fatalf("Resume: %v\n%s", err, r.dump())
	}
	if got, want := r.out.String(), simText(p.Descriptor().ContinuePrompt); got != want {
		t.Errorf("output after resume\n got %q\nwant %q", got, want)
	}
	if got := r.refs(); len(got) != 1 || got[0] != refs[0] {
		t.Errorf("resume reported %v, want %s", got, refs[0])
	}

	// Another id, in a store that has sessions: "Invalid session identifier".
	r = &recorder{t: t}
	other := uuid.NewString()
	err = p.Resume(ctx, req, provider.Cursor{Ref: other, Seq: -1}, r.emit)
	var me *MismatchError
	if classOf(err) != diagnostics.ClassDeterministic || !errors.As(err, &me) || me.Want != other ||
		!strings.Contains(me.Message, "Invalid session identifier") {
		t.Fatalf("err %v\n%s", err, r.dump())
	}
	if got := srv.Stats().Requests[sim.EndpointGeminiStream]; got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}
