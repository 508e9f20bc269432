package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// goWords are Go's own words, which an error for a person does not show:
// the flag package's, a Go slice, a Go type name.
var goWords = regexp.MustCompile(`flag needs an argument|for flag -|invalid boolean|\(known: \[|\b(main|ledger|profile|runner)\.[A-Za-z]|unmarshal|!!\w`)

// tempFile writes content to a file named name in a temporary directory.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Durations are printed as people write them: the README's 60 min and 90 s
// are "60m" and "90s", not Go's "1h0m0s" and "1m30s".
func TestProfilesPrintDurationsAsPeopleWriteThem(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, "profiles")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, want := range []string{"cap 60s", " 60m ", " 90s ", " 10m ", "500ms", "15s cool-down"} {
		if !strings.Contains(out, want) {
			t.Errorf("profiles lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`\d+[hm]0[ms]|\d+m\d+s`).FindString(out); m != "" {
		t.Errorf("profiles prints Go's %q:\n%s", m, out)
	}
}

// maxUsage bounds the one-line description of a command or a flag in
// --help: detail goes in the command's Description.
const maxUsage = 72

// Every command and flag has a one-line usage of at most maxUsage
// characters, without a trailing period (as every other one), and every
// command is in a --help group.
func TestUsageIsOneShortLine(t *testing.T) {
	t.Parallel()
	app := newApp(io.Discard, io.Discard)
	check := func(what, usage string) {
		t.Helper()
		plain := strings.ReplaceAll(usage, "`", "")
		switch {
		case usage == "":
			t.Errorf("%s: no usage", what)
		case strings.Contains(usage, "\n"):
			t.Errorf("%s: usage of more than one line: %q", what, usage)
		case len(plain) > maxUsage:
			t.Errorf("%s: usage of %d characters (at most %d; move the detail to the Description): %q", what, len(plain), maxUsage, usage)
		case strings.HasSuffix(usage, "."):
			t.Errorf("%s: usage ends with a period, unlike the others: %q", what, usage)
		}
	}
	checkFlags := func(path string, flags []cli.Flag) {
		for _, f := range flags {
			d, ok := f.(cli.DocGenerationFlag)
			if !ok {
				t.Errorf("%s --%s: not a documented flag", path, f.Names()[0])
				continue
			}
			check(path+" --"+f.Names()[0], d.GetUsage())
		}
	}
	check("noderun", app.Usage)
	checkFlags("noderun", app.Flags)
	var walk func(path string, cmds []*cli.Command, top bool)
	walk = func(path string, cmds []*cli.Command, top bool) {
		for _, c := range cmds {
			p := path + " " + c.Name
			check(p, c.Usage)
			if top && c.Category == "" && c.Name != "version" && c.Name != "completion" {
				t.Errorf("%s: in no --help group", p)
			}
			checkFlags(p, c.Flags)
			walk(p, c.Subcommands, false)
		}
	}
	walk("noderun", app.Commands, true)
}

// --help lists the commands in groups, in the order people need them, and
// one column of descriptions.
func TestHelpGroupsCommands(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	at := func(s string) int {
		i := strings.Index(out, s)
		if i < 0 {
			t.Fatalf("--help lacks %q:\n%s", s, out)
		}
		return i
	}
	groups := []string{"   Run:\n", "   Inspect:\n", "   Test:\n", "   Scale out:\n", "   Other:\n"}
	for i := 1; i < len(groups); i++ {
		if at(groups[i-1]) > at(groups[i]) {
			t.Errorf("group %q after %q:\n%s", groups[i-1], groups[i], out)
		}
	}
	groupOf := map[string]string{} // command names as --help lists them, to their group
	group := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "   ") && !strings.HasPrefix(l, "    ") && strings.HasSuffix(l, ":"):
			group = strings.TrimSuffix(strings.TrimSpace(l), ":")
		case strings.HasPrefix(l, "     ") && group != "":
			name, _, _ := strings.Cut(strings.TrimSpace(l), "  ")
			groupOf[name] = group
		case !strings.HasPrefix(l, " "):
			group = ""
		}
	}
	for g, cmds := range map[string][]string{
		"Run": {"run", "resume", "cancel"}, "Inspect": {"status", "events", "show", "diagnose", "report"},
		"Test": {"validate", "schema", "profiles", "sim", "chaos"}, "Scale out": {"worker"}, "Other": {"version", "completion", "help, h"},
	} {
		for _, c := range cmds {
			if groupOf[c] != g {
				t.Errorf("%s is in group %q, want %s:\n%s", c, groupOf[c], g, out)
			}
		}
	}
	col := -1
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "     ") || strings.TrimSpace(l) == "" {
			continue
		}
		name := strings.TrimSpace(l)
		i := strings.Index(l, name) + strings.Index(name, "  ")
		for i < len(l) && l[i] == ' ' {
			i++
		}
		if col < 0 {
			col = i
		} else if i != col {
			t.Errorf("descriptions not in one column (%d, %d): %q", col, i, l)
		}
	}
}

// `noderun version` prints what --version prints.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	_, flag, _ := runCLI(t, "--version")
	code, cmd, errs := runCLI(t, "version")
	if code != 0 || cmd != flag || !strings.HasPrefix(cmd, "noderun ") {
		t.Errorf("version: exit %d, %q; --version: %q\n%s", code, cmd, flag, errs)
	}
	if code, _, errs := runCLI(t, "version", "extra"); code != exitUsage || !strings.Contains(errs, `unexpected "extra"`) {
		t.Errorf("version extra: exit %d\n%s", code, errs)
	}
}

// completeWith runs the script `noderun completion bash` prints in a real
// bash, with noderun (the test binary) on PATH, and returns what bash
// offers after line (COMP_WORDS as the shell splits it; the cursor at the
// end of the last word).
func completeWith(t *testing.T, script, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	prog := `source "$1"
complete -p noderun || exit 3
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="` + line + `"
COMP_POINT=${#COMP_LINE}
fn=$(complete -p noderun | sed -n 's/.*-F \([^ ]*\).*/\1/p')
"$fn" noderun "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog, "bash", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(noderunBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash completion of %q: %v\n%s", line, err, out)
	}
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "complete ") {
			got = append(got, l)
		}
	}
	return got
}

// `noderun completion bash` is a script that completes commands, a
// command's flags and subcommands in a real bash; zsh's and fish's name the
// commands. Completing never runs the command, flags anywhere still work,
// and an unknown command still gets its suggestion.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed: the script is run in a real bash")
	}
	bin := noderunBinary(t)
	if filepath.Base(bin) != "noderun" {
		t.Fatalf("the test binary is %s: completion is bound to the name noderun", bin)
	}
	code, script, errs := runCLI(t, "completion", "bash")
	if code != 0 || !strings.Contains(script, "complete ") {
		t.Fatalf("completion bash: exit %d\n%s\n%s", code, script, errs)
	}
	file := filepath.Join(t.TempDir(), "noderun.bash")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	has := func(line string, want ...string) {
		t.Helper()
		got := completeWith(t, file, line)
		for _, w := range want {
			if !strings.Contains("\n"+strings.Join(got, "\n")+"\n", "\n"+w+"\n") {
				t.Errorf("%q completes to %v, want %s among them", line, got, w)
			}
		}
	}
	has("noderun ", "run", "resume", "status", "diagnose", "chaos", "worker", "version", "completion")
	has("noderun st", "status")
	if got := completeWith(t, file, "noderun st"); len(got) != 1 {
		t.Errorf("noderun st completes to %v, want status only", got)
	}
	has("noderun status --", "--db", "--json")
	has("noderun diagnose last --p", "--prices")
	has("noderun sim ", "serve")
	has("noderun completion ", "bash", "zsh", "fish")
	has("noderun --log", "--log-level", "--log-format")
	for _, line := range []string{"noderun ", "noderun status --"} {
		for _, w := range completeWith(t, file, line) {
			if strings.Contains(w, "generate-bash-completion") {
				t.Errorf("%q offers the hidden %s", line, w)
			}
		}
	}
	// Completing a command line does not run it: status with a journal
	// that does not exist prints nothing and creates nothing.
	dir := t.TempDir()
	db := filepath.Join(dir, "none.db")
	for _, args := range [][]string{
		{"status", "last", "--db", db, completionFlag},
		{"run", "--db", db, "../../testdata/graphs/demo.yaml", completionFlag},
		{"run", "--db", db, "--", "../../testdata/graphs/demo.yaml", completionFlag},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "noderun:") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v wrote %v", args, entries)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		code, out, errs := runCLI(t, "completion", shell)
		if code != 0 || out == "" {
			t.Errorf("completion %s: exit %d\n%s", shell, code, errs)
		}
		for _, c := range []string{"noderun", "generate-bash-completion"} {
			if shell == "fish" && c == "generate-bash-completion" {
				c = "status" // fish's lists the commands themselves
			}
			if !strings.Contains(out, c) {
				t.Errorf("completion %s lacks %q:\n%s", shell, c, out)
			}
		}
		if shell == "fish" {
			for _, c := range []string{"'run'", "'diagnose'", "'worker'", "-l prices", "-l db"} {
				if !strings.Contains(out, c) {
					t.Errorf("completion fish lacks %s:\n%s", c, out)
				}
			}
			if strings.Contains(out, "generate-bash-completion") {
				t.Errorf("completion fish offers the hidden completion flag")
			}
		}
	}
	if code, _, errs := runCLI(t, "completion", "tcsh"); code != exitUsage || !strings.Contains(errs, `unknown shell "tcsh" (known: bash, zsh, fish)`) {
		t.Errorf("completion tcsh: exit %d\n%s", code, errs)
	}
}

// Go's flag errors come out in noderun's words, naming what the flag wants.
func TestFlagErrorsInNoderunWords(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "g.yaml", "--input"}, "--input needs KEY=VALUE"},
		{[]string{"run", "--input", "novalue", "g.yaml"}, `--input "novalue": want KEY=VALUE, or KEY=@FILE for a file's content`},
		{[]string{"report", "last", "-o"}, "--output needs FILE"},
		{[]string{"status", "--db"}, "--db needs FILE"},
		{[]string{"resume", "last", "--retry"}, "--retry needs NODE"},
		{[]string{"run", "g.yaml", "--parallel", "many"}, `--parallel needs a whole number, not "many"`},
		{[]string{"events", "last", "--follow=maybe"}, `--follow takes no value (or --follow=false), not "maybe"`},
		{[]string{"--log-level"}, "--log-level needs a value"},
		{[]string{"status", "---db", "x"}, `"---db" is not a flag`},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) || !strings.Contains(errs, "usage: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr lacks %q:\n%s", c.args, code, out, c.want, errs)
		}
		if m := goWords.FindString(errs); m != "" {
			t.Errorf("%v: Go's words %q:\n%s", c.args, m, errs)
		}
	}
}
