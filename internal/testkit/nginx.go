package testkit

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// Nginx is one real nginx process (Debian's nginx-light, which `make tools`
// installs) in front of one upstream: the gateway that cuts streams idle for
// longer than its proxy_read_timeout (testdata/nginx/nginx.conf.tmpl).
type Nginx struct {
	Addr     string // 127.0.0.1:PORT nginx listens on
	ErrorLog string // its error log's path
	Out      Buffer // its stdout and stderr
}

// nginxBinary finds nginx; a missing nginx fails the test (never skips it):
// the gateway tests must run in CI.
func nginxBinary(tb testing.TB) string {
	tb.Helper()
	RealPeer(tb, "nginx")
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	const debian = "/usr/sbin/nginx"
	if _, err := os.Stat(debian); err != nil {
		tb.Fatalf("nginx not found in PATH nor at %s (%v): run make tools (it installs Debian's nginx-light)", debian, err)
	}
	return debian
}

// StartNginx runs nginx in the foreground as a child process, listening on a
// free 127.0.0.1 port and proxying to upstream (host:port), cutting an
// upstream silent for timeout. Its files live in a temp dir; the process is
// stopped at cleanup.
func StartNginx(tb testing.TB, upstream string, timeout time.Duration) *Nginx {
	tb.Helper()
	bin := nginxBinary(tb)
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	tmpl, err := template.ParseFiles(filepath.Join(root, "testdata", "nginx", "nginx.conf.tmpl"))
	if err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for try := 0; try < 3; try++ { // a free port can be taken between probe and bind
		dir := tb.TempDir()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		listen := l.Addr().String()
		_ = l.Close()
		conf := filepath.Join(dir, "nginx.conf")
		var b bytes.Buffer
		nonce := rand.Text()
		vars := map[string]string{"Dir": dir, "Listen": listen, "Upstream": upstream, "Timeout": fmt.Sprintf("%dms", timeout.Milliseconds()), "Nonce": nonce}
		if err := tmpl.Execute(&b, vars); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(conf, b.Bytes(), 0o600); err != nil {
			tb.Fatal(err)
		}
		g := &Nginx{Addr: listen, ErrorLog: filepath.Join(dir, "error.log")}
		cmd := exec.Command(bin, "-p", dir+"/", "-e", g.ErrorLog, "-c", conf)
		cmd.Stdout, cmd.Stderr = &g.Out, &g.Out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
		if err := cmd.Start(); err != nil {
			tb.Fatalf("starting %s: %v (run make tools)", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		tb.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
		if lastErr = waitListening(listen, nonce, exited); lastErr == nil {
			return g
		}
		lastErr = fmt.Errorf("%w\n%s\n%s", lastErr, g.Out.String(), g.Log(tb))
	}
	tb.Fatalf("nginx did not start: %v", lastErr)
	return nil
}

// waitListening waits until the nginx given nonce answers on addr, or the
// process exits. Answering is the proof: between the port's probe and
// nginx's bind, a parallel test's server may take the port, and a mere
// connect would then send this test's requests to that server.
func waitListening(addr, nonce string, exited <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("nginx exited: %v", err)
		default:
		}
		if resp, err := hc.Get("http://" + addr + "/__testkit_nginx"); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			_ = resp.Body.Close()
			if string(body) == nonce {
				return nil
			}
			return fmt.Errorf("another server took %s before nginx could bind it", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nginx not listening on %s after 10s", addr)
}

// Log is nginx's error log.
func (g *Nginx) Log(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(g.ErrorLog)
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	return string(b)
}
