package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// Config configures a harness provider.
type Config struct {
	// Harness is a built-in descriptor name ("codex") or the path of a
	// descriptor YAML file.
	Harness string
	// Command overrides the descriptor's binary (a name on PATH or a path).
	Command string
	// Args are extra arguments, put where the templates say {args} (for
	// Codex: before the prompt, e.g. "-c", "model_providers.sim={...}").
	Args []string
	// Env is added to the process environment (os.Environ()), e.g. CODEX_HOME.
	Env map[string]string
	// WorkDir is the working directory when the request names none.
	WorkDir string
	// StateDir holds each node's own harness state ({state_dir} in a
	// descriptor is StateDir/<descriptor name>/<node>), such as the session
	// store a resume must find. Default: $XDG_STATE_HOME/noderun/harness,
	// else ~/.local/state/noderun/harness.
	StateDir string
	// Logger receives debug logs (process start and exit, stderr lines); nil discards.
	Logger *slog.Logger
}

// Provider runs an agent harness CLI per node call. It is safe for
// concurrent use.
type Provider struct {
	cfg  Config
	desc *Descriptor
	log  *slog.Logger

	mu   sync.Mutex
	live map[string]map[int]context.CancelCauseFunc // thread id → running processes
	next int
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Resumer  = (*Provider)(nil)
	_ provider.Canceler = (*Provider)(nil)
)

// New resolves the descriptor. The binary is looked up when a call starts,
// so a missing binary fails that call (deterministic class), not New.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.Harness) == "" {
		return nil, errors.New("harness: no harness named (a built-in descriptor such as codex, or a descriptor file)")
	}
	d, err := Resolve(cfg.Harness)
	if err != nil {
		return nil, err
	}
	if cfg.Command == "" && d.Command == "" {
		return nil, fmt.Errorf("harness %s: the descriptor names no command; set the provider's command", d.Name)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if strings.ContainsRune(cfg.Command, filepath.Separator) && !filepath.IsAbs(cfg.Command) {
		// exec would resolve a relative path against the process's working directory.
		if cfg.Command, err = filepath.Abs(cfg.Command); err != nil {
			return nil, fmt.Errorf("harness %s: command: %w", d.Name, err)
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = defaultStateDir()
	}
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("harness %s: state dir: %w", d.Name, err)
	}
	cfg.Args = slices.Clone(cfg.Args)
	cfg.Env = maps.Clone(cfg.Env)
	return &Provider{cfg: cfg, desc: d, log: log, live: map[string]map[int]context.CancelCauseFunc{}}, nil
}

// Descriptor returns the descriptor in use. It must not be modified.
func (p *Provider) Descriptor() *Descriptor { return p.desc }

// Capabilities: a recorded thread can be resumed (when the descriptor has a
// resume argv) and its process stopped. IdleHandled, because the harness
// has its own idle timeout and an agent may be silent for long while a tool
// runs: the executor must not cut it for silence.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Resume: p.desc.CanResume(), Cancel: true, IdleHandled: true}
}

// Stream runs the harness on a new thread. It emits every JSONL line as
// KindRaw, the thread id as KindRef as soon as it appears, completed items
// as KindProgress, the harness's own retries and failure as diagnostics, and
// on terminal success KindReset, the final output as one KindDelta, and
// KindDone. Any other end is a classified error.
//
// A thread that a resume found dropped (see DroppedRule) is started again:
// the descriptor's restart argv, under the same thread id.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit provider.Emit) error {
	dir := p.workDir(req)
	vals := p.values(req, dir, "")
	id, err := p.pendingRestart(vals)
	if err != nil {
		return diagnostics.Wrap(diagnostics.ClassDeterministic, fmt.Errorf("%s: state dir: %w", p.desc.Name, err))
	}
	if id != "" {
		vals = p.values(req, dir, id)
		return p.run(ctx, dir, p.desc.Dropped.Restart.Argv(vals, p.cfg.Args), vals, req.Env, runKind{want: id, restart: true}, emit)
	}
	return p.run(ctx, dir, p.desc.Start.Argv(vals, p.cfg.Args), vals, req.Env, runKind{}, emit)
}

// Resume continues the recorded thread cur.Ref with the descriptor's
// continue prompt, checks that the harness reports that same thread (else
// ThreadMismatch and a deterministic error), then goes on like Stream.
func (p *Provider) Resume(ctx context.Context, req provider.Request, cur provider.Cursor, emit provider.Emit) error {
	name := p.desc.Name
	if !p.desc.CanResume() {
		return diagnostics.Wrap(diagnostics.ClassDeterministic, fmt.Errorf("%s: the descriptor has no resume argv", name))
	}
	if cur.Ref == "" {
		return diagnostics.Wrap(diagnostics.ClassDeterministic, fmt.Errorf("%s: no thread id recorded to resume", name))
	}
	dir := p.workDir(req)
	vals := p.values(req, dir, cur.Ref)
	argv := p.desc.Resume.Argv(vals, p.cfg.Args)
	d := diagnostics.New(diagnostics.ThreadResumed, fmt.Sprintf("resuming %s thread %s", name, cur.Ref),
		diagnostics.KeyThreadID.Attr(cur.Ref))
	if err := emit(provider.Event{Kind: provider.KindDiagnostic, Diag: &d, Ref: cur.Ref, Seq: -1, Time: time.Now()}); err != nil {
		return err
	}
	return p.run(ctx, dir, argv, vals, req.Env, runKind{want: cur.Ref}, emit)
}

// Cancel stops the processes running thread ref, if any. Stream and Resume
// never return while their process runs, so after they return there is
// nothing left to stop and Cancel is a no-op.
func (p *Provider) Cancel(ctx context.Context, ref string) error {
	p.mu.Lock()
	var kills []context.CancelCauseFunc
	for _, k := range p.live[ref] {
		kills = append(kills, k)
	}
	p.mu.Unlock()
	for _, k := range kills {
		k(errCanceled)
	}
	return nil
}

var (
	errCanceled = errors.New("canceled by the provider's Cancel")
	errMismatch = errors.New("resume came back with another thread")
	errGaveUp   = errors.New("the harness kept retrying by itself")
	errLingered = errors.New("the harness did not exit after its terminal event")
)

func (p *Provider) register(ref string, kill context.CancelCauseFunc) (unregister func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := p.next
	if p.live[ref] == nil {
		p.live[ref] = map[int]context.CancelCauseFunc{}
	}
	p.live[ref][id] = kill
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.live[ref], id)
		if len(p.live[ref]) == 0 {
			delete(p.live, ref)
		}
	}
}

func (p *Provider) workDir(req provider.Request) string {
	if req.WorkDir != "" {
		return req.WorkDir
	}
	return p.cfg.WorkDir
}

func (p *Provider) values(req provider.Request, dir, thread string) map[string]string {
	v := map[string]string{
		"model":            req.Model,
		"prompt":           req.Prompt,
		"system":           req.System,
		"reasoning_effort": req.ReasoningEffort,
		"thread_id":        thread,
		"continue_prompt":  p.desc.ContinuePrompt,
		"workdir":          dir,
		"state_dir":        filepath.Join(p.cfg.StateDir, p.desc.Name, pathSafe(req.Node)),
		"node":             req.Node,
	}
	if req.MaxOutputTokens > 0 {
		v["max_output_tokens"] = strconv.Itoa(req.MaxOutputTokens)
	}
	return v
}

// LookPath resolves the binary a call would run, without running it, for
// up-front checks (`noderun validate` and `run` check it before writing anything): the error says how to install it.
func (p *Provider) LookPath() (string, error) {
	path, err := exec.LookPath(p.command())
	if err != nil {
		return "", fmt.Errorf("%s: cannot run %q: %w (install it, e.g. with `make tools`, or set the provider's command)",
			p.desc.Name, p.command(), err)
	}
	return path, nil
}

func (p *Provider) command() string {
	if p.cfg.Command != "" {
		return p.cfg.Command
	}
	return p.desc.Command
}

// env is noderun's environment, then the descriptor's env, then the
// provider's, then the node's (later entries win).
func (p *Provider) env(vals, nodeEnv map[string]string) []string {
	env := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(p.desc.Env)) {
		_, over := p.cfg.Env[k]
		_, overNode := nodeEnv[k]
		if !over && !overNode {
			env = append(env, k+"="+p.desc.Env[k].Expand(vals))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.cfg.Env)) {
		if _, over := nodeEnv[k]; !over {
			env = append(env, k+"="+p.cfg.Env[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(nodeEnv)) {
		env = append(env, k+"="+nodeEnv[k])
	}
	return env
}

// prepare creates the node's state directory and writes the descriptor's
// files, when the descriptor has any env or files.
func (p *Provider) prepare(vals map[string]string) error {
	if len(p.desc.Env) == 0 && len(p.desc.Files) == 0 {
		return nil
	}
	if err := os.MkdirAll(vals["state_dir"], 0o700); err != nil {
		return err
	}
	for _, f := range p.desc.Files {
		path := f.Path.Expand(vals)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.Content.Expand(vals)), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "noderun", "harness")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "noderun", "harness")
	}
	return filepath.Join(os.TempDir(), "noderun-harness")
}

// pathSafe makes a node id one path element.
func pathSafe(s string) string {
	if s == "" {
		return "_"
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if s == "." || s == ".." {
		return "_" + s
	}
	return string(b)
}

// NodeEnv is set in a harness process's environment to the graph node it
// works for, so that the harness can name the node to its model server
// (Codex: model_providers.X.env_http_headers).
const NodeEnv = "NODERUN_NODE"

// runKind is what kind of run a process is.
type runKind struct {
	want    string // the thread a resume or restart must come back with ("" for a new thread)
	restart bool   // a dropped thread started again under its id
}

// run runs one harness process to its end and reports the outcome.
func (p *Provider) run(ctx context.Context, dir string, argv []string, vals, nodeEnv map[string]string, kind runKind, emit provider.Emit) error {
	name, want := p.desc.Name, kind.want
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	bin, err := p.LookPath()
	if err != nil {
		return diagnostics.Wrap(diagnostics.ClassDeterministic, err)
	}
	if err := p.prepare(vals); err != nil {
		return diagnostics.Wrap(diagnostics.ClassDeterministic, fmt.Errorf("%s: state dir: %w", name, err))
	}
	runCtx, kill := context.WithCancelCause(ctx)
	defer kill(nil)
	env := p.env(vals, nodeEnv)
	if n := provider.NodeOf(ctx); n != "" {
		// a harness pointed at the simulator names its node with this (env_http_headers)
		env = append(env, NodeEnv+"="+n)
	}
	proc, err := startProcess(runCtx, bin, argv, dir, env, p.log.With("harness", name))
	if err != nil {
		return diagnostics.Wrap(diagnostics.ClassDeterministic, fmt.Errorf("%s: %w", name, err))
	}
	p.log.Debug("harness started", "harness", name, "pid", proc.pid, "argv", logArgv(argv), "dir", dir, "resume", want)

	s := &session{p: p, want: want, restart: kind.restart, emit: emit, kill: kill, retries: map[*RetryRule]int{}}
	if want != "" {
		defer p.register(want, kill)()
	}
	defer func() {
		if s.unregister != nil {
			s.unregister()
		}
	}()
	proc.loop(s.handle, func() bool { return s.terminal() }, time.Duration(p.desc.ExitGrace), kill)
	st := proc.state
	p.log.Debug("harness exited", "harness", name, "pid", proc.pid, "exit_code", st.ExitCode(), "thread_id", s.thread)
	if kind.restart && s.thread == want {
		// The thread runs again: a later failure is resumed, or found dropped again.
		if err := p.restarted(vals); err != nil {
			p.log.Warn("harness: removing the restart marker", "harness", name, "error", err)
		}
	}

	switch {
	case s.emitErr != nil:
		return s.emitErr
	case s.done:
		return s.finish()
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", name, context.Cause(ctx))
	case s.mismatch != "":
		return diagnostics.Wrap(diagnostics.ClassDeterministic, &MismatchError{Harness: name, Want: want, Got: s.mismatch})
	}

	stderr := proc.stderr.String()
	te := &TurnError{Harness: name, Message: s.message(stderr), ExitCode: st.ExitCode()}
	if sig := signalOf(st); sig != "" {
		te.Signal = sig
	}
	if s.gaveUp != "" {
		te.Explain = fmt.Sprintf("stopped after %d of its own retries without progress", s.gaveUpCount)
	}
	if want != "" && !kind.restart && s.thread == "" && p.desc.threadNotFound(te.Message) {
		de, err := p.setAside(vals, want, te.Message)
		if err != nil {
			return diagnostics.Wrap(diagnostics.ClassDeterministic, fmt.Errorf("%s: setting aside the record of thread %s: %w", name, want, err))
		}
		if de != nil {
			s.diag(diagnostics.New(diagnostics.ThreadDropped, de.Error(), diagnostics.KeyThreadID.Attr(want),
				diagnostics.KeyEffects.Attr(de.Effects), diagnostics.KeyExitCode.Attr(te.ExitCode), diagnostics.KeyStderr.Attr(tail(stderr, 2048))))
			if s.emitErr != nil {
				return s.emitErr
			}
			return diagnostics.Wrap(diagnostics.ClassStuck, de)
		}
		s.diag(diagnostics.New(diagnostics.ThreadMismatch, fmt.Sprintf("resume found no thread %s: %s", want, te.Message),
			diagnostics.KeyWant.Attr(want), diagnostics.KeyExitCode.Attr(te.ExitCode), diagnostics.KeyStderr.Attr(tail(stderr, 2048))))
		return diagnostics.Wrap(diagnostics.ClassDeterministic, &MismatchError{Harness: name, Want: want, Message: te.Message})
	}
	v := p.desc.ClassifyMessage(te.Message)
	if te.Explain == "" {
		te.Explain = v.Explain
	}
	s.diag(diagnostics.New(diagnostics.HarnessFailed, te.Error(),
		diagnostics.KeyThreadID.Attr(s.thread), diagnostics.KeyClass.Attr(v.Class), diagnostics.KeyStatus.Attr(v.Status),
		diagnostics.KeyExitCode.Attr(te.ExitCode), diagnostics.KeySignal.Attr(te.Signal), diagnostics.KeyStderr.Attr(tail(stderr, 2048))))
	if s.emitErr != nil {
		return s.emitErr
	}
	return classified(v, te)
}

// session is what one process run has shown so far.
type session struct {
	p          *Provider
	want       string
	restart    bool
	emit       provider.Emit
	kill       context.CancelCauseFunc
	unregister func()

	thread      string
	output      string
	done        bool
	usage       *provider.Usage
	failed      bool
	failMsg     string
	lastErr     string
	lastRetry   string
	retries     map[*RetryRule]int // consecutive notices without progress
	gaveUp      string
	gaveUpCount int
	mismatch    string
	emitErr     error
}

func (s *session) terminal() bool { return s.done || s.failed }

// send emits ev; after an emit error it only remembers the error and stops the process.
func (s *session) send(ev provider.Event) {
	if s.emitErr != nil {
		return
	}
	ev.Seq = -1
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if ev.Ref == "" {
		ev.Ref = s.thread
	}
	if err := s.emit(ev); err != nil {
		s.emitErr = err
		s.kill(err)
	}
}

func (s *session) diag(d diagnostics.Record) {
	s.send(provider.Event{Kind: provider.KindDiagnostic, Diag: &d})
}

// handle takes one stdout line.
func (s *session) handle(line []byte) {
	if s.emitErr != nil || s.mismatch != "" {
		return // the process is being stopped; nothing more is reported
	}
	d := s.p.desc
	o, err := d.observe(line)
	if err != nil {
		s.p.log.Debug("harness: not an event", "harness", d.Name, "error", err, "line", tail(string(line), 200))
	}
	if o.ThreadID != "" && s.thread == "" {
		if s.want != "" && o.ThreadID != s.want {
			s.mismatch = o.ThreadID
			s.kill(errMismatch)
			s.send(provider.Event{Kind: provider.KindRaw, Raw: line, Ref: s.want})
			s.diag(diagnostics.New(diagnostics.ThreadMismatch,
				fmt.Sprintf("resume came back with thread %s, not %s", o.ThreadID, s.want),
				diagnostics.KeyWant.Attr(s.want), diagnostics.KeyGot.Attr(o.ThreadID)))
			return
		}
		s.thread = o.ThreadID
		if s.want == "" {
			s.unregister = s.p.register(s.thread, s.kill)
		}
		// The id first: the executor makes it durable before anything else.
		s.send(provider.Event{Kind: provider.KindRef, Ref: s.thread})
		msg := "thread " + s.thread + " started"
		switch {
		case s.restart:
			msg = "thread " + s.thread + " started again under its own id (the harness had dropped it)"
		case s.want != "":
			msg = "resume continues thread " + s.thread
		}
		s.diag(diagnostics.New(diagnostics.ThreadStarted, msg, diagnostics.KeyThreadID.Attr(s.thread)))
	}
	s.send(provider.Event{Kind: provider.KindRaw, Raw: line})
	if o.Output != nil {
		if d.Output.Delta {
			s.output += *o.Output
		} else {
			s.output = *o.Output
		}
	}
	if o.Progress {
		clear(s.retries)
		s.send(provider.Event{Kind: provider.KindProgress})
	}
	switch {
	case o.Retry != nil:
		s.lastRetry = o.Message
		s.retries[o.Retry]++
		n := s.retries[o.Retry]
		s.diag(diagnostics.New(diagnostics.HarnessRetrying, o.Message, diagnostics.KeyThreadID.Attr(s.thread), diagnostics.KeyInARow.Attr(n)))
		if o.Retry.GiveUpAfter > 0 && n >= o.Retry.GiveUpAfter && !s.terminal() && s.gaveUp == "" {
			s.gaveUp, s.gaveUpCount = o.Message, n
			s.kill(errGaveUp)
		}
	case o.Error:
		s.lastErr = o.Message
	}
	if o.Failure {
		s.failed, s.failMsg = true, o.Message
	}
	if o.Success {
		s.done, s.usage = true, o.Usage
	}
}

// message is the best description of a failure.
func (s *session) message(stderr string) string {
	d := s.p.desc
	for _, m := range []string{s.failMsg, s.gaveUp, s.lastErr} {
		if strings.TrimSpace(m) != "" {
			return m
		}
	}
	if m := stderrMessage(d.StderrMessage, stderr); m != "" {
		return m
	}
	if s.lastRetry != "" {
		return s.lastRetry
	}
	return fmt.Sprintf("the process ended without %s", d.Success.Event)
}

// finish reports terminal success: the output is the final output event's text.
func (s *session) finish() error {
	s.send(provider.Event{Kind: provider.KindReset})
	if s.output != "" {
		s.send(provider.Event{Kind: provider.KindDelta, Text: s.output})
	}
	s.send(provider.Event{Kind: provider.KindDone, Usage: s.usage})
	return s.emitErr
}

// stderrMessage finds the failure message on stderr: the last match of re
// (its first group, if any), else the last non-empty line.
func stderrMessage(re *Pattern, stderr string) string {
	if re != nil && re.Regexp != nil {
		if ms := re.FindAllStringSubmatch(stderr, -1); len(ms) > 0 {
			m := ms[len(ms)-1]
			if len(m) > 1 {
				return strings.TrimSpace(m[1])
			}
			return strings.TrimSpace(m[0])
		}
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tail is the last n bytes of s, on a UTF-8 boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

func logArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if len(a) > 80 {
			a = a[:77] + "..."
		}
		out[i] = a
	}
	return out
}
