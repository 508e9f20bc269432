package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// killDelay is how long a stopped harness gets between SIGTERM (so it can
	// save its thread) and SIGKILL.
	killDelay = 3 * time.Second
	// drainWait is how long stdout and stderr may stay open after the process
	// exited (held by a child that left the process group).
	drainWait = 2 * time.Second
	// maxLine bounds one JSONL line; a longer one is journaled truncated.
	maxLine = 16 << 20
	// stderrKeep is how much of stderr is kept for messages.
	stderrKeep = 16 << 10
)

// process is a running harness: its own process group, stdin /dev/null,
// stdout and stderr on pipes this package reads.
type process struct {
	cmd        *exec.Cmd
	pid        int
	marker     string // MarkerEnv=value, in the environment of the process and its descendants
	outR, errR *os.File
	stderr     tailBuffer
	stderrDone chan struct{}
	state      *os.ProcessState
	exited     atomic.Bool
	log        *slog.Logger
}

// startProcess starts bin with argv (never through a shell). When ctx ends,
// the whole process group gets SIGTERM, then SIGKILL after killDelay.
func startProcess(ctx context.Context, bin string, argv []string, dir string, env []string, log *slog.Logger) (*process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir = dir
	marker := MarkerEnv + "=" + rand.Text()
	cmd.Env = append(env[:len(env):len(env)], marker)
	cmd.Stdin = nil // /dev/null: a harness must not wait for input
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr := &process{cmd: cmd, marker: marker, outR: outR, errR: errR, stderrDone: make(chan struct{}), log: log}
	cmd.Cancel = pr.terminate
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	pr.pid = cmd.Process.Pid
	go pr.readStderr()
	return pr, nil
}

// MarkerEnv is set, to a value unique to each run, in the environment of
// every harness process. Descendants that leave the process group (Codex
// starts its shell-snapshot `bash -lc` with setsid) still carry it, which is
// how they are found and killed when the run ends.
const MarkerEnv = "NODERUN_HARNESS_RUN"

// sweep kills every process that carries this run's marker (Linux, through
// /proc; elsewhere only the process group is killed). It repeats while it
// finds some, in case one was forking.
func (pr *process) sweep() {
	want := []byte(pr.marker + "\x00")
	self := os.Getpid()
	for range 10 {
		found := 0
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(env, want) {
				continue
			}
			if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && zombie(st) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				found++
				pr.log.Debug("harness: killed a process left behind", "pid", pid)
			}
		}
		if found == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombie reports whether a /proc/PID/stat line is a zombie's.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// signal sends sig to the process group.
// It reads the pid from cmd.Process, which Start sets before the goroutine
// that may call terminate exists (pr.pid is set after Start returns).
func (pr *process) signal(sig syscall.Signal) {
	pid := pr.cmd.Process.Pid
	if pid <= 0 {
		return // never kill(0) or kill(-1): that would signal our own group, or everything
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		pr.log.Debug("harness: signal", "pid", pid, "signal", sig, "error", err)
	}
}

// terminate is the Cmd's Cancel: SIGTERM to the group, SIGKILL later if the
// process is still there.
func (pr *process) terminate() error {
	pr.signal(syscall.SIGTERM)
	time.AfterFunc(killDelay, func() {
		if !pr.exited.Load() {
			pr.signal(syscall.SIGKILL)
		}
	})
	return nil
}

// loop feeds stdout lines to handle until the process exited and stdout
// ended, and reaps the process. After terminal() turns true, or stdout
// ends, the process has grace to exit before it is stopped with stop.
// Whatever is left of the process group after the exit is killed.
func (pr *process) loop(handle func([]byte), terminal func() bool, grace time.Duration, stop context.CancelCauseFunc) {
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		scanLines(pr.outR, func(l []byte) { lines <- l })
	}()
	waitc := make(chan struct{})
	go func() {
		_ = pr.cmd.Wait()
		close(waitc)
	}()
	var graceT, drainT <-chan time.Time
	var exitedAt time.Time
	exited := false
	for lines != nil || !exited {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				if !exited && graceT == nil {
					graceT = time.After(grace)
				}
				continue
			}
			handle(l)
			if !exited && graceT == nil && terminal() {
				graceT = time.After(grace)
			}
		case <-waitc:
			waitc, exited, graceT, exitedAt = nil, true, nil, time.Now()
			pr.exited.Store(true)
			pr.state = pr.cmd.ProcessState
			pr.signal(syscall.SIGKILL) // what is left of the group
			pr.sweep()                 // and of the descendants that left it
			if lines != nil {
				drainT = time.After(drainWait)
			}
		case <-graceT:
			graceT = nil
			stop(errLingered)
		case <-drainT:
			drainT = nil
			pr.outR.Close() // held open by a process outside the group
		}
	}
	pr.outR.Close()
	select {
	case <-pr.stderrDone:
	case <-time.After(drainWait - time.Since(exitedAt)):
	}
	pr.errR.Close()
	<-pr.stderrDone
}

func (pr *process) readStderr() {
	defer close(pr.stderrDone)
	scanLines(pr.errR, func(l []byte) {
		pr.stderr.Write(l)
		pr.stderr.Write([]byte{'\n'})
		pr.log.Debug("harness stderr", "pid", pr.pid, "line", string(l))
	})
}

// scanLines calls fn with each line of r (without the line end), each in a
// fresh slice. A line longer than maxLine is cut there; the rest of it is dropped.
func scanLines(r io.Reader, fn func([]byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if room := maxLine - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			if l := bytes.TrimRight(line, "\r\n"); len(l) > 0 {
				fn(l)
			}
			line = nil
		}
		if err != nil {
			return
		}
	}
}

// tailBuffer keeps the last stderrKeep bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrKeep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// signalOf names the signal that killed the process, if one did.
func signalOf(st *os.ProcessState) string {
	if st == nil {
		return ""
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	switch sig := ws.Signal(); sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	default:
		return fmt.Sprintf("signal %d (%s)", int(sig), sig)
	}
}
