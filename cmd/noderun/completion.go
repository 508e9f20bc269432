package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/internal/cliword"
)

// Shell completion is urfave/cli's: with EnableBashCompletion, a command line
// ending in --generate-bash-completion prints the words that may come next
// (commands, then a command's flags once a "-" is typed) instead of running.
// The bash and zsh scripts below are the library's (autocomplete/ in the
// urfave/cli v2 module) with the program's name filled in; fish's is the
// library's App.ToFishCompletion.

// completionFlag is the flag the shell scripts append to ask for completions.
const completionFlag = "--generate-bash-completion"

// completionShells are the shells `noderun completion` writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

// bashCompletion is urfave/cli's autocomplete/bash_autocomplete for PROG,
// with two changes: it works without the bash-completion package (which
// provides _get_comp_words_by_ref), and a completed word gets its space.
const bashCompletion = `# bash completion for PROG; load it with: source <(PROG completion bash)

# Without the bash-completion package (which has _init_completion), the
# words come from COMP_WORDS.
_PROG_init_completion() {
  COMPREPLY=()
  if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
    _get_comp_words_by_ref "$@" cur prev words cword
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
  fi
}

_PROG_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base words cword prev requestComp
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    else
      _PROG_init_completion -n "=:" || return
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}

complete -o bashdefault -o default -F _PROG_bash_autocomplete PROG
`

// zshCompletion is urfave/cli's autocomplete/zsh_autocomplete for PROG.
const zshCompletion = `#compdef PROG
# zsh completion for PROG; load it with: source <(PROG completion zsh)
# (after compinit), or save it as _PROG in a directory of your $fpath.

_PROG_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _PROG_zsh_autocomplete PROG
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: "Completes commands, and a command's flags once a - is typed.\n\n" +
			"Examples:\n  source <(noderun completion bash)                # this bash; add it to ~/.bashrc to keep it\n" +
			"  source <(noderun completion zsh)                 # this zsh (after compinit)\n" +
			"  noderun completion fish > ~/.config/fish/completions/noderun.fish",
		BashComplete: func(c *cli.Context) {
			if c.NArg() == 0 {
				fmt.Fprintln(c.App.Writer, strings.Join(completionShells, "\n"))
			}
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 1, 1, "give a shell: bash, zsh or fish"); err != nil {
				return err
			}
			shell := c.Args().First()
			if !slices.Contains(completionShells, shell) {
				return usageErr(fmt.Errorf("completion: unknown shell %q (known: %s)%s\n%s", shell,
					strings.Join(completionShells, ", "), cliword.DidYouMean(shell, completionShells), shortUsage("noderun completion", c.Command)))
			}
			name := c.App.Name
			var script string
			switch shell {
			case "bash":
				script = strings.ReplaceAll(bashCompletion, "PROG", name)
			case "zsh":
				script = strings.ReplaceAll(zshCompletion, "PROG", name)
			case "fish":
				var err error
				if script, err = c.App.ToFishCompletion(); err != nil {
					return &exitError{exitFailed, fmt.Errorf("completion fish: %w", err)}
				}
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}

// completionArgs takes a completion request out of args: the request is the
// line without its trailing completionFlag, which intersperse must not move
// (urfave/cli finds it only as the last argument). ok is false for a line
// that is not a completion request.
//
// A word "--" being completed is taken as "-": urfave/cli offers no
// completion at all once "--" is on the line (every word after it is an
// argument), but the word under the cursor is the start of a flag (the
// flags it offers come from os.Args, which keeps the "--").
func completionArgs(args []string) (line []string, ok bool) {
	n := len(args)
	if n < 2 || args[n-1] != completionFlag {
		return args, false
	}
	line = slices.Clone(args[:n-1])
	if len(line) > 1 && line[len(line)-1] == "--" {
		line[len(line)-1] = "-"
	}
	return line, true
}
