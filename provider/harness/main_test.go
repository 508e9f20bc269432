package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// The test binary doubles as a fake agent CLI (NR_HARNESS_FAKE=agent) that
// follows a script, and as a long-sleeping child of it (=sleeper).
func TestMain(m *testing.M) {
	switch os.Getenv("NR_HARNESS_FAKE") {
	case "agent":
		os.Exit(fakeAgent())
	case "sleeper":
		fakeSleeper()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeAgent runs the script in FAKE_SCRIPT (FAKE_RESUME_SCRIPT when argv
// has "resume" or "--resume", FAKE_RESTART_SCRIPT when it has
// "--session-id"), one command a line:
//
//	out TEXT        a stdout line ({thread} is replaced by the thread id argv names)
//	err TEXT        a stderr line
//	sleep DUR       wait
//	argv            print {"type":"argv","argv":[...],"dir":...,"env":$FAKE_ECHO}
//	env NAME        print {"type":"env","name":NAME,"value":$NAME}
//	spawn FILE      start a sleeper child (same process group, same stdout) that writes its pid to FILE
//	spawn-setsid F  the same in a new session (outside the process group)
//	spawn-setsid-clean-env F  the same without the parent's environment
//	ignore-term     ignore SIGTERM
//	close-stdout    close stdout
//	hang            wait forever
//	exit N          exit with status N
func fakeAgent() int {
	script := os.Getenv("FAKE_SCRIPT")
	thread := ""
	for i, a := range os.Args {
		switch a {
		case "resume", "--resume":
			script = os.Getenv("FAKE_RESUME_SCRIPT")
		case "--session-id":
			script = os.Getenv("FAKE_RESTART_SCRIPT")
		}
		if a == "--" && i+1 < len(os.Args) {
			thread = os.Args[i+1]
		}
	}
	for line := range strings.SplitSeq(script, "\n") {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch cmd {
		case "":
		case "out":
			fmt.Println(strings.ReplaceAll(arg, "{thread}", thread))
		case "err":
			fmt.Fprintln(os.Stderr, arg)
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "argv":
			dir, _ := os.Getwd()
			b, _ := json.Marshal(map[string]any{"type": "argv", "argv": os.Args[1:], "dir": dir, "env": os.Getenv("FAKE_ECHO")})
			fmt.Println(string(b))
		case "env":
			b, _ := json.Marshal(map[string]any{"type": "env", "name": arg, "value": os.Getenv(arg)})
			fmt.Println(string(b))
		case "spawn", "spawn-setsid", "spawn-setsid-clean-env":
			c := exec.Command(os.Args[0])
			c.Env = append(os.Environ(), "NR_HARNESS_FAKE=sleeper", "FAKE_PIDFILE="+arg)
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if cmd != "spawn" {
				c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			}
			if cmd == "spawn-setsid-clean-env" {
				c.Env = []string{"NR_HARNESS_FAKE=sleeper", "FAKE_PIDFILE=" + arg}
			}
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "spawn:", err)
				return 3
			}
			for range 500 { // wait for the pid file
				if _, err := os.Stat(arg); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
		case "close-stdout":
			os.Stdout.Close()
		case "hang":
			select {}
		case "exit":
			n, _ := strconv.Atoi(arg)
			return n
		default:
			fmt.Fprintln(os.Stderr, "fake agent: unknown command", cmd)
			return 2
		}
	}
	return 0
}

func fakeSleeper() {
	f := os.Getenv("FAKE_PIDFILE")
	tmp := f + ".tmp"
	_ = os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())), 0o644)
	_ = os.Rename(tmp, f)
	time.Sleep(5 * time.Minute)
}

// recorder collects what an adapter emits, checking the adapter contract on the way.
type recorder struct {
	t      testing.TB
	mu     sync.Mutex
	events []provider.Event
	out    strings.Builder
	done   bool
	// failOn makes emit fail on the first event of this kind.
	failOn provider.Kind
}

var errEmit = fmt.Errorf("journal is full")

func (r *recorder) emit(ev provider.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		r.t.Errorf("event %s after KindDone", ev.Kind)
	}
	if ev.Seq != -1 {
		r.t.Errorf("event %s has Seq %d, want -1", ev.Kind, ev.Seq)
	}
	if ev.Kind == provider.KindDiagnostic && ev.Diag == nil {
		r.t.Errorf("diagnostic event without Diag")
	}
	r.events = append(r.events, ev)
	switch ev.Kind {
	case provider.KindReset:
		r.out.Reset()
	case provider.KindDelta:
		r.out.WriteString(ev.Text)
	case provider.KindDone:
		r.done = true
	}
	if r.failOn != "" && ev.Kind == r.failOn {
		return errEmit
	}
	return nil
}

func (r *recorder) refs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Kind == provider.KindRef {
			out = append(out, ev.Ref)
		}
	}
	return out
}

func (r *recorder) diags(c diagnostics.Code) []diagnostics.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []diagnostics.Record
	for _, ev := range r.events {
		if ev.Kind == provider.KindDiagnostic && ev.Diag.Code == c {
			out = append(out, *ev.Diag)
		}
	}
	return out
}

func (r *recorder) count(k provider.Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		s := string(ev.Kind)
		if ev.Kind == provider.KindDiagnostic {
			s += ":" + ev.Diag.Code.ID
		}
		out = append(out, s)
	}
	return out
}

func (r *recorder) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.events {
		switch ev.Kind {
		case provider.KindRaw:
			fmt.Fprintf(&b, "  raw %s\n", ev.Raw)
		case provider.KindDiagnostic:
			fmt.Fprintf(&b, "  diag %s %s %v\n", ev.Diag.Code, ev.Diag.Message, ev.Diag.Attrs)
		default:
			fmt.Fprintf(&b, "  %s ref=%q text=%q\n", ev.Kind, ev.Ref, ev.Text)
		}
	}
	return b.String()
}

// classOf is the class diagnostics.Classify gives err.
func classOf(err error) diagnostics.Class { return diagnostics.Classify(err).Class }

// gone waits until pid no longer runs (or is a zombie).
func gone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("process %d still runs", pid)
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
