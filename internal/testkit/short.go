package testkit

import "testing"

// RealPeer skips tb under -short (`go test -short ./...`, the edit loop):
// tb runs peer, a real third-party program (an agent CLI, the Temporal dev
// server, Chromium, nginx, Jaeger, promtool). Each of those takes seconds
// of CPU to start, and together they are most of the suite's time. Every
// helper that finds or starts a peer calls it first, so a test that needs
// one is skipped before it has done any work.
//
// `make test` and .ci/run have no -short: there a missing peer fails the
// test, never skips it.
func RealPeer(tb testing.TB, peer string) {
	tb.Helper()
	SkipInShort(tb, "runs "+peer+", a real third-party peer")
}

// SkipInShort skips tb under -short, saying why it is left to the full suite.
func SkipInShort(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(why + ": skipped in -short (the edit loop); make test and .ci/run run it")
	}
}
