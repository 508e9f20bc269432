// Package cliword says the command line's mistakes in noderun's words, as
// gh and kubectl do: "unknown flag --jsn; did you mean --json?" rather than
// Go's "flag provided but not defined: -jsn", "--input needs KEY=VALUE"
// rather than "flag needs an argument: -input", and a "did you mean" for
// any word typed from a known list.
package cliword

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// FlagError says a flag parse error of urfave/cli (Go's flag package) in
// noderun's words; flags are the command's and the app's.
func FlagError(msg string, flags []cli.Flag) string {
	bad, ok := strings.CutPrefix(msg, "flag provided but not defined: ")
	if !ok {
		return flagError(msg, flags)
	}
	msg = "unknown flag --" + strings.TrimLeft(bad, "-")
	var names []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue // --generate-bash-completion is the shell's, not the operator's
		}
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	if s := Suggest(strings.TrimLeft(bad, "-"), names); s != "" {
		msg += fmt.Sprintf("; did you mean --%s?", s)
	}
	return msg
}

// The errors of Go's flag package, which urfave/cli passes on.
var (
	flagNeedsArg  = regexp.MustCompile(`^flag needs an argument: -+(\S+)$`)
	flagBadValue  = regexp.MustCompile(`(?s)^invalid value ("(?:[^"\\]|\\.)*") for flag -+([^:\s]+): (.*)$`)
	flagBadBool   = regexp.MustCompile(`^invalid boolean (?:value ("(?:[^"\\]|\\.)*") for|flag) -*([^:\s]+)`)
	flagBadSyntax = regexp.MustCompile(`^bad flag syntax: (.*)$`)
)

// flagError says a flag parse error of Go's flag package in noderun's words:
// "flag needs an argument: -input" is "--input needs KEY=VALUE".
func flagError(msg string, flags []cli.Flag) string {
	if m := flagNeedsArg.FindStringSubmatch(msg); m != nil {
		f := lookupFlag(flags, m[1])
		return fmt.Sprintf("%s needs %s", flagName(f, m[1]), flagWants(f))
	}
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		if strings.HasPrefix(m[3], "--") { // the flag's own message (--input's)
			return m[3]
		}
		f := lookupFlag(flags, m[2])
		return fmt.Sprintf("%s needs %s, not %s", flagName(f, m[2]), flagWants(f), m[1])
	}
	if m := flagBadBool.FindStringSubmatch(msg); m != nil {
		n := flagName(lookupFlag(flags, m[2]), m[2])
		return fmt.Sprintf("%s takes no value (or %s=false), not %s", n, n, cmp.Or(m[1], "that one"))
	}
	if m := flagBadSyntax.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%q is not a flag: flags are --NAME, --NAME VALUE or --NAME=VALUE", m[1])
	}
	return msg
}

// flagName is how a flag is written: --output for -o.
func flagName(f cli.Flag, name string) string {
	if f != nil {
		name = f.Names()[0]
	}
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// lookupFlag is the flag of flags named name, or nil.
func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// flagWants is what a flag's value is, for an error: the placeholder of its
// usage (`FILE` in "the run journal (`FILE`)"), or its type's.
func flagWants(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		if _, ph, ok := strings.Cut(d.GetUsage(), "`"); ok {
			if ph, _, ok := strings.Cut(ph, "`"); ok && ph != "" {
				return ph
			}
		}
	}
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "a whole number"
	case *cli.Float64Flag:
		return "a number"
	case *cli.DurationFlag:
		return "a duration (500ms, 90s, 10m)"
	}
	return "a value"
}

// DidYouMean is `; did you mean "x"?` for the word of words closest to w,
// or "" when none is close enough to be a typo.
func DidYouMean(w string, words []string) string {
	if s := Suggest(w, words); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// Suggest is the closest of words to w by Jaro-Winkler similarity (as
// urfave/cli suggests), or "" when none is close enough to be a typo.
func Suggest(w string, words []string) string {
	best, score := "", 0.0
	for _, x := range words {
		if d := smetrics.JaroWinkler(w, x, 0.7, 4); d > score {
			best, score = x, d
		}
	}
	if score < 0.75 {
		return ""
	}
	return best
}

// FileErr says that a file given on the command line cannot be read, in
// noderun's words: "--prices p.yaml: no such file" rather than Go's
// "open p.yaml: no such file or directory"; flag may end with the path
// already ("--input k=@p.txt"). Any other error is err.
func FileErr(flag string, err error) error {
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok || !strings.HasSuffix(err.Error(), pe.Error()) {
		return err
	}
	why := pe.Err.Error()
	switch {
	case errors.Is(pe.Err, fs.ErrNotExist):
		why = "no such file"
	case errors.Is(pe.Err, fs.ErrPermission):
		why = "permission denied"
	case errors.Is(pe.Err, syscall.EISDIR):
		why = "a directory, not a file"
	}
	if !strings.HasSuffix(flag, pe.Path) {
		flag += " " + pe.Path
	}
	return fmt.Errorf("%s: %s", flag, why)
}
