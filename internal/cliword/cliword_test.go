package cliword

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestFlagError(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "older-than", Usage: "runs older than `AGE`"},
		&cli.IntFlag{Name: "limit"},
		&cli.BoolFlag{Name: "dry-run"},
	}
	for in, want := range map[string]string{
		"flag provided but not defined: -older-then":        "unknown flag --older-then; did you mean --older-than?",
		"flag provided but not defined: -zzz":               "unknown flag --zzz",
		"flag needs an argument: -older-than":               "--older-than needs AGE",
		`invalid value "x" for flag -limit: parse error`:    `--limit needs a whole number, not "x"`,
		`invalid boolean value "maybe" for -dry-run: parse`: `--dry-run takes no value (or --dry-run=false), not "maybe"`,
	} {
		if got := FlagError(in, flags); got != want {
			t.Errorf("FlagError(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	words := []string{"running", "completed", "failed", "interrupted"}
	if got := DidYouMean("complete", words); got != `; did you mean "completed"?` {
		t.Errorf("DidYouMean(complete) = %q", got)
	}
	if got := Suggest("xyz", words); got != "" {
		t.Errorf("Suggest(xyz) = %q, want none", got)
	}
}

func TestFileErr(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.yaml")
	_, err := os.Open(missing)
	if got := FileErr("--prices", err); got.Error() != "--prices "+missing+": no such file" {
		t.Errorf("FileErr = %v", got)
	}
	other := fmt.Errorf("parse: %w", errors.New("bad"))
	if FileErr("--prices", other) != other {
		t.Error("a non-file error was reworded")
	}
}
