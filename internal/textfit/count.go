package textfit

import (
	"strconv"
	"strings"
)

// Count is n and the noun, plural unless n is 1: "1 node", "2 nodes",
// "0 retries", "3 thread mismatches". Every count a person reads is
// written with it, so that no line says "1 nodes" or "attempt(s)".
func Count(n int, noun string) string {
	return strconv.Itoa(n) + " " + Noun(n, noun)
}

// Noun is noun, plural unless n is 1 (English rules for the words noderun
// counts: retry → retries, mismatch → mismatches, byte → bytes).
func Noun(n int, noun string) string {
	if n == 1 || noun == "" {
		return noun
	}
	switch {
	case strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"), strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"):
		return noun + "es"
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}
