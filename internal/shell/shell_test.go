package shell

import (
	"os/exec"
	"testing"
)

// A quoted word is read back by a real shell as the word it was.
func TestQuote(t *testing.T) {
	for _, s := range []string{"run.db", "/tmp/my runs/it's.db", "", "a=b,c", "$HOME", "x;rm -rf /", "tab\there", "ünï", "'", `\`} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: the shell read %q (%v)", s, Quote(s), out, err)
		}
	}
	if Quote("noderun.db") != "noderun.db" {
		t.Errorf("a plain word is quoted: %s", Quote("noderun.db"))
	}
}
