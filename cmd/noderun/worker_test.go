package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Temporal commands refuse bad input with exit 2 before dialing, and an
// unreachable frontend is a failure (exit 1) that names it. The runs
// themselves are tested against a real dev server in runner/temporal.
func TestTemporalCommandsInput(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\nnodes:\n  - {id: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join("..", "..", "testdata", "graphs", "demo.yaml")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"worker"}, exitUsage, "--temporal HOST:PORT is required"},
		{[]string{"worker", "--temporal", refused, "--parallel", "0"}, exitUsage, "--parallel must be at least 1"},
		{[]string{"run", "--temporal", refused, bad}, exitUsage, "bad.yaml"},
		{[]string{"run", "--temporal", refused, "--pack", "-1", good}, exitUsage, "--pack -1: give 0"},
		{[]string{"run", "--temporal", refused, "--pack", "257", good}, exitUsage, "or up to 256 nodes"},
		{[]string{"status", "--temporal", refused, "run-1", "--json"}, exitUsage, "diagnose --temporal RUN --json"},
		{[]string{"serve", "--temporal", refused, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "s.db")}, exitFailed, "temporal " + refused}, // and no journal made
		{[]string{"show", "--temporal", refused, "run-1"}, exitUsage, "give RUN (or last) and NODE"},
		{[]string{"resume", "--temporal", refused, "last"}, exitUsage, "not last"},
		{[]string{"run", "--temporal", refused, good}, exitFailed, "temporal " + refused},
		{[]string{"worker", "--temporal", refused, "--db", filepath.Join(dir, "w.db")}, exitFailed, "temporal " + refused},
		{[]string{"status", "--temporal", refused, "run-1"}, exitFailed, "temporal " + refused},
		{[]string{"status", "--temporal", refused}, exitFailed, "temporal " + refused},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"noderun"}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("noderun %s: exit %d, want %d saying %q\n%s", strings.Join(tc.args, " "), code, tc.code, tc.says, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s.db")); err == nil {
		t.Error("serve made its journal before it found the Temporal frontend unreachable")
	}
}
