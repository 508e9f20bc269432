// Package shell quotes the words of the commands noderun prints for an
// operator to paste (`noderun resume RUN --db FILE`), so that they work in a
// POSIX shell whatever a path holds.
package shell

import "strings"

// Quote returns s as one word for a POSIX shell: as it is when it holds
// only characters no shell gives a meaning to, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' || r == '=' || r == ',' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
